"""Consumer groups as applications use them: read and commit, read to the end, and the committed
positions as Kafka returns them."""

from __future__ import annotations

import time

from eosmirror.kafka import progress
from eosmirror.kafka.cluster import Cluster
from tests.support.clusters import PARTITIONS


def consume_and_commit(conf, group, topic, counts: dict[int, int]) -> dict[int, int]:
    """A consumer of ``group`` reads ``counts[p]`` records of each partition and commits what it read,
    as an application does (committed offset = last processed offset + 1). Returns the commits."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    committed, before = {}, group_offsets(conf, group, topic)   # retried while the coordinator loads
    try:
        for p, count in counts.items():
            consumer.assign([TopicPartition(topic, p, before[p] if before[p] is not None else 0)])
            last, seen, deadline = None, 0, time.monotonic() + 60
            while seen < count and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    last, seen = msg.offset(), seen + 1
            assert seen == count, f"{topic}[{p}]: read {seen} of {count} records within 60 s"
            committed[p] = last + 1
            consumer.commit(offsets=[TopicPartition(topic, p, last + 1)], asynchronous=False)
            consumer.unassign()
    finally:
        consumer.close()
    return committed


def commit_offsets(conf, group, topic, offsets: dict[int, int]) -> None:
    """Commits ``offsets`` for ``group`` as a consumer of it does (synchronous)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def group_offsets(conf, group, topic) -> dict[int, int | None]:
    found = progress.read(Cluster.from_settings("target", conf, "test"), [(topic, p) for p in range(PARTITIONS)],
                          group, stable=True)
    return {p: (found[(topic, p)].offset if (topic, p) in found else None) for p in range(PARTITIONS)}


def librdkafka_reads_to_the_end(conf, group, topic, partitions: list[int] | None = None) -> int:
    """A librdkafka consumer of ``group`` with auto-commit (the default) reads every record of the
    partitions (subscribed to the topic, or assigned ``partitions``) until each reports its end,
    then closes, which commits. Returns the records it read."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.partition.eof": True,
                         "isolation.level": "read_committed"})
    if partitions is None:
        consumer.subscribe([topic])
        wanted = set(range(PARTITIONS))
    else:
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])   # 0: every record of it
        wanted = set(partitions)
    at_end, count, deadline = set(), 0, time.monotonic() + 60
    try:
        while at_end != wanted and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                continue
            count += 1
            at_end.discard(msg.partition())
    finally:
        consumer.close()
    assert at_end == wanted, f"{group}: reached the end of {sorted(at_end)} of {sorted(wanted)} within 60 s"
    return count


def read_as(conf, group, topic) -> dict[int, list[str]]:
    """A librdkafka consumer of ``group`` (subscribed, read_committed, auto.offset.reset=error: it must
    start at the group's committed offsets) reads every partition to its end: values in order."""
    from confluent_kafka import Consumer, KafkaError

    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "error",
                         "enable.partition.eof": True, "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    out, at_end, errors, deadline = {k: [] for k in range(PARTITIONS)}, set(), [], time.monotonic() + 90
    try:
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                (at_end.add(msg.partition()) if msg.error().code() == KafkaError._PARTITION_EOF
                 else errors.append(msg.error().str()))
                continue
            out[msg.partition()].append(msg.value().decode())
            at_end.discard(msg.partition())
    finally:
        consumer.close()
    assert len(at_end) == PARTITIONS, f"{group}: at the end of {sorted(at_end)} only within 90 s; errors {errors[-3:]}"
    return out


def content(record) -> tuple:
    return (record.key, record.value, record.headers)
