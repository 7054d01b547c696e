"""A killed run stops: its slot processes exit and the target is unblocked at once.

Every slot is held inside its first transaction (an EOSMIRROR_FAULTS sleep of HOLD_SECONDS after its
first records were produced), so the target partitions' last stable offset (LSO) is below their high
watermark (HW) when the run is killed. The mirror's transaction timeout (2 * 60 + 30 s) and the hold
are both far above the budgets below: only the slot aborting its own transaction (the lifeline,
eosmirror.slot.lifeline) or fencing (the Airflow task's on_kill) can unblock the target in time.

Which processes belong to a run: every process whose environment carries this test's RUN_MARK
(spark-submit passes its environment to the Python driver, pyspark.daemon and the Python workers;
the daemon puts the workers in a process group of their own, so they survive a killpg of the run).
Both measured times are printed (run pytest with -s to see them).

The lifeline alone, on a fake process tree without broker or Spark, is tested in
tests/unit/test_lifeline_tree.py.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from eosmirror.slot import lifeline
from eosmirror.spark import submit
from tests.helpers import create_topic, faults_env, mirror, mirrors_file, read_all, run, seed_sequence, values
from tests.support.kill import (
    HOLD_SECONDS,
    PARTITIONS,
    RECORDS,
    RUN_MARK,
    UNBLOCK_BUDGET,
    assert_within_budgets,
    expected,
    kill_leftovers,
    measure_after_kill,
    run_processes,
    strike_inside_transactions,
    wait_all_blocked,
)

pytestmark = pytest.mark.e2e

MAX_TRANSACTION_SECONDS = 60  # -> transaction.timeout.ms = 150 s: the broker's own abort comes far too late


# --- what the test observes -------------------------------------------------------------------------


def hold_rules(tmp_path: Path) -> dict[str, str]:
    return faults_env(*({"point": "in_transaction", "action": "sleep", "seconds": HOLD_SECONDS, "slot": k,
                         "once": str(tmp_path / f"hold-{k}")} for k in range(PARTITIONS)))


def check_after_kill(proc, killed_at: float, mark: str, admin, topic: str, folder: Path, how: str,
                     unblock_budget: float = UNBLOCK_BUDGET) -> None:
    """After the SIGKILL: every process of the run gone and the target unblocked within the budgets
    (the stacks of a worker that outlived its run are added to the failure)."""
    proc.wait(10)
    times = measure_after_kill(killed_at, mark, admin, topic, unblock_budget)
    if times["no_process"] is None:   # where is each thread of a worker that outlived its run?
        times["left"] = f"{times['left']}\n{leftover_stacks(set(run_processes(mark)), folder)}"
    assert_within_budgets(times, how, unblock_budget)


def clean_up(mark: str, proc, log) -> None:
    """Nothing of this test may outlive it, whatever failed."""
    kill_leftovers(mark)
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)
    log.close()


def copy_everything_once(m, target_conf, topic: str) -> None:
    """A run after the kill copies every record exactly once: the killed slots committed nothing."""
    report = run(m)
    assert report["status"] == "ok", report
    assert {k: values(read_all(target_conf, topic, k)) for k in range(PARTITIONS)} == expected()


def leftover_stacks(pids, folder: Path) -> str:
    """Every Python thread's stack of the leftover workers (SIGUSR2 -> the lifeline's faulthandler)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGUSR2)
        except ProcessLookupError:
            pass

    def written() -> list[Path]:
        return [path for path in sorted(folder.glob("worker-*.stacks"))
                if int(path.stem.split("-")[1]) in pids and path.read_text()]

    deadline = time.monotonic() + 5     # the faulthandler writes at once; a pid that is no Python writes none
    while len(written()) < len(pids) and time.monotonic() < deadline:
        time.sleep(0.1)                 # the poll interval of this bounded wait
    missing = set(pids) - {int(path.stem.split("-")[1]) for path in written()}
    return "\n".join([f"--- stacks of {path.name}\n{path.read_text()[-6000:]}" for path in written()]
                     + ([f"(no stacks within 5 s from pids {sorted(missing)})"] if missing else []))


def on_kill_span(logged: list[str]) -> float | None:
    """Seconds between the first and last timestamped "on_kill:" line of the task log (None if none)."""
    stamps = [dt.datetime.fromisoformat(line.split()[0].replace("Z", "+00:00")) for line in logged
              if line[:4].isdigit()]
    return round((max(stamps) - min(stamps)).total_seconds(), 2) if stamps else None


# --- spark-submit killed -------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["spark-submit", "process-group"])
def test_sigkill_of_spark_submit_stops_every_slot_and_unblocks_the_target(
        source_conf, target_conf, unique, tmp_path, target):
    from confluent_kafka.admin import AdminClient

    topic = create_topic(source_conf, unique("kill"), partitions=PARTITIONS)
    seed_sequence(source_conf, topic, PARTITIONS, RECORDS)
    m = mirror(unique("m"), [topic], slots=PARTITIONS, max_transaction_seconds=MAX_TRANSACTION_SECONDS)
    config_file = mirrors_file(tmp_path / "mirrors.yaml", [{
        "name": m.name, "source": {"local": "source"}, "target": {"local": "target"}, "topics": list(m.topics),
        "slots": PARTITIONS, "max_transaction_seconds": MAX_TRANSACTION_SECONDS}])
    mark = uuid.uuid4().hex
    cmd = submit.command("local[2]", submit.job_arguments(m.name, config_path=str(config_file)),
                         submit.spark_conf({"spark.ui.enabled": "false"}, f"test-{m.name}"))
    env = {**submit.process_env(), **hold_rules(tmp_path), RUN_MARK: mark, lifeline.STACK_DUMP_ENV: str(tmp_path)}
    log = open(tmp_path / "spark.log", "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    admin = AdminClient(target_conf)
    try:
        wait_all_blocked(admin, topic, 180, lambda: proc.poll() is None)
        before = run_processes(mark)
        workers = [c for c in before.values() if "pyspark" in c]
        assert workers, f"no Python worker found among the run's processes: {before}"
        killed_at = time.monotonic()
        if target == "spark-submit":
            os.kill(proc.pid, signal.SIGKILL)
        else:
            os.killpg(proc.pid, signal.SIGKILL)
        check_after_kill(proc, killed_at, mark, admin, topic, tmp_path,
                         f"SIGKILL of the {target} ({len(before)} processes, {len(workers)} pyspark)")
    finally:
        clean_up(mark, proc, log)
    copy_everything_once(m, target_conf, topic)


# --- a follow run killed while it follows ------------------------------------------------------------------

FOLLOW_TRANSACTION_SECONDS = 1.0   # -> transaction.timeout.ms = 32 s: far above FOLLOW_UNBLOCK_BUDGET
FOLLOW_UNBLOCK_BUDGET = 10.0


def test_sigkill_of_a_following_spark_run_stops_every_slot_and_unblocks_the_target(
        source_conf, target_conf, unique, tmp_path):
    """The run starts on an empty topic, so whatever it copies it copies while following; the
    records are produced once every slot has committed a follow round, and each slot is then held
    inside the follow round's transaction that copies them, and the run is SIGKILLed."""
    from confluent_kafka.admin import AdminClient

    from tests.helpers import progress_of

    topic = create_topic(source_conf, unique("fkill"), partitions=PARTITIONS)
    m = mirror(unique("m"), [topic], slots=PARTITIONS, follow=True, follow_max_seconds=300,
               max_transaction_seconds=FOLLOW_TRANSACTION_SECONDS)
    config_file = mirrors_file(tmp_path / "mirrors.yaml", [{
        "name": m.name, "source": {"local": "source"}, "target": {"local": "target"}, "topics": list(m.topics),
        "slots": PARTITIONS, "follow": True, "follow_max_seconds": 300,
        "max_transaction_seconds": FOLLOW_TRANSACTION_SECONDS}])
    mark = uuid.uuid4().hex
    follow_until = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=240)).isoformat()
    cmd = submit.command("local[2]", submit.job_arguments(m.name, config_path=str(config_file),
                                                          follow_until=follow_until),
                         submit.spark_conf({"spark.ui.enabled": "false"}, f"test-{m.name}"))
    env = {**submit.process_env(), **hold_rules(tmp_path), RUN_MARK: mark, lifeline.STACK_DUMP_ENV: str(tmp_path)}
    log = open(tmp_path / "spark.log", "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    admin = AdminClient(target_conf)
    try:
        deadline, seen = time.monotonic() + 150, {}
        while time.monotonic() < deadline:   # every slot has committed a (progress-only) follow round
            assert proc.poll() is None, f"the follow run ended early (exit {proc.returncode}): see {log.name}"
            try:
                seen = progress_of(target_conf, m, topic, PARTITIONS)
            except Exception as exc:  # noqa: BLE001 - the progress group does not exist yet
                seen = {"error": str(exc)}
            if all(seen.get(p) is not None for p in range(PARTITIONS)):
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"the run did not follow within 150 s; progress seen: {seen}")
        seed_sequence(source_conf, topic, PARTITIONS, RECORDS)
        wait_all_blocked(admin, topic, 60, lambda: proc.poll() is None)
        killed_at = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL)
        check_after_kill(proc, killed_at, mark, admin, topic, tmp_path, "SIGKILL of a following spark-submit",
                         FOLLOW_UNBLOCK_BUDGET)
    finally:
        clean_up(mark, proc, log)
    copy_everything_once(m, target_conf, topic)


# --- the Airflow copy task killed ------------------------------------------------------------------------


def test_airflow_copy_task_killed_on_timeout_stops_spark_and_fences(
        source_conf, target_conf, unique, tmp_path, monkeypatch, capfd, caplog):
    """dag.test() runs the copy task in this process with an execution_timeout: when it strikes,
    Airflow's task runner raises AirflowTaskTimeout in execute and calls the operator's on_kill, the
    same on_kill that the supervisor's SIGTERM (task marked failed or cleared) calls. The slots' held
    transactions begin once Spark is up (10-30 s on a quiet machine, over 75 s at load 30) and last
    HOLD_SECONDS. So that the timeout strikes inside them whatever the load, a watcher brings
    Airflow's own timeout alarm (SIGALRM, armed by its task runner for execution_timeout) forward
    to the moment every target partition has an open transaction; execution_timeout itself (140 s)
    is only the fallback, still inside HOLD_SECONDS. The test checks that it struck there."""
    from confluent_kafka.admin import AdminClient

    from tests.airflow_helpers import dagbag, task_log_text, task_states

    caplog.set_level("INFO")

    topic = create_topic(source_conf, unique("akill"), partitions=PARTITIONS)
    seed_sequence(source_conf, topic, PARTITIONS, RECORDS)
    name = unique("m")
    mirrors_file(tmp_path / "mirrors.yaml", [{
        "name": name, "source": {"local": "source"}, "target": {"local": "target"}, "topics": [topic],
        "slots": PARTITIONS, "max_transaction_seconds": MAX_TRANSACTION_SECONDS,
        "airflow": {"schedule": None, "retries": 0}}])
    monkeypatch.setenv("EOSMIRROR_CONFIG", str(tmp_path / "mirrors.yaml"))
    mark = uuid.uuid4().hex
    for key, value in {**hold_rules(tmp_path), RUN_MARK: mark}.items():
        monkeypatch.setenv(key, value)   # spark-submit inherits this process's environment
    admin = AdminClient(target_conf)
    dag = dagbag().get_dag(f"eosmirror__{name}")
    dag.get_task("copy").execution_timeout = dt.timedelta(seconds=HOLD_SECONDS - 10)

    dr, kill = strike_inside_transactions(dag, admin, topic, mark)
    task_logs = task_log_text(capfd, caplog)   # read before printing the times
    states = task_states(dr)
    assert str(dr.state) == "failed" and states["copy"] == "failed" and states["publish"] != "success", states
    logged = [line for line in task_logs.splitlines() if "on_kill:" in line]
    print(f"\n[Airflow on_kill] on_kill's log lines span {on_kill_span(logged)} s; the alarm struck "
          f"with every slot inside its transaction: {kill['blocked_before']}")
    assert_within_budgets(kill["times"], "Airflow copy task timed out")
    assert any("Spark application stopped" in line for line in logged), logged or task_logs[-3000:]
    assert any(f"fenced eosmirror.{name}.planner" in line for line in logged), logged
    assert "are unblocked (last stable offset = high watermark)" in task_logs, logged
    m = mirror(name, [topic], slots=PARTITIONS, max_transaction_seconds=MAX_TRANSACTION_SECONDS)
    monkeypatch.delenv("EOSMIRROR_FAULTS")
    copy_everything_once(m, target_conf, topic)
