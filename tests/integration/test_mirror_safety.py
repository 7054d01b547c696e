"""Exactly once under re-runs, killed attempts, overlapping runs, generation changes and zombies;
loud failures that write nothing."""

import json
import threading
import time

import pytest
from confluent_kafka.admin import AdminClient

from eosmirror.core import naming
from eosmirror.core.errors import DataLossError, TargetMismatchError
from eosmirror.kafka import readers, state
from tests.helpers import (
    cli,
    create_topic,
    faults_env,
    mirror,
    producer,
    progress_of,
    read_all,
    run,
    seed_sequence,
    values,
    write_mirror_file,
)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def expected(partitions: int, count: int, prefix: str = "") -> dict[int, list[bytes]]:
    return {k: [f"{prefix}{k}-{n}".encode() for n in range(count)] for k in range(partitions)}


def target_values(target_conf, topic, partitions) -> dict[int, list[bytes]]:
    return {k: values(read_all(target_conf, topic, k)) for k in range(partitions)}


def test_rerun_copies_nothing_and_recommits_idle_progress(source_conf, target_conf, unique):
    topic = create_topic(source_conf, unique("idle"), partitions=3)
    seed_sequence(source_conf, topic, 3, 20)
    m = mirror(unique("m"), [topic])
    assert run(m)["records"] == 60
    before = progress_of(target_conf, m, topic, 3)
    time.sleep(0.05)   # elapsed time, not a wait: the keep-alive commit's timestamp (ms) is then later
    again = run(m)
    after = progress_of(target_conf, m, topic, 3)
    assert again["records"] == 0 and again["status"] == "ok"
    assert {k: p.offset for k, p in after.items()} == {k: p.offset for k, p in before.items()} == {0: 20, 1: 20, 2: 20}
    assert all(after[k].committed_ms > before[k].committed_ms for k in range(3))   # keep-alive commit
    assert target_values(target_conf, topic, 3) == expected(3, 20)


def test_progress_is_published_to_the_source_group(source_conf, source_cluster, target_conf, unique):
    from eosmirror.kafka import progress

    topic = create_topic(source_conf, unique("pub"), partitions=2)
    seed_sequence(source_conf, topic, 2, 7)
    m = mirror(unique("m"), [topic])
    run(m)
    got = progress.read(source_cluster, [(topic, 0), (topic, 1)], m.progress_group,
                        stable=False)
    assert {k[1]: v.offset for k, v in got.items()} == {0: 7, 1: 7}


SHORT_SETTLE = {"EOSMIRROR_PROGRESS_SETTLE_SECONDS": "3"}


def test_killed_attempt_then_retry_has_every_record_once(source_conf, target_conf, unique, tmp_path):
    topic = create_topic(source_conf, unique("kill"), partitions=2)
    seed_sequence(source_conf, topic, 2, 500)
    m = mirror(unique("m"), [topic], slots=1)
    config_file = write_mirror_file(tmp_path / "mirrors.yaml", m)
    killed = cli("run", m.name, "--config", str(config_file), "--inprocess",
                 env=faults_env({"point": "before_commit", "action": "kill", "once": str(tmp_path / "killed")}))
    assert killed.returncode == -9, killed.stdout + killed.stderr
    assert target_values(target_conf, topic, 2) == {0: [], 1: []}           # nothing committed
    assert len(read_all(target_conf, topic, 0, read_committed=False)) == 500   # but it was written, open
    # The killed slot's transaction stays open until the retry's slots fence it: the retry's plan waits the
    # settle window (the operator's setting, 15 s by default) for it before it plans from start_from.
    retry = cli("run", m.name, "--config", str(config_file), "--inprocess", env=SHORT_SETTLE)
    assert retry.returncode == 0, retry.stdout + retry.stderr
    assert "is not stable" in retry.stderr, retry.stderr[-3000:]     # it saw the open transaction
    assert target_values(target_conf, topic, 2) == expected(2, 500)


def test_two_runs_at_the_same_time_copy_every_record_once(source_conf, target_conf, unique, tmp_path):
    topic = create_topic(source_conf, unique("twin"), partitions=4)
    seed_sequence(source_conf, topic, 4, 300)
    m = mirror(unique("m"), [topic], slots=2)
    config_file = write_mirror_file(tmp_path / "mirrors.yaml", m, max_transaction_seconds=5)
    slow = faults_env({"point": "in_transaction", "action": "sleep", "seconds": 1.5})
    procs = [cli("run", m.name, "--config", str(config_file), "--inprocess", env=slow, background=True)
             for _ in range(2)]
    outputs = [p.communicate(timeout=240)[0] for p in procs]
    assert all(p.returncode in (0, 1) for p in procs), outputs
    assert any("fenced" in o for o in outputs) or all(p.returncode == 0 for p in procs), outputs
    final = cli("run", m.name, "--config", str(config_file), "--inprocess")
    assert final.returncode == 0, final.stdout + final.stderr
    assert target_values(target_conf, topic, 4) == expected(4, 300)


def test_slot_count_change_fences_a_stalled_slot_of_the_old_generation(source_conf, target_conf, target_cluster,
                                                                       unique, tmp_path):
    topic = create_topic(source_conf, unique("gen"), partitions=6)
    seed_sequence(source_conf, topic, 6, 200)
    m = mirror(unique("m"), [topic], slots=3)
    old_file = write_mirror_file(tmp_path / "old.yaml", m, slots=3)
    new_file = write_mirror_file(tmp_path / "new.yaml", m, slots=2)
    # generation 1 (3 slots): every slot stalls inside its transaction, records already produced
    zombie = cli("run", m.name, "--config", str(old_file), "--inprocess", "--result-json", str(tmp_path / "z.json"),
                 env=faults_env({"point": "in_transaction", "action": "sleep", "seconds": 12}), background=True)
    wait_for("the stalled slots' records in the target log (their transactions open)", lambda: (
        any(readers.read_all(target_cluster, topic, k, read_committed=False, missing_ok=True) for k in range(6)),
        f"run exit {zombie.poll()}"), 60)
    # generation 2 (2 slots) runs to completion while the zombies sleep
    newer = cli("run", m.name, "--config", str(new_file), "--inprocess", "--result-json", str(tmp_path / "n.json"),
                env=SHORT_SETTLE)       # the stalled slots' open transactions: a short settle window, see above
    assert newer.returncode == 0, newer.stdout + newer.stderr
    report = json.loads((tmp_path / "n.json").read_text())
    assert report["generation"] == 2
    assert set(report["fenced_transactional_ids"]) == {f"eosmirror.{m.name}.{k}" for k in range(3)}
    zombie.communicate(timeout=120)
    zombie_report = json.loads((tmp_path / "z.json").read_text())
    statuses = {s["status"] for s in zombie_report["slots"] if s.get("partitions") is not None}
    assert zombie.returncode == 1 and statuses <= {"fenced", "nothing-to-do"} and "fenced" in statuses
    assert state.read_generation(target_cluster, m.name, m.progress_group).slots == 2
    assert target_values(target_conf, topic, 6) == expected(6, 200)


def test_expired_progress_is_recovered_exactly_from_offset_syncs(source_conf, target_conf, unique):
    topic = create_topic(source_conf, unique("exp"), partitions=2)
    seed_sequence(source_conf, topic, 2, 10)
    m = mirror(unique("m"), [topic], start_from="latest")   # a fallback to start_from would lose records
    # first run: start_from=latest means "from now", so nothing of the first 10 is copied
    assert run(m)["records"] == 0
    seed_sequence(source_conf, topic, 2, 5, prefix="b")
    assert run(m)["records"] == 10
    admin = AdminClient(target_conf)
    admin.delete_consumer_groups([m.progress_group])[m.progress_group].result(30)   # like offsets.retention expiry
    assert progress_of(target_conf, m, topic, 2) == {0: None, 1: None}
    seed_sequence(source_conf, topic, 2, 3, prefix="c")
    report = run(m)
    assert report["records"] == 6
    assert {p["origin"] for p in report["plan"]} == {"recovered-from-offset-syncs"}
    assert target_values(target_conf, topic, 2) == {
        k: expected(2, 5, "b")[k] + expected(2, 3, "c")[k] for k in range(2)}


def test_at_least_once_mode_copies_and_commits(source_conf, target_conf, unique):
    topic = create_topic(source_conf, unique("alo"), partitions=2)
    seed_sequence(source_conf, topic, 2, 50)
    m = mirror(unique("m"), [topic], delivery="at_least_once")
    assert run(m)["records"] == 100
    assert run(m)["records"] == 0
    assert target_values(target_conf, topic, 2) == expected(2, 50)
    assert {k: p.offset for k, p in progress_of(target_conf, m, topic, 2).items()} == {0: 50, 1: 50}


# --- loud failures, nothing half-written ------------------------------------------------------------

def test_truncated_source_fails_loudly_and_writes_nothing(source_conf, target_conf, unique):
    from confluent_kafka import TopicPartition

    topic = create_topic(source_conf, unique("trunc"))
    seed_sequence(source_conf, topic, 1, 20)
    m = mirror(unique("m"), [topic], slots=1)
    run(m, max_records_per_partition=5)
    admin = AdminClient(source_conf)
    admin.delete_records([TopicPartition(topic, 0, 12)])[TopicPartition(topic, 0, 12)].result(30)
    with pytest.raises(DataLossError, match=r"offsets 5\.\.11 were deleted on the source.*up to 7 records"):
        run(m)
    assert values(read_all(target_conf, topic)) == expected(1, 5)[0]
    assert progress_of(target_conf, m, topic, 1)[0].offset == 5
    skipping = mirror(m.name, [topic], slots=1, on_truncation="skip_to_log_start")
    report = run(skipping)
    assert report["records"] == 8 and report["plan"][0]["lost"] == 7


def test_recreated_source_topic_fails_loudly(source_conf, target_conf, unique):
    topic = create_topic(source_conf, unique("recreate"))
    seed_sequence(source_conf, topic, 1, 5)
    m = mirror(unique("m"), [topic], slots=1)
    run(m)
    admin = AdminClient(source_conf)
    admin.delete_topics([topic])[topic].result(30)
    deadline = time.time() + 30
    while True:
        try:
            create_topic(source_conf, topic)
            break
        except Exception:  # noqa: BLE001 - deletion still in progress
            if time.time() > deadline:
                raise
            time.sleep(0.5)
    seed_sequence(source_conf, topic, 1, 8, prefix="new")
    with pytest.raises(DataLossError, match="deleted and re-created"):
        run(m)
    assert values(read_all(target_conf, topic)) == expected(1, 5)[0]


def test_oversize_record_fails_the_slot_and_commits_nothing(source_conf, target_conf, unique):
    topic = create_topic(source_conf, unique("big"))
    create_topic(target_conf, topic, max_message_bytes="2000")
    p = producer(source_conf)
    p.produce(topic, value=b"small", partition=0)
    p.produce(topic, value=b"x" * 5000, partition=0)
    p.flush(30)
    m = mirror(unique("m"), [topic], slots=1)
    report = run(m)
    assert report["status"] == "failed"
    slot = next(s for s in report["slots"] if s["status"] == "failed")
    assert slot["error_type"] == "OversizeRecordError"
    assert "offset 1" in slot["error"] and "max.message.bytes=2000" in slot["error"]
    assert read_all(target_conf, topic) == [] and progress_of(target_conf, m, topic, 1)[0] is None


def test_log_append_time_target_topic_is_refused(source_conf, target_conf, unique):
    topic = create_topic(source_conf, unique("lat"))
    create_topic(target_conf, topic, message_timestamp_type="LogAppendTime")
    seed_sequence(source_conf, topic, 1, 3)
    with pytest.raises(TargetMismatchError, match="LogAppendTime.*replace the source timestamps"):
        run(mirror(unique("m"), [topic]))


def test_foreign_writer_on_the_target_aborts_the_transaction(source_conf, target_conf, target_cluster, unique,
                                                             monkeypatch):
    topic = create_topic(source_conf, unique("foreign"))
    create_topic(target_conf, topic)
    seed_sequence(source_conf, topic, 1, 100)
    monkeypatch.setenv("EOSMIRROR_FAULTS", json.dumps([{"point": "in_transaction", "action": "sleep", "seconds": 3}]))
    m = mirror(unique("m"), [topic], slots=1)

    def intrude():   # once the slot's records are in the log (its transaction is open), write one more
        deadline = time.time() + 30
        while time.time() < deadline and not readers.read_all(target_cluster, topic, 0,
                                                              read_committed=False):
            time.sleep(0.1)
        p = producer(target_conf)
        p.produce(topic, value=b"intruder", partition=0)
        p.flush(10)

    writer = threading.Thread(target=intrude)
    writer.start()
    report = run(m)
    writer.join()
    slot = next(s for s in report["slots"] if s["status"] != "nothing-to-do")
    assert slot["status"] == "failed" and slot["error_type"] == "TargetMismatchError"
    assert "another producer writes to the target topic" in slot["error"]
    assert values(read_all(target_conf, topic)) == [b"intruder"]
    assert progress_of(target_conf, m, topic, 1)[0] is None


def test_a_slot_never_commits_on_top_of_a_transaction_left_open_and_copies_once_it_is_aborted(
        source_conf, target_conf, unique):
    """A hard-restarted target broker can skip the abort marker of a slot's timed-out transaction (no
    leader for the partition yet): those records stay open under the slot's own producer id, and its next
    commit there made them visible (388 duplicates in one chaos round). A transaction held open on the
    target partition stands in for it here: the slot refuses, writes nothing, and names Kafka's tool;
    aborted with that tool, the next run copies every record once, judged by a read_committed reader."""
    from tests.support.transactions import abort_hanging_transaction

    topic = create_topic(source_conf, unique("leftopen"), partitions=2)
    create_topic(target_conf, topic, partitions=2)
    seed_sequence(source_conf, topic, 2, 50)
    held = producer(target_conf, **{"transactional.id": unique("held"), "transaction.timeout.ms": 120000})
    held.init_transactions(30)
    held.begin_transaction()
    for n in range(7):
        held.produce(topic, value=f"open-{n}".encode(), partition=1)
    held.flush(30)
    m = mirror(unique("m"), [topic], slots=1)

    report = run(m)
    assert report["status"] == "failed", report
    slot = next(s for s in report["slots"] if s["status"] == "failed")
    assert slot["error_type"] == "TargetMismatchError", slot
    assert f"{topic}[1] last stable offset 0 < end 7" in slot["error"], slot["error"]
    assert read_all(target_conf, topic, 0, read_committed=False) == []          # nothing written anywhere
    assert len(read_all(target_conf, topic, 1, read_committed=False)) == 7
    assert progress_of(target_conf, m, topic, 2) == {0: None, 1: None}

    abort_hanging_transaction(target_conf, slot["error"])
    assert run(m)["status"] == "ok"
    assert target_values(target_conf, topic, 2) == expected(2, 50)
    assert run(m)["records"] == 0


def test_unknown_mirror_and_bad_config_exit_2_and_write_nothing(target_conf, unique, tmp_path):
    unknown = cli("run", "no-such-mirror", "--inprocess")
    assert unknown.returncode == 2 and "no mirror named 'no-such-mirror'" in unknown.stderr
    bad = tmp_path / "bad.yaml"
    name = unique("m")
    bad.write_text(f"mirrors:\n  - name: {name}\n    source: {{local: source}}\n    target: {{local: target}}\n"
                   f"    topics: ['x']\n    slots: 0\n")
    result = cli("run", name, "--config", str(bad), "--inprocess")
    assert result.returncode == 2 and "`slots`: 0 is not allowed" in result.stderr
    topics = AdminClient(target_conf).list_topics(timeout=10).topics
    assert naming.state_topic(name) not in topics and naming.offset_sync_topic(name) not in topics


def test_abortable_error_rewinds_and_the_retry_copies_everything(source_conf, target_conf, unique, monkeypatch,
                                                                 tmp_path):
    topic = create_topic(source_conf, unique("rewind"), partitions=2)
    seed_sequence(source_conf, topic, 2, 40)
    monkeypatch.setenv("EOSMIRROR_FAULTS", json.dumps([
        {"point": "before_commit", "action": "abort", "slot": 0, "once": str(tmp_path / "a0")},
        {"point": "before_commit", "action": "abort", "slot": 1, "once": str(tmp_path / "a1")}]))
    m = mirror(unique("m"), [topic], slots=2, max_transaction_seconds=20)
    started = time.monotonic()
    report = run(m)
    assert report["status"] == "ok", report["errors"]
    assert sum(s["aborts"] for s in report["slots"]) == 2
    assert time.monotonic() - started < 15      # the retry does not wait for the transaction deadline
    assert target_values(target_conf, topic, 2) == expected(2, 40)
    assert len(read_all(target_conf, topic, 0, read_committed=False)) == 80   # 40 aborted + 40 committed copies


def test_fencing_while_a_run_is_active_fails_it_cleanly_and_the_next_run_continues(source_conf, target_conf,
                                                                                   target_cluster, unique,
                                                                                   tmp_path):
    from eosmirror.driver import fencing

    topic = create_topic(source_conf, unique("fence"), partitions=2)
    seed_sequence(source_conf, topic, 2, 100)
    m = mirror(unique("m"), [topic], slots=2)
    config_file = write_mirror_file(tmp_path / "mirrors.yaml", m)
    active = cli("run", m.name, "--config", str(config_file), "--inprocess", "--result-json", str(tmp_path / "a.json"),
                 env=faults_env({"point": "in_transaction", "action": "sleep", "seconds": 6}), background=True)
    wait_for("the held slot's records in the target log (its transaction open)", lambda: (
        bool(readers.read_all(target_cluster, topic, 0, read_committed=False, missing_ok=True)),
        f"run exit {active.poll()}"), 60)
    outcome = fencing.fence_mirror(m)
    assert outcome["unblocked"] and f"eosmirror.{m.name}.0" in outcome["fenced"]
    active.communicate(timeout=120)
    assert active.returncode == 1
    statuses = {s["status"] for s in json.loads((tmp_path / "a.json").read_text())["slots"]}
    assert statuses == {"fenced"}
    assert target_values(target_conf, topic, 2) == {0: [], 1: []}     # nothing of the fenced run is visible
    assert run(m)["records"] == 200
    assert target_values(target_conf, topic, 2) == expected(2, 100)
