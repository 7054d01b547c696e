"""The least-privilege ACLs of the commands beyond the run (issue #51 item 6), measured on SASL/PLAIN brokers with
StandardAuthorizer the way the run's set is (tests/integration/test_security.py), for the table in
docs/real-clusters.md ("ACLs of the other commands"). Each test grants exactly the run's set plus what it names:

- ``switchover`` and ``promote`` (no `groups`, no `sync_topic_acls`) with the run's set: exit 0, every step ran or
  was skipped for a configured reason: nothing beyond the run's set;
- ``groups sync`` (failover): with Describe on the group (source), Read on it (target) and Create, Write on the
  checkpoints topic (target), the group's offsets are on the target (read by a Kafka consumer); without each, the
  failure names it (or the report says the source listed groups partially) and no offset is on the target;
- ``reverse``: the reverse mirror's target-side run set on the old source; without each ACL reverse asks for it
  fails naming it and the mirror is not recorded reversed; the ones it does not ask for are shown not needed;
- the switch back and ``resume`` succeed with the run's and reverse's sets;
- ``readiness`` with the run's set: the `groups` check never says "all covered" but names Describe on the source
  cluster, the `writers` check names Describe on the target cluster; with source cluster Describe a planted group
  is named; ``readiness --record`` needs Create and Write on the lag topic, each named when missing.

The write-rights steps' cluster Describe/Alter (switchover, promote, reverse, resume) are measured in
test_write_rights.py. Own secure clusters on ports 19850/19860 (+1 for their controllers). `make lab-smoke`."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import ResourceType

from eosmirror import driver
from eosmirror.core.errors import EXIT_OK, EosMirrorError
from eosmirror.core.mirrorstate import Phase
from eosmirror.driver import groups, promote, readiness, resume, reverse, switchover
from eosmirror.kafka import state
from eosmirror.kafka.cluster import Cluster
from tests.support.security import (
    GROUP,
    LITERAL,
    PREFIXED,
    TOPIC,
    TXN,
    Op,
    fresh_mirror,
    grant,
    least_privilege,
    run,
    secure_pair,
)

pytestmark = [pytest.mark.integration, pytest.mark.lab, pytest.mark.timeout(300)]
CLUSTER = ResourceType.BROKER   # the CLUSTER resource "kafka-cluster"
QUIET = switchover.SwitchoverOptions(wait_s=60, quiet_s=1)


@pytest.fixture(scope="module")
def secure():
    with secure_pair("cmdacl", 19850, 19860) as clusters:
        yield clusters


@pytest.fixture
def mirrored(secure, monkeypatch):
    """A mirror that ran once with exactly the run's least-privilege set (granted for the test, taken after)."""
    name, topic, m, _ = fresh_mirror(secure, monkeypatch)
    acls = least_privilege(name, topic)
    grant(secure, acls)
    try:
        first = run(m)
        assert first["status"] == "ok" and first["records"] == 20, first
        yield m, topic
    finally:
        grant(secure, acls, revoke=True)


CONFIGURED_SKIPS = ("no `groups` section", "sync_topic_acls is off", "divergence mode report")


def ran_or_skipped_for_config(outcome) -> None:
    """Every step ran, or was skipped because the mirror has no `groups` / `sync_topic_acls` or the divergence is
    only reported (never failed)."""
    steps = outcome.run.as_list()
    wrong = [s for s in steps if s["status"] != "ran" and not (
        s["status"] == "skipped" and any(why in s["why"] for why in CONFIGURED_SKIPS))]
    assert not wrong, steps


def final_run_of(m):
    def final_run():
        mirror_run = driver.MirrorRun(m, driver.RunOptions(final_of_switchover=True))
        return mirror_run.execute(mirror_run.prepare(), driver.run_in_process)
    return final_run


def test_switchover_needs_nothing_beyond_the_runs_set(mirrored):
    m, _ = mirrored
    started = time.monotonic()

    done = switchover.switchover(m, final_run_of(m), QUIET)
    assert done.safe and done.exit_code == EXIT_OK and done.verdict() == switchover.SAFE, done.as_dict()
    assert done.state == Phase.SWITCHED_OVER.value and done.verify_summary.endswith("20 record(s) compared")
    ran_or_skipped_for_config(done)
    print(f"switchover with the run's ACLs: {time.monotonic() - started:.1f} s")


def test_promote_needs_nothing_beyond_the_runs_set(mirrored):
    m, _ = mirrored
    done = promote.promote(m, source_budget_s=5)
    assert done.exit_code == EXIT_OK and done.state.phase is Phase.PROMOTED and done.source_answered, done.as_dict()
    assert done.as_dict()["not_run"] == []
    ran_or_skipped_for_config(done)


def plant_group(secure, topic: str, group: str, positions: dict[int, int] | None = None) -> None:
    """A consumer group of an application on the source: committed offsets (as the admin super user)."""
    consumer = Consumer({**secure["source"].client_config(), "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in (positions or {0: 5}).items()],
                        asynchronous=False)
    finally:
        consumer.close()


def test_readiness_names_the_cluster_describe_it_lacks_and_never_says_all_groups_covered(secure, mirrored):
    m, topic = mirrored
    group = f"{m.name}-app"
    plant_group(secure, topic, group)
    checks = {c.name: c for c in readiness.report(m).checks}
    assert checks["groups"].verdict == "warn", checks["groups"]
    assert "lacks Describe on the source cluster (resource CLUSTER kafka-cluster)" in checks["groups"].reason
    assert "all covered" not in checks["groups"].reason.split(". ")[0] and group not in checks["groups"].reason
    assert checks["writers"].verdict == "warn" and checks["writers"].reason.startswith("cannot tell")
    assert "lacks Describe on the target cluster (resource CLUSTER kafka-cluster)" in checks["writers"].reason
    assert checks["switchover"].verdict == "ok", checks["switchover"]

    describe = [("source", CLUSTER, "kafka-cluster", LITERAL, Op.DESCRIBE, "")]
    grant(secure, describe)
    try:
        seen = {c.name: c for c in readiness.report(m).checks}["groups"]
        assert seen.verdict == "warn" and group in seen.figures["uncovered"], seen
        assert "lacks Describe" not in seen.reason
    finally:
        grant(secure, describe, revoke=True)


def group_sync_acls(app: str, checkpoints: str) -> list[tuple]:
    """What `eosmirror groups sync` (failover) needs beyond the run's set, for one application group ``app``; the
    last field: what its absence must be named by."""
    return [
        ("source", GROUP, app, LITERAL, Op.DESCRIBE, "lacks Describe on the source cluster (resource CLUSTER "
                                                     "kafka-cluster)"),
        ("target", GROUP, app, LITERAL, Op.READ, f"Read on group {app}"),
        ("target", TOPIC, checkpoints, LITERAL, Op.CREATE, f"Create on {checkpoints}"),
        ("target", TOPIC, checkpoints, LITERAL, Op.WRITE, f"Write on topic {checkpoints}"),
    ]


def target_commits(secure, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets on the target, as a Kafka consumer of the admin super user reads them."""
    consumer = Consumer({**secure["target"].client_config(), "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(2)], timeout=15)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}


@pytest.mark.parametrize("dropped", [None, *range(4)], ids=lambda i: "all" if i is None else f"without{i}")
def test_group_sync_needs_these_acls_and_names_each_missing_one(secure, monkeypatch, dropped):
    name, topic, m, _ = fresh_mirror(secure, monkeypatch, groups={"include": [".*-app"]}, source_alias=name_alias())
    app, checkpoints = f"{name}-app", f"{m.source_alias}.checkpoints.internal"
    plant_group(secure, topic, app, {0: 5, 1: 7})
    extra = group_sync_acls(app, checkpoints)
    kept = least_privilege(name, topic) + [a for i, a in enumerate(extra) if i != dropped]
    grant(secure, kept)
    try:
        assert run(m)["status"] == "ok"
        try:
            report = groups.move_groups(m, groups.GroupMoveOptions())
            failure = " ".join([report["listing"], *(g["error"] or "" for g in report["groups"])])
        except EosMirrorError as exc:
            report, failure = None, str(exc)
        if dropped is None:
            assert report is not None and groups.exit_code(report) == EXIT_OK, report
            assert [(g["group"], g["written"]) for g in report["groups"]] == [(app, True)], report
            assert target_commits(secure, app, topic) == {0: 5, 1: 7}
            # no Describe on the source cluster: the listing is said to be partial, though the group was seen
            assert "lacks Describe on the source cluster" in report["listing"]
            return
        assert extra[dropped][5] in failure, failure
        assert report is None or not [g for g in report["groups"] if g["written"]], report
        assert target_commits(secure, app, topic) == {}
    finally:
        grant(secure, kept, revoke=True)


def name_alias() -> str:
    """A source alias of its own (the checkpoints topic is named by it: its Create is measured on each test)."""
    import uuid

    return "src" + uuid.uuid4().hex[:8]


def reverse_acls(name: str, topic: str) -> list[tuple]:
    """The reverse mirror's ACLs on the old source beyond the run's set: the run's target-side set for mirror
    ``<name>__reverse`` (its source side, the new primary, is covered by the run's target grants). The last field:
    what reverse's failure must name without it, or None where reverse itself does not ask (the reverse mirror's
    runs do: measured for the run in test_security.py)."""
    back = f"{name}__reverse"
    state_topic, syncs = f"eosmirror-state.{back}.internal", f"eosmirror-offset-syncs.{back}.internal"
    snapshot = f"eosmirror-offset-sync-snapshot.{back}.internal"
    return [
        ("source", TOPIC, topic, LITERAL, Op.WRITE, f"Write on topic {topic} (target"),
        ("source", TOPIC, topic, LITERAL, Op.CREATE, None),          # the old source has its topics
        ("source", TOPIC, state_topic, LITERAL, Op.CREATE, f"Create on topic {state_topic}"),
        ("source", TOPIC, state_topic, LITERAL, Op.READ, None),
        ("source", TOPIC, state_topic, LITERAL, Op.WRITE, f"Write on {state_topic}"),
        ("source", TOPIC, syncs, LITERAL, Op.CREATE, f"Create on topic {syncs}"),
        ("source", TOPIC, syncs, LITERAL, Op.READ, None),
        ("source", TOPIC, syncs, LITERAL, Op.WRITE, f"and {syncs}"),
        ("source", TOPIC, snapshot, LITERAL, Op.CREATE, f"Create on topic {snapshot}"),
        ("source", TOPIC, snapshot, LITERAL, Op.READ, None),
        ("source", TOPIC, snapshot, LITERAL, Op.WRITE, None),
        # the slots' fence names "Write and Describe on transactional id <prefix>", the planner's (fenced at the
        # same time) "Write on transactional id <prefix>planner": whichever is refused first, Write on the prefix
        ("source", TXN, f"eosmirror.{back}.", PREFIXED, Op.WRITE, f"on transactional id eosmirror.{back}."),
        ("source", GROUP, f"eosmirror.{back}", LITERAL, Op.READ, f"Read on group eosmirror.{back}"),
    ]


@pytest.mark.parametrize("dropped", [None, *range(13)], ids=lambda i: "all" if i is None else f"without{i}")
def test_reverse_needs_the_reverse_mirrors_acls_on_the_old_source_and_names_each_missing_one(secure, monkeypatch,
                                                                                               dropped):
    name, topic, m, _ = fresh_mirror(secure, monkeypatch)
    extra = reverse_acls(name, topic)
    kept = least_privilege(name, topic) + [a for i, a in enumerate(extra) if i != dropped]
    grant(secure, kept)
    try:
        assert run(m)["status"] == "ok"
        assert promote.promote(m, source_budget_s=5).exit_code == EXIT_OK
        needed = None if dropped is None else extra[dropped][5]
        if needed is None:
            done = reverse.reverse(m, reverse.ReverseOptions(settle_s=3))
            assert done.exit_code == EXIT_OK and done.state.phase is Phase.REVERSED, done.as_dict()
            ran_or_skipped_for_config(done)
            return
        with pytest.raises(EosMirrorError) as refused:
            reverse.reverse(m, reverse.ReverseOptions(settle_s=3))
        assert needed in str(refused.value), str(refused.value)
        recorded = state.read_mirror_state(Cluster.from_settings("target", secure["target"].client_config()),
                                           m.name, m.progress_group)
        assert recorded.phase is not Phase.REVERSED, recorded       # never recorded as done
    finally:
        grant(secure, kept, revoke=True)


@pytest.mark.parametrize("dropped", [None, 0, 1], ids=["all", "without-create", "without-write"])
def test_a_recorded_readiness_report_needs_create_and_write_on_the_lag_topic(secure, mirrored, dropped):
    """`readiness --record` (the readiness DAG) appends the report to the lag topic: without Create or Write on
    it, the report is not recorded and the failure names the ACL; with both, `history` (Read on it) finds it."""
    m, _ = mirrored
    lag = f"eosmirror-lag.{m.name}.internal"
    needs = [("target", TOPIC, lag, LITERAL, Op.CREATE, f"Create on topic {lag}"),
             ("target", TOPIC, lag, LITERAL, Op.WRITE, f"Write on topic {lag}")]
    kept = [a for i, a in enumerate(needs) if i != dropped] + [("target", TOPIC, lag, LITERAL, Op.READ, "")]
    grant(secure, kept)
    try:
        if dropped is None:
            made = readiness.report(m, record=True)
            found = readiness.history(m, made.time_ms - 1)
            assert [r.time_ms for r in found] == [made.time_ms], found
            return
        with pytest.raises(EosMirrorError) as refused:
            readiness.report(m, record=True)
        assert needs[dropped][5] in str(refused.value), str(refused.value)
    finally:
        grant(secure, kept, revoke=True)


def test_the_switch_back_and_resume_need_nothing_beyond_the_run_and_reverse_sets(secure, monkeypatch):
    """The whole way back with the run's set and reverse's (the reverse mirror's run set on the old source): the
    reverse mirror's run and switchover (the switch back) and `resume` succeed; each ACL's necessity for these
    three alone is not measured (see the docs)."""
    name, topic, m, _ = fresh_mirror(secure, monkeypatch)
    kept = least_privilege(name, topic) + reverse_acls(name, topic)
    grant(secure, kept)
    try:
        assert run(m)["status"] == "ok"
        assert promote.promote(m, source_budget_s=5).exit_code == EXIT_OK
        assert reverse.reverse(m, reverse.ReverseOptions(settle_s=3)).exit_code == EXIT_OK
        back = m.reverse()
        assert run(back)["status"] == "ok"
        switched = switchover.switchover(back, final_run_of(back), QUIET)
        assert switched.safe and switched.exit_code == EXIT_OK, switched.as_dict()
        ran_or_skipped_for_config(switched)
        resumed = resume.resume(m)
        assert resumed.exit_code == EXIT_OK and resumed.state.phase is Phase.MIRRORING, resumed.as_dict()
        ran_or_skipped_for_config(resumed)
        assert run(m)["status"] == "ok"         # the forward mirror copies again
    finally:
        grant(secure, kept, revoke=True)
