"""The run server (eosmirror/spark/server.py): real brokers, a real long-lived local Spark, the real CLI.

One server for the module, started with fault rules that hold each slot inside its first
transaction (test_kill's hold). The rules fire once, on a marker file: while the markers exist the
rules are spent, so the copy test runs unheld; the kill test removes them.

1. Runs through the server copy exactly once, and run in the server's Spark: the slots' workers are
   the server JVM's descendants, and the report's "process start" is the client's, not the server's.
2. A client killed while its slots hold open transactions ends its run as a killed spark-submit does:
   the server revokes the run's lease, the slots' lifeline aborts their transactions (LSO = HW on
   every target partition within the budget), and the server lives on and serves the next run, which
   copies every record exactly once. The same through Airflow: the copy task timed out (on_kill).
3. Two served follow runs of one mirror hand over as spark-submit runs do, under production.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from eosmirror.slot import lifeline
from eosmirror.spark import serverclient
from tests.helpers import create_topic, mirrors_file, read_all, seed_sequence, values
from tests.support.kill import HOLD_SECONDS, PARTITIONS, RECORDS, expected
from tests.support.run_server import (
    client_result,
    held_server,
    killed_client_ends_its_slots,
    mirror_file,
    run_client,
    served_run,
    target_values,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from held_server(tmp_path_factory.mktemp("holds"))


def test_runs_through_the_server_copy_exactly_once_in_its_spark(server, source_conf, target_conf, unique, tmp_path):
    topic = create_topic(source_conf, unique("srv"), partitions=PARTITIONS)
    name = unique("m")
    config = mirror_file(tmp_path, name, topic)
    seed_sequence(source_conf, topic, PARTITIONS, RECORDS // 2)
    first = served_run(name, config, tmp_path / "first.json")
    seed_sequence(source_conf, topic, PARTITIONS, RECORDS // 2, prefix="second-")
    second = served_run(name, config, tmp_path / "second.json")

    assert (first["records"], second["records"]) == (RECORDS // 2 * PARTITIONS,) * 2, (first, second)
    want = {k: [f"{k}-{n}".encode() for n in range(RECORDS // 2)]
            + [f"second-{k}-{n}".encode() for n in range(RECORDS // 2)] for k in range(PARTITIONS)}
    assert target_values(target_conf, topic) == want
    for slot in second["slots"]:   # the slots ran in the server's Spark, not in a Spark of their own
        jvm = lifeline.jvm_ancestor(slot["attempt_pid"])
        assert jvm is not None and jvm.pid == server["jvm_pid"], (
            f"slot {slot['slot']} ran in pid {slot['attempt_pid']}, whose JVM is {jvm}, not the server's "
            f"{server['jvm_pid']}")
    # The client's start, not the server's: shorter than the server's age, which spans both runs and
    # its own start (an outcome, not a speed check).
    server_age = time.monotonic() - server["started_monotonic"]
    assert second["steps"]["process start"] < server_age, (second["steps"], server_age)


def test_a_killed_client_ends_its_slots_and_the_server_serves_on(server, source_conf, target_conf, unique, tmp_path):
    killed_client_ends_its_slots(server, source_conf, target_conf, unique, tmp_path, "local master")


def test_an_airflow_copy_task_runs_in_the_server_with_its_connections(server, source_conf, target_conf, unique,
                                                                      tmp_path, monkeypatch, capfd, caplog):
    """A mirror with `airflow.run_server: true` whose source is an Airflow connection the server's own
    environment does not have: the copy task hands the resolved connections over as a 0600 file's path
    (as it hands them to spark-submit), the run copies in the server's Spark, and the file is removed."""
    from tests.airflow_helpers import (
        assert_secrets_dirs_removed,
        record_temp_dirs,
        run_dag,
        task_log_text,
        task_states,
        xcoms,
    )

    caplog.set_level("INFO")
    made = record_temp_dirs(monkeypatch)
    topic = create_topic(source_conf, unique("af"), partitions=PARTITIONS)
    seed_sequence(source_conf, topic, PARTITIONS, 50)
    conn_id = unique("conn").replace("-", "_")
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "kafka", "extra": source_conf}))
    name = unique("m")
    monkeypatch.setenv("EOSMIRROR_CONFIG", str(mirrors_file(tmp_path / "mirrors.yaml", [{
        "name": name, "source": {"connection": conn_id}, "target": {"local": "target"},
        "topics": [re.escape(topic)], "slots": PARTITIONS, "max_transaction_seconds": 10,
        "airflow": {"schedule": "*/10 * * * *", "retries": 0, "run_server": True}}])))

    dr = run_dag(f"eosmirror__{name}")
    logs = task_log_text(capfd, caplog)
    assert str(dr.state) == "success", f"{task_states(dr)}\n{logs[-3000:]}"
    assert "the run goes to the run server" in logs, logs[-3000:]
    assert target_values(target_conf, topic) == {k: [f"{k}-{n}".encode() for n in range(50)] for k in range(PARTITIONS)}
    copied = xcoms(dr).get("copy") or {}
    assert copied.get("records") == 50 * PARTITIONS, copied
    for slot in copied["slots"]:
        jvm = lifeline.jvm_ancestor(slot["attempt_pid"])
        assert jvm is not None and jvm.pid == server["jvm_pid"], (slot, jvm, server["jvm_pid"])
    assert_secrets_dirs_removed(made)


def test_an_airflow_copy_task_killed_in_the_server_ends_its_slots(server, source_conf, target_conf, unique, tmp_path,
                                                                  monkeypatch, capfd, caplog):
    """The copy task of a mirror with `airflow.run_server: true` times out while its slots, in the
    server, hold their transactions (test_kill's strike): on_kill kills the task's client (the process
    the provider's hook started), which ends the run's lease, and fences the mirror. The target is
    unblocked within the budget, the server serves on, and the next run copies every record once."""
    import datetime as dt
    import uuid

    from confluent_kafka.admin import AdminClient

    from tests.airflow_helpers import dagbag, task_log_text, task_states
    from tests.support.kill import RUN_MARK, assert_within_budgets, strike_inside_transactions

    caplog.set_level("INFO")
    topic = create_topic(source_conf, unique("afkill"), partitions=PARTITIONS)
    seed_sequence(source_conf, topic, PARTITIONS, RECORDS)
    name = unique("m")
    monkeypatch.setenv("EOSMIRROR_CONFIG", str(mirrors_file(tmp_path / "mirrors.yaml", [{
        "name": name, "source": {"local": "source"}, "target": {"local": "target"}, "topics": [re.escape(topic)],
        "slots": PARTITIONS, "max_transaction_seconds": 60,
        "airflow": {"schedule": None, "retries": 0, "run_server": True}}])))
    mark = uuid.uuid4().hex
    monkeypatch.setenv(RUN_MARK, mark)   # the client inherits it: the run's only process outside the server
    for marker in server["markers"].iterdir():
        marker.unlink()   # the holds fire again: each slot sleeps inside its first transaction
    dag = dagbag().get_dag(f"eosmirror__{name}")
    dag.get_task("copy").execution_timeout = dt.timedelta(seconds=HOLD_SECONDS - 10)

    dr, kill = strike_inside_transactions(dag, AdminClient(target_conf), topic, mark)
    logs = task_log_text(capfd, caplog)
    states = task_states(dr)
    assert str(dr.state) == "failed" and states["copy"] == "failed" and states["publish"] != "success", states
    assert "the run goes to the run server" in logs, logs[-3000:]
    assert_within_budgets(kill["times"], "Airflow copy task in the run server timed out")
    on_kill = [line for line in logs.splitlines() if "on_kill:" in line]
    assert any("Spark application stopped" in line for line in on_kill), on_kill or logs[-3000:]
    answer = serverclient.status()
    assert answer is not None and answer["pid"] == server["pid"], f"the server did not live on: {answer}"
    after = served_run(name, Path(os.environ["EOSMIRROR_CONFIG"]), tmp_path / "after.json")
    assert after["status"] == "ok", after
    assert target_values(target_conf, topic) == expected()


def test_a_served_follow_run_hands_over_to_the_next_served_run(server, source_conf, target_conf, target_cluster,
                                                              unique, tmp_path):
    """Two follow runs of one mirror in the server at once, as a schedule makes them: the first copies
    what arrives after its bound until the second's slots fence it; production never stops; the
    target then holds exactly the source's committed records (real read_committed consumers)."""
    import threading

    from eosmirror.core.errors import TargetMismatchError
    from eosmirror.kafka import readers
    from tests.support.load import produce_until, wait_grown
    from tests.support.waiting import wait_for

    topic = create_topic(source_conf, unique("srvfollow"), partitions=PARTITIONS)
    seed_sequence(source_conf, topic, PARTITIONS, 50, prefix="seed-")
    name = unique("m")
    config = mirrors_file(tmp_path / "mirrors.yaml", [{
        "name": name, "source": {"local": "source"}, "target": {"local": "target"}, "topics": [re.escape(topic)],
        "slots": PARTITIONS, "max_transaction_seconds": 0.5, "follow": True, "follow_max_seconds": 60}])
    stop, batches = threading.Event(), []
    production = threading.Thread(target=lambda: batches.append(produce_until(source_conf, topic, unique("tx"), stop,
                                                                                   list(range(PARTITIONS)))))
    production.start()
    first = second = None
    try:
        first = run_client(name, config, tmp_path / "first.json", "--follow-seconds", "60")

        def copied_after_the_bound():
            try:
                ends = [readers.watermarks(target_cluster, topic, k)[1] for k in range(PARTITIONS)]
            except TargetMismatchError:   # the first run has not created the target topic yet
                return False, "no target topic yet"
            return min(ends) >= 300 and first.poll() is None, (ends, first.poll())

        wait_for("the first served run to copy records produced after its bound", copied_after_the_bound, 60)
        second = run_client(name, config, tmp_path / "second.json", "--follow-seconds", "5")
        a = client_result(first, tmp_path / "first.json", "the first (handed-over) served follow run")
        wait_grown(target_conf, topic, range(PARTITIONS), 20, "the second served run copying while production goes on")
    except BaseException:
        for proc in (first, second):   # nothing of a failed test may outlive it
            if proc is not None and proc.poll() is None:
                proc.kill()
        raise
    finally:
        stop.set()
        production.join(30)
    b = client_result(second, tmp_path / "second.json", "the second served follow run")
    assert a["status"] == "ok" and {s["status"] for s in a["slots"]} == {"handed-over"}, a["slots"]
    assert b["status"] == "ok" and {s["status"] for s in b["slots"]} == {"follow-bound"}, b["slots"]
    assert batches and batches[0] >= 20, batches
    for k in range(PARTITIONS):
        source, target = values(read_all(source_conf, topic, k)), values(read_all(target_conf, topic, k))
        assert len(target) == len(set(target)), f"partition {k}: duplicates on the target"
        assert target == source, (f"partition {k}: {len(set(source) - set(target))} lost, "
                                  f"{len(set(target) - set(source))} foreign")
        assert not [v for v in target if v.startswith(b"aborted-")]
