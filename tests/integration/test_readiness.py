"""The readiness report against the real local clusters (#51 item 4): READY after a run; an uncovered source
group named; NOT READY by lag, by a topic config changed on the source, by partitions added to the source, each
figure judged against Kafka's own tools; the switchover dry run writes nothing (the state topic's end, the state record and the audit unchanged);
the report's history on the lag topic; the CLI's exit code 9; a covered group whose target commit is behind its
translated source commit warns with the offsets the next group sync moves it (target commits read by Kafka's
consumer)."""

from __future__ import annotations

import json

import pytest

from eosmirror.airflow import lagrender, readinesstasks
from eosmirror.core import naming
from eosmirror.core import readiness as rules
from eosmirror.driver import groups, readiness
from eosmirror.kafka import lagstore, state
from tests.helpers import cli, create_topic, mirror, producer, run, seed_sequence, write_mirror_file
from tests.support.java import java_end_offsets, java_partition_count

pytestmark = pytest.mark.integration


def checks(found: rules.Report) -> dict[str, rules.Check]:
    return {c.name: c for c in found.checks}


def target_commit(conf, group: str, topic: str) -> int | None:
    """The group's committed offset of ``topic`` partition 0, as Kafka's consumer reads it (None: no commit)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    try:
        (found,) = consumer.committed([TopicPartition(topic, 0)], timeout=30)
    finally:
        consumer.close()
    return found.offset if found.offset >= 0 else None


def test_ready_after_a_run_then_not_ready_by_lag_config_drift_and_partitions_and_the_dry_run_writes_nothing(
        source_conf, target_conf, target_cluster, unique, tmp_path):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions

    topic = create_topic(source_conf, unique("src"), partitions=2, **{"retention.ms": "86400000"})
    seed_sequence(source_conf, topic, 2, 20)
    m = mirror(unique("m"), [topic], max_lag_seconds=60)
    assert run(m)["status"] == "ok"

    state_topic = naming.state_topic(m.name)
    state_end = java_end_offsets(target_conf, state_topic)
    before = state.read_mirror_state(target_cluster, m.name, m.progress_group)
    audit = state.read_audit(target_cluster, m.name, m.progress_group)

    ready = readiness.report(m, run_verify=True)
    by_name = checks(ready)
    assert ready.verdict == rules.READY_VERDICT, ready.text()
    assert by_name["verify"].verdict == rules.OK and by_name["verify"].figures["records"] == 40, ready.text()
    assert by_name["lag"].figures["record_lag"] == 0 and by_name["drift"].verdict == rules.OK, ready.text()
    assert by_name["foreign"].verdict == rules.OK, ready.text()
    # that verify was recorded: a report without --verify judges the last one
    last = checks(readiness.report(m))["verify"]
    assert last.verdict == rules.OK and last.figures["records"] == 40 and last.figures["hours_ago"] < 1, last
    assert by_name["switchover"].figures["records_to_copy"] == 0
    assert by_name["switchover"].figures["expected_recovery_seconds"] >= 10.0     # the quiet wait at least
    # The local brokers have no authorizer: every principal can write, which warns (nothing grants it).
    assert by_name["writers"].verdict == rules.WARN and "no authorizer" in by_name["writers"].reason

    # A consumer group of the source the mirror's group sync does not cover (it has no `groups` section),
    # planted with a real commit; a mirror whose group sync includes it covers it.
    from confluent_kafka import Consumer, TopicPartition

    app_group = unique("app")
    consumer = Consumer({**source_conf, "group.id": app_group, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    consumer.close()
    uncovered = checks(readiness.report(m))["groups"]
    assert uncovered.verdict == rules.WARN and app_group in uncovered.figures["uncovered"], uncovered
    covering = mirror(m.name, [topic], max_lag_seconds=60, groups={"include": [app_group]})
    covering_report = readiness.report(covering)
    covered = checks(covering_report)["groups"]
    assert app_group in covered.figures["covered"] and app_group not in covered.figures["uncovered"], covered

    # The dry run wrote nothing: the state topic's end (Kafka's Java consumer), the record and the audit.
    assert java_end_offsets(target_conf, state_topic) == state_end
    assert state.read_mirror_state(target_cluster, m.name, m.progress_group) == before
    assert state.read_audit(target_cluster, m.name, m.progress_group) == audit

    # A covered group the group sync has not moved since it committed: none of its commit on the target yet (as
    # Kafka's consumer reads it); moved by a group sync: in step; a newer source commit: behind by exactly what
    # the next group sync then moves it (both target commits read by Kafka's consumer).
    stale = checks(covering_report)["group sync"]
    assert stale.verdict == rules.WARN and stale.figures["behind"] == {
        app_group: {"partitions": 0, "offsets": 0, "no_target_commit": 1}}, stale
    assert target_commit(target_conf, app_group, topic) is None
    groups.move_groups(covering, groups.GroupMoveOptions())
    moved = target_commit(target_conf, app_group, topic)
    assert moved is not None and checks(readiness.report(covering))["group sync"].verdict == rules.OK
    consumer = Consumer({**source_conf, "group.id": app_group, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, 0, 15)], asynchronous=False)
    consumer.close()
    behind = checks(readiness.report(covering))["group sync"]
    groups.move_groups(covering, groups.GroupMoveOptions())
    later = target_commit(target_conf, app_group, topic)
    assert later is not None and later > moved
    assert behind.verdict == rules.WARN and behind.figures["behind"] == {
        app_group: {"partitions": 1, "offsets": later - moved, "no_target_commit": 0}}, behind

    # Lag: 15 more records, judged two minutes on (the evaluation's clock is injected): over the 60 s SLO.
    ends = java_end_offsets(source_conf, topic)
    p = producer(source_conf, **{"enable.idempotence": True})
    for n in range(15):
        p.produce(topic, value=f"late{n}".encode(), partition=n % 2)
    p.flush(30)
    grown = java_end_offsets(source_conf, topic)
    lagging = readiness.report(m, now_ms=lagstore.now_ms() + 120_000)
    lag_check = checks(lagging)["lag"]
    assert lagging.verdict == rules.NOT_READY_VERDICT and lag_check.verdict == rules.NOT_READY, lagging.text()
    assert lag_check.figures["record_lag"] == sum(grown.values()) - sum(ends.values()) == 15
    assert lag_check.figures["time_lag_seconds"] > 60
    assert checks(lagging)["switchover"].figures["records_to_copy"] == 15
    assert run(m)["status"] == "ok"

    # Drift: a synced config changed on the source, the mirror not run since.
    admin = AdminClient(source_conf)
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    drifted = readiness.report(m)
    drift = checks(drifted)["drift"]
    assert drifted.verdict == rules.NOT_READY_VERDICT and drift.verdict == rules.NOT_READY, drifted.text()
    assert drift.figures["configs"] == {topic: {"retention.ms": ["3600000", "86400000"]}}

    # Drift: a partition added to the source; the counts are what Kafka's Java consumer lists.
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(30)
    grown_report = readiness.report(m, record=True)
    drift = checks(grown_report)["drift"]
    assert drift.verdict == rules.NOT_READY
    assert drift.figures["partitions"] == {topic: [java_partition_count(source_conf, topic),
                                                   java_partition_count(target_conf, topic)]} == {topic: [3, 2]}

    # The history: the recorded report read back from the lag topic.
    recorded = lagstore.read_reports(target_cluster, m.name, ready.time_ms - 60_000, m.progress_group)
    assert recorded == [grown_report]

    # The page draws the recorded history.
    page = lagrender.readiness_page(m.name, recorded, ready.time_ms - 60_000, lagstore.now_ms())
    assert "data-verdict='NOT READY'" in page and "<tr data-check='drift'>" in page and "data-reports='1'" in page

    # The switchover DAG's first task: drift alone does not fail it (the switchover's final run syncs topics and
    # configs); a record the mirror did not write does (no retry), unless ignore_readiness.
    mirrors_yaml = str(write_mirror_file(tmp_path / "mirrors.yaml", m, max_lag_seconds=60))
    assert readinesstasks.before_switchover(m.name, mirrors_yaml, {})["verdict"] == "NOT READY"   # drift: logged
    assert run(m)["status"] == "ok"
    intruder = producer(target_conf, **{"enable.idempotence": True})
    intruder.produce(topic, value=b"not the mirror's", partition=0)
    assert intruder.flush(30) == 0
    with pytest.raises(Exception, match="NOT READY: foreign") as failed:
        readinesstasks.before_switchover(m.name, mirrors_yaml, {})
    assert type(failed.value).__name__ == "AirflowFailException"
    assert readinesstasks.before_switchover(m.name, mirrors_yaml, {"ignore_readiness": True})["verdict"] == "NOT READY"
    assert "skipped" in readinesstasks.before_switchover(m.name, mirrors_yaml, {"cancel": True})

    # The command line: NOT READY exits 9, with the report as JSON.
    done = cli("readiness", m.name, "--config", mirrors_yaml, "--json")
    assert done.returncode == 9, done.stderr[-2000:]
    document = json.loads(done.stdout)
    assert document["verdict"] == "NOT READY" and any(c["name"] == "foreign" and c["verdict"] == "not ready"
                                                      for c in document["checks"])
