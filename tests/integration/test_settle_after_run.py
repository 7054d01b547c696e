"""Plan, verify and lag right after a run whose commits are still landing (issue #44, items 1 and 4).

On a busy broker the markers of a run's transactions (1,250 partitions each) are written for tens of
seconds after the run returned; partitions become stable transaction by transaction. The old readers
gave up after the settle window (15 s) and told the operator to fence a healthy mirror (plan), counted
partitions from their log start (lag) or left the last copies unchecked (verify).

A broker of the test fixture writes the markers of 3,000 partitions before the run has even returned
(measured: nothing pending 0.5 s after), so the test makes the same reader-visible condition without
relying on load: a 4-slot run whose slots commit 4 s apart (a fault sleep before commit_transaction),
so the pending set shrinks transaction by transaction, and a settle window lowered to 7 s (the module
constant), so that the old code, which waits one window without looking at the trend, gives up while
the new code keeps waiting because the set shrinks. Figures are checked against librdkafka's own
read_committed / require_stable readers once the run has ended.

A transaction held open on purpose (the mirror's slot id, its group's offsets sent, never committed)
is still refused, naming that transactional id before the fence command.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from eosmirror import driver
from eosmirror.core import naming, planning
from tests.helpers import (
    cli,
    committed_offsets,
    create_topic,
    faults_env,
    mirror,
    plan_refused_while_held,
    run,
    seed_sequence,
    write_mirror_file,
)

pytestmark = pytest.mark.integration

PARTITIONS = 400
RECORDS = 3
SLOTS = 4
GAP = 4.0              # seconds between the slots' commits
SETTLE = 7.0           # the lowered settle window: > GAP, < the whole staggered commit (3 x GAP)


def lower_settle_window(monkeypatch, seconds: float) -> None:
    """The operator's setting EOSMIRROR_PROGRESS_SETTLE_SECONDS, for this process and the CLIs it starts."""
    from eosmirror.driver.observe import SETTLE_ENV

    monkeypatch.setenv(SETTLE_ENV, str(seconds))


def read_committed_count(target_conf, topic: str, budget: float = 60.0) -> int:
    """Records a read_committed consumer sees on the target topic, read to each partition's end."""
    reader = Consumer({**target_conf, "group.id": f"count-{topic}", "enable.auto.commit": False,
                       "isolation.level": "read_committed", "enable.partition.eof": True,
                       "auto.offset.reset": "earliest"})
    try:
        reader.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        count, ended, deadline = 0, set(), time.monotonic() + budget
        while len(ended) < PARTITIONS and time.monotonic() < deadline:
            for msg in reader.consume(500, 1.0):
                if msg.error() is None:
                    count += 1
                elif msg.error().code() == -191:   # _PARTITION_EOF
                    ended.add(msg.partition())
        assert len(ended) == PARTITIONS, f"read_committed reader reached the end of {len(ended)} of {PARTITIONS} partitions in {budget:.0f} s"
        return count
    finally:
        reader.close()


def test_plan_verify_and_lag_wait_while_commits_land_and_agree_with_read_committed(
        source_conf, target_conf, unique, tmp_path, monkeypatch, caplog):
    from eosmirror.driver import lag, topics, verify

    topic = create_topic(source_conf, unique("busy"), partitions=PARTITIONS)
    seed_sequence(source_conf, topic, PARTITIONS, RECORDS)
    m = mirror(unique("m"), [topic], slots=SLOTS, max_transaction_seconds=30)
    config_file = write_mirror_file(tmp_path / "mirrors.yaml", m, max_transaction_seconds=30)
    # Slot k waits k x GAP s at before_commit (its records, syncs and progress sent); each marks the file.
    held = {k: tmp_path / f"slot-{k}-at-commit" for k in range(1, SLOTS)}
    rules = [{"point": "before_commit", "action": "sleep", "seconds": k * GAP, "slot": k, "once": str(held[k])}
             for k in held]
    slot0 = {p for p in range(PARTITIONS) if planning.slot_for(topic, p, SLOTS) == 0}
    running = cli("run", m.name, "--config", str(config_file), "--inprocess", env=faults_env(*rules), background=True)
    lower_settle_window(monkeypatch, SETTLE)
    caplog.set_level(logging.INFO, logger="eosmirror")
    results: dict[str, object] = {}
    took: dict[str, float] = {}
    try:
        deadline, seen = time.monotonic() + 120, {}
        while time.monotonic() < deadline and running.poll() is None:
            if all(f.exists() for f in held.values()):
                seen = committed_offsets(target_conf, m.progress_group, topic, PARTITIONS, stable=False)
                if set(seen) == slot0:
                    break
            time.sleep(0.1)
        assert running.poll() is None and set(seen) == slot0, (
            f"the window never opened (run exit {running.poll()}): slots at their commit "
            f"{sorted(k for k, f in held.items() if f.exists())}, {len(seen)} partitions with progress, "
            f"slot 0 holds {len(slot0)}")

        def plan() -> object:
            return driver.MirrorRun(m, driver.RunOptions()).prepare(plan_only=True)

        def sample() -> object:
            clusters = lag.Clusters.of(m)
            return lag.collect(m, clusters, int(time.time() * 1000), topics.resolve(m, clusters.source))

        def check() -> object:
            return verify.verify(m)

        def call(name, fn) -> None:
            started = time.monotonic()
            try:
                results[name] = fn()
            except Exception as exc:  # noqa: BLE001 - asserted below with its text
                results[name] = exc
            took[name] = time.monotonic() - started

        readers = [threading.Thread(target=call, args=(name, fn)) for name, fn in
                   (("plan", plan), ("lag", sample), ("verify", check))]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(timeout=150)
        assert not any(r.is_alive() for r in readers), f"a reader did not return within 150 s: {took}"
        output = running.communicate(timeout=120)[0]
        assert running.returncode == 0, output[-3000:]
    finally:
        if running.poll() is None:
            running.kill()
    failed = {name: f"{type(got).__name__}: {got}" for name, got in results.items() if isinstance(got, Exception)}
    assert not failed, f"after {took}: {failed}"

    # The truth, once the run has ended: librdkafka's require_stable and read_committed readers.
    truth = committed_offsets(target_conf, m.progress_group, topic, PARTITIONS)
    assert truth == {p: RECORDS for p in range(PARTITIONS)}
    copies = read_committed_count(target_conf, topic)
    assert copies == PARTITIONS * RECORDS

    planned = {p.partition: (p.start, p.origin) for s in results["plan"].slots for p in s.partitions}
    wrong = {p: got for p, got in planned.items() if got != (truth[p], planning.ORIGIN_PROGRESS)}
    assert len(planned) == PARTITIONS and not wrong, (
        f"plan in {took['plan']:.1f} s: {len(wrong)} partitions not planned from their progress, e.g. {sorted(wrong.items())[:3]}")
    sampled = {s.partition: s.progress for s in results["lag"].partitions}
    assert sampled == truth, f"lag in {took['lag']:.1f} s: {sum(sampled[p] != truth[p] for p in truth)} partitions differ"
    checks = results["verify"]
    assert verify.exit_code(checks) == 0 and len(checks) == PARTITIONS, verify.format_checks(checks)[-2000:]
    assert sum(c.records for c in checks) == copies, verify.format_checks(checks)[-2000:]
    # They waited, past the settle window, while commits landed, and said so.
    assert min(took.values()) > SETTLE, took
    said = [r.getMessage() for r in caplog.records if "still settling" in r.getMessage()]
    assert said, "no reader said that it was waiting for settling partitions"
    print(f"waited while commits landed: {', '.join(f'{k} {v:.1f} s' for k, v in took.items())}; e.g. {said[0]}")


def test_a_transaction_held_open_with_the_slot_id_is_refused_naming_it(source_conf, target_conf, unique,
                                                                       monkeypatch):
    """Nothing settles: the plan refuses after the settle window, names the slot's transactional id
    (with its state where Kafka's TransactionsCommand is on this host) and then the fence command."""
    topic = create_topic(source_conf, unique("held"), partitions=2)
    seed_sequence(source_conf, topic, 2, RECORDS)
    m = mirror(unique("m"), [topic], slots=1, max_transaction_seconds=60)
    assert run(m)["records"] == 2 * RECORDS
    slot_id = naming.slot_transactional_id(m.transactional_id_prefix, m.name, 0)
    lower_settle_window(monkeypatch, 4.0)
    # The topic grows; partitions 2 and 3 have no progress yet, and the slot's id holds their first one.
    text, waited = plan_refused_while_held(source_conf, target_conf, m, topic, slot_id)
    assert "none settled in the last 4 s" in text and f"eosmirror fence {m.name}" in text, text
    assert slot_id in text and text.index(slot_id) < text.index("eosmirror fence"), text
    from eosmirror.kafka import transactions

    if transactions.describer()[0] is not None:     # Kafka's jars are here (a checkout after `make setup`)
        assert f"{slot_id} (Ongoing" in text, text
    assert waited < 60, f"the plan waited {waited:.0f} s before refusing: {text}"
    print(f"refused after {waited:.1f} s: {text}")
