"""The lag of consumer groups on the target, read on the partitions each group holds (kafka/groupoffsets.py,
in a child process): right for groups committed on a few partitions among many, the same figures as
a real consumer client sees, never read half-written while a transactional offset commit is
pending, and a group left pending past the bound is reported as groups_error, not raised."""

from __future__ import annotations

import re
import threading

import pytest

from eosmirror.core import lag as core_lag
from eosmirror.driver import lag
from eosmirror.kafka import groupoffsets
from tests.helpers import create_topic, mirror, run, seed_sequence

pytestmark = pytest.mark.integration

PARTITIONS = 24
RECORDS = 20


def _commit(conf, group, topic, offsets: dict[int, int]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    consumer.close()


def _as_a_client_sees_it(conf, group, topic) -> core_lag.GroupLag | None:
    """The group's lag from a plain confluent-kafka consumer of that group: its committed offsets
    (every partition asked) against the partitions' high watermarks."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        committed = {tp.partition: tp.offset for tp in consumer.committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30) if tp.offset >= 0}
        highs = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in committed}
    finally:
        consumer.close()
    if not committed:
        return None
    return core_lag.GroupLag(group, "EMPTY", len(committed), sum(highs[p] - o for p, o in committed.items()))


@pytest.fixture
def mirrored(source_conf, target_conf, unique):
    topic = create_topic(source_conf, unique("src"), partitions=PARTITIONS)
    seed_sequence(source_conf, topic, PARTITIONS, RECORDS)
    prefix = unique("app")
    m = mirror(unique("m"), [topic], groups={"include": [re.escape(prefix) + ".*"]})
    assert run(m)["status"] == "ok"
    return m, topic, prefix


def test_groups_on_a_few_partitions_among_many_match_a_real_client(target_conf, mirrored):
    m, topic, prefix = mirrored
    offsets = {f"{prefix}-two": {3: 5, 17: 12}, f"{prefix}-one": {0: 1}, f"{prefix}-all": dict.fromkeys(
        range(PARTITIONS), 10)}
    for group, committed in offsets.items():
        _commit(target_conf, group, topic, committed)
    expected = tuple(sorted((_as_a_client_sees_it(target_conf, g, topic) for g in offsets), key=lambda g: g.group))
    assert [g.partitions for g in expected] == [PARTITIONS, 1, 2]
    status = lag.report(m)
    assert status.groups_error is None and status.groups == expected
    # The read the report falls back to when the child gives no answer (a consumer asks each group for
    # every mirrored partition) finds the same offsets as the child's read of the groups' own partitions.
    from eosmirror.kafka import groups as kafka_groups

    target = lag.Clusters.of(m).target
    child = lag.held_offsets(groupoffsets.read_all(target.settings, sorted(offsets), 30.0), target.label)
    keys = [(topic, p) for p in range(PARTITIONS)]
    assert child == {g: kafka_groups.committed(target, g, keys) for g in sorted(offsets)}
    assert child == {g: {(topic, p): o for p, o in committed.items()} for g, committed in offsets.items()}


def _pending_commit(target_conf, group, topic, offsets: dict[int, int]):
    """A transactional producer with an open transaction holding ``offsets`` for ``group``."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({**target_conf, "transactional.id": f"{group}-txn", "log_level": 2})
    producer.init_transactions(30)
    producer.begin_transaction()
    member_less = Consumer({**target_conf, "group.id": group, "enable.auto.commit": False})
    producer.send_offsets_to_transaction([TopicPartition(topic, p, o) for p, o in offsets.items()],
                                         member_less.consumer_group_metadata(), 30)
    member_less.close()
    return producer


def test_a_pending_transactional_commit_is_waited_for_never_read_half_written(target_conf, mirrored):
    m, topic, prefix = mirrored
    group = f"{prefix}-txn"
    _commit(target_conf, group, topic, {3: 5})
    producer = _pending_commit(target_conf, group, topic, {3: 15, 4: 15})   # moves 3, adds 4
    found: list[core_lag.MirrorStatus] = []
    reader = threading.Thread(target=lambda: found.append(lag.report(m)))
    reader.start()
    # The commit stays pending 2.5 s (a fault that lasts): a reader that ends within it read half-written.
    reader.join(2.5)
    assert reader.is_alive(), "the groups' lag was read while a transactional commit of a group was pending"
    producer.commit_transaction(30)
    reader.join(60)
    (status,) = found
    expected = _as_a_client_sees_it(target_conf, group, topic)
    assert expected is not None and expected.partitions == 2
    assert status.groups_error is None and status.groups == (expected,)


def test_a_commit_pending_past_the_bound_is_groups_error_and_the_mirror_figures_stand(
        target_conf, mirrored):
    m, topic, prefix = mirrored
    group = f"{prefix}-stuck"
    _commit(target_conf, group, topic, {1: 2})
    producer = _pending_commit(target_conf, group, topic, {1: 9})
    try:
        status = lag.report(m, groups_read_seconds=3.0)   # the default bound is 30 s
    finally:
        producer.abort_transaction(30)
    assert status.groups == () and "UNSTABLE_OFFSET_COMMIT" in (status.groups_error or "")
    assert status.status == core_lag.OK and status.record_lag == 0 and len(status.partitions) == PARTITIONS
