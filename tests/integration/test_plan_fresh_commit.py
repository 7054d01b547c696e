"""A plan never turns "not stable yet" into "no progress" (issue #23.1).

A partition's first progress commit is invisible to a plain (non-stable) OffsetFetch until the
transaction's markers reach the group's __consumer_offsets partition: the broker answers "no
offset" for it, exactly as for a partition that was never copied. A slot's commit_transaction()
returns before those markers are written, and a slot can sit in its commit for seconds. A plan made
in that window must wait for the stable answer, never plan a partition the mirror already copies
from its log start ("new-partition") and never warn that it is new; an answer that never settles is
a clear error, not a guess.
"""

import logging
import time

import pytest

from eosmirror import driver
from eosmirror.core import planning
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

PARTITIONS = 300
RECORDS = 3
NEW_PARTITION_WARNING = "is new to a topic the mirror already copies"


def planned(prepared) -> dict[int, tuple[int, int, str]]:
    return {p.partition: (p.start, p.end, p.origin) for s in prepared.slots for p in s.partitions}


def new_partition_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if NEW_PARTITION_WARNING in r.getMessage()]


def while_slot_0_commits(source_conf, target_conf, unique, tmp_path, prefix, during):
    """A 4-slot run whose slot 0 waits 8 s before commit_transaction(): its first progress is pending
    in the group while the other three slots' progress is already visible. ``during(m, topic)`` runs
    in that window; returns (m, topic, held partitions, what ``during`` returned)."""
    topic = create_topic(source_conf, unique(prefix), partitions=PARTITIONS)
    seed_sequence(source_conf, topic, PARTITIONS, RECORDS)
    m = mirror(unique("m"), [topic], slots=4)
    config_file = write_mirror_file(tmp_path / "mirrors.yaml", m, max_transaction_seconds=30)
    held = {p for p in range(PARTITIONS) if planning.slot_for(topic, p, 4) == 0}
    # The rule's ``once`` marker is created when slot 0 reaches before_commit (its progress sent to
    # the transaction), just before the sleep: only then is its progress pending in the group.
    holding = tmp_path / "slot-0-holds-its-commit"
    slow_commit = faults_env({"point": "before_commit", "action": "sleep", "seconds": 8, "slot": 0,
                              "once": str(holding)})
    running = cli("run", m.name, "--config", str(config_file), "--inprocess", env=slow_commit, background=True)
    try:
        deadline, seen = time.monotonic() + 120, {}
        while time.monotonic() < deadline and running.poll() is None:
            seen = committed_offsets(target_conf, m.progress_group, topic, PARTITIONS, stable=False, timeout=20)
            if len(seen) == PARTITIONS - len(held) and holding.exists():
                break
            time.sleep(0.1)
        # The window is really open: three slots committed, slot 0's commit still pending.
        assert running.poll() is None and set(seen) == set(range(PARTITIONS)) - held and holding.exists(), (
            f"the run ended or never reached the window (exit {running.poll()}): {len(seen)} partitions with "
            f"progress, expected {PARTITIONS - len(held)}; slot 0 at its commit: {holding.exists()}")
        got = during(m, topic)
        output = running.communicate(timeout=120)[0]
        assert running.returncode == 0, output[-3000:]
    finally:
        if running.poll() is None:
            running.kill()
    truth = committed_offsets(target_conf, m.progress_group, topic, PARTITIONS, stable=True, timeout=20)
    assert truth == {p: RECORDS for p in range(PARTITIONS)}
    return m, topic, held, got


def test_plan_while_a_slot_commits_waits_for_its_progress(source_conf, target_conf, unique, caplog, tmp_path):
    def plan(m, topic):
        caplog.set_level(logging.WARNING, logger="eosmirror")
        started = time.monotonic()
        prepared = driver.MirrorRun(m, driver.RunOptions()).prepare(plan_only=True)
        return prepared, time.monotonic() - started

    m, topic, held, (prepared, waited) = while_slot_0_commits(source_conf, target_conf, unique, tmp_path, "fresh", plan)
    plan = planned(prepared)
    wrong = {p: got for p, got in plan.items() if got != (RECORDS, RECORDS, planning.ORIGIN_PROGRESS)}
    assert not wrong, (f"planned in {waited:.1f} s: {len(wrong)} of {PARTITIONS} partitions not planned from "
                       f"their progress ({len(held)} were pending), e.g. {sorted(wrong.items())[:3]}")
    warnings = new_partition_warnings(caplog)
    assert not warnings, f"{len(warnings)} false 'new partition' warnings, e.g. {warnings[0]}"


def test_plan_right_after_runs_sees_every_partition_progress(source_conf, target_conf, unique, caplog):
    """The issue's sequence: a run, then at once a plan (several fresh mirrors: several first commits)."""
    topic = create_topic(source_conf, unique("fresh"), partitions=PARTITIONS)
    seed_sequence(source_conf, topic, PARTITIONS, RECORDS)
    caplog.set_level(logging.WARNING, logger="eosmirror")
    for attempt in range(3):
        m = mirror(unique("m"), [topic], slots=4)
        assert run(m)["records"] == PARTITIONS * RECORDS
        prepared = driver.MirrorRun(m, driver.RunOptions()).prepare(plan_only=True)
        truth = committed_offsets(target_conf, m.progress_group, topic, PARTITIONS, stable=True, timeout=20)
        assert truth == {p: RECORDS for p in range(PARTITIONS)}
        wrong = {p: got for p, got in planned(prepared).items() if got != (RECORDS, RECORDS, planning.ORIGIN_PROGRESS)}
        assert not wrong, f"mirror {attempt}: {len(wrong)} partitions misplanned, e.g. {sorted(wrong.items())[:3]}"
    warnings = new_partition_warnings(caplog)
    assert not warnings, f"{len(warnings)} false 'new partition' warnings, e.g. {warnings[0]}"


def test_progress_that_never_settles_is_a_clear_error_not_a_new_partition(source_conf, target_conf, unique, caplog,
                                                                         monkeypatch):
    """An open transaction holds the first progress of partitions of a mirrored topic (a slot killed in
    its commit): the plan refuses with the fix, it never plans them from offset 0."""
    topic = create_topic(source_conf, unique("zombie"), partitions=2)
    seed_sequence(source_conf, topic, 2, RECORDS)
    m = mirror(unique("m"), [topic], slots=1, max_transaction_seconds=60)
    assert run(m)["records"] == 2 * RECORDS
    caplog.set_level(logging.WARNING, logger="eosmirror")
    # The held transaction never settles: a 4 s settle window (the operator's setting; 15 s by default) ends the
    # wait sooner, and the refusal is the same.
    monkeypatch.setenv("EOSMIRROR_PROGRESS_SETTLE_SECONDS", "4")
    # The topic grows; partitions 2 and 3 have no progress yet, and a transaction holds their first one.
    text, waited = plan_refused_while_held(source_conf, target_conf, m, topic, unique("zombie-txn"))
    assert "not stable" in text and f"eosmirror fence {m.name}" in text, text
    assert waited < 60, f"the plan waited {waited:.0f} s before refusing"
    assert not new_partition_warnings(caplog)
    # Once the transaction is gone the answer is "no progress", and they are new partitions indeed.
    plan = planned(driver.MirrorRun(m, driver.RunOptions()).prepare(plan_only=True))
    assert {p: plan[p][2] for p in range(4)} == {0: planning.ORIGIN_PROGRESS, 1: planning.ORIGIN_PROGRESS,
                                                 2: planning.ORIGIN_NEW_PARTITION, 3: planning.ORIGIN_NEW_PARTITION}


def test_lag_while_a_slot_commits_waits_for_its_progress(source_conf, target_conf, unique, tmp_path):
    """`eosmirror lag` reads progress as the planner does: a partition whose first progress commit is
    pending is not counted from its log start (record lag = the whole partition)."""
    from eosmirror.driver import lag, topics

    def sample(m, topic):
        clusters = lag.Clusters.of(m)
        return lag.collect(m, clusters, int(time.time() * 1000), topics.resolve(m, clusters.source))

    m, topic, held, got = while_slot_0_commits(source_conf, target_conf, unique, tmp_path, "lag", sample)
    wrong = {s.partition: s.progress for s in got.partitions if s.progress != RECORDS}
    assert not wrong, (f"{len(wrong)} of {PARTITIONS} partitions sampled without their progress ({len(held)} were "
                       f"pending), e.g. {sorted(wrong.items())[:3]}")
