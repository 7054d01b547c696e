"""Kafka's own Java client as the judge (the session's judge JVM, tests/support/judge.py: Kafka's Java
KafkaConsumer): positions, ends and records from Kafka's client, never from eosmirror's arithmetic."""

from __future__ import annotations

from tests.support.clusters import PARTITIONS
from tests.support.judge import judge_ends, judge_read


def java_records(conf, topic: str, group: str) -> dict[int, list[tuple[int, str]]]:
    """Kafka's Java consumer in ``group`` (read_committed, from the group's offsets, the earliest where it has
    none) to the end, committing there: per partition, (offset, value) in order."""
    read = judge_read(conf, topic, group).records
    return {k: sorted(read.get(k, [])) for k in range(PARTITIONS)}


def java_reads_to_the_end(conf, group, topic) -> int:
    """Kafka's Java consumer in ``group``, read_committed, from the beginning to the end; it commits the
    positions it reached (as ConsoleConsumer's close). Returns the records it read."""
    return judge_read(conf, topic, group).count()


def java_end_offsets(conf, topic: str) -> dict[int, int]:
    """Kafka's Java consumer: each partition's latest offset (the high watermark, GetOffsetShell's ``--time -1``)."""
    return judge_ends(conf, topic)


def java_partition_count(conf, topic: str) -> int:
    """Kafka's Java consumer: the topic's partitions, as its metadata lists them."""
    return len(judge_ends(conf, topic))
