"""Exact read_committed record counts, cheap offset hints, and the transactions still open on a topic.

End offsets are only a hint of how far a copy got: transaction markers (and aborted records)
occupy offsets, so an offset sum over-counts records. A configuration is verified only by reading
the target with read_committed and counting records.

``CommittedCounter`` counts incrementally: each ``count_to(ends)`` reads only what lies between the
previous ends and the new ones. Records at or past an end are never counted early: the consumer
seeks back to the first such record and pauses the partition until the next call. That makes it
cheap to ask "is everything committed up to this snapshot?" more than once while a copy runs.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import KafkaError

from eosmirror.kafka import clients
from eosmirror.kafka.cluster import Cluster

PARTITION_EOF = KafkaError._PARTITION_EOF   # an end-of-partition event, not an error
# A topic MirrorMaker 2 has not created yet answers with one of these ("no leaders found": _NOENT).
MISSING = {"UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC", "_UNKNOWN_PARTITION", "UNKNOWN_TOPIC_ID", "_NOENT"}


def offsets_admin(conf: dict[str, Any]) -> Any:
    return Cluster.from_settings("tools", conf, client_name="eosmirror-tools-offsets").admin


def end_offsets(conf: dict[str, Any], topic: str, partitions: int, cluster_label: str, read_committed: bool,
                admin: Any = None) -> dict[int, int]:
    """{partition: end} where end is the last stable offset (read_committed) or the high watermark.

    A topic that does not exist yet counts as empty (MirrorMaker 2 creates its target topics late).
    """
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    admin = admin or offsets_admin(conf)
    level = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
    # Every other failure is retried for a while: right after MM2 creates a topic the broker answers
    # NOT_LEADER_FOR_PARTITION or UNKNOWN_LEADER_EPOCH, and on a busy machine a request can time
    # out. A measurement tool must not fail a configuration over a hiccup; a lasting error still does.
    deadline = time.monotonic() + 60
    while True:
        request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
        out, failure = {}, None
        for tp, future in admin.list_offsets(request, isolation_level=level, request_timeout=15).items():
            try:
                out[tp.partition] = future.result(timeout=20).offset
            except Exception as exc:  # noqa: BLE001
                err = exc.args[0] if exc.args and hasattr(exc.args[0], "name") else None
                if err is not None and err.name() in MISSING:
                    out[tp.partition] = 0
                else:
                    failure = f"{topic}[{tp.partition}]: {type(exc).__name__}: {exc}"
        if failure is None:
            return out
        if time.monotonic() > deadline:
            raise RuntimeError(f"{cluster_label}: list offsets failed for 60 s; last error: {failure}")
        time.sleep(0.5)


def offset_sum(conf: dict[str, Any], topic: str, partitions: int, cluster_label: str, read_committed: bool,
               admin: Any = None) -> int:
    return sum(end_offsets(conf, topic, partitions, cluster_label, read_committed, admin).values())


# Consumer errors after which a count cannot be trusted (anything else is transient and retried).
UNRECOVERABLE = {"_AUTO_OFFSET_RESET", "OFFSET_OUT_OF_RANGE", "TOPIC_AUTHORIZATION_FAILED", "UNKNOWN_TOPIC_OR_PART"}


class CommittedCounter:
    """Counts the committed records of one topic's partitions, from offset 0, incrementally."""

    def __init__(self, conf: dict[str, Any], topic: str, partitions: int, cluster_label: str = "target"):
        self.conf, self.topic, self.partitions, self.cluster_label = conf, topic, partitions, cluster_label
        self.consumer: Any = None
        self.counted = 0
        self.reached = {p: 0 for p in range(partitions)}   # next offset to look at, per partition
        self.paused: set[int] = set()

    def _open(self) -> None:
        from confluent_kafka import TopicPartition

        # A unique client id (and so a unique, never-committed group id): counters never interfere.
        self.consumer = clients.plain_consumer(self.conf, f"bench-counter-{uuid.uuid4().hex[:8]}",
                                               read_committed=True)
        self.consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])

    def count_to(self, ends: dict[int, int], timeout: float = 300.0) -> int:
        """Count committed records below ``ends[p]`` in every partition; return the running total."""
        from confluent_kafka import TopicPartition

        if self.consumer is None:
            self._open()
        todo = {p for p in range(self.partitions) if self.reached[p] < ends.get(p, 0)}
        # Only partitions with something to count fetch; the others stay paused (and so unread).
        idle = set(range(self.partitions)) - todo - self.paused
        if idle:
            self.consumer.pause([TopicPartition(self.topic, p) for p in idle])
            self.paused |= idle
        if todo & self.paused:
            self.consumer.resume([TopicPartition(self.topic, p) for p in todo & self.paused])
            self.paused -= todo
        deadline = time.monotonic() + timeout
        while todo:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.cluster_label}: counting {self.topic} did not reach {ends} within "
                                   f"{timeout:.0f} s "
                                   f"(at {self.reached}); is a transaction still open?")
            finished = set()
            for m in self.consumer.consume(10_000, 0.5):
                p = m.partition()
                err = m.error()
                if err is not None:
                    if err.code() == PARTITION_EOF:
                        self.reached[p] = max(self.reached[p], m.offset())
                        continue
                    if err.fatal() or err.name() in UNRECOVERABLE:
                        raise RuntimeError(f"{self.cluster_label}: reading {self.topic}[{p}]: {err.name()}: {err.str()}")
                    continue   # transient (a reconnect, a leader change): librdkafka retries by itself
                offset = m.offset()
                if p in finished or offset >= ends.get(p, 0):
                    if p not in finished:   # first record past the end: leave it for the next call
                        self.consumer.seek(TopicPartition(self.topic, p, offset))
                        finished.add(p)
                        self.reached[p] = max(self.reached[p], ends.get(p, 0))
                    continue
                self.counted += 1
                self.reached[p] = offset + 1
            # Markers at the end of a range move the position, not the records: ask for it.
            open_parts = [TopicPartition(self.topic, p) for p in todo if p not in finished]
            for tp in (self.consumer.position(open_parts) if open_parts else []):
                if tp.offset >= 0:
                    self.reached[tp.partition] = max(self.reached[tp.partition], tp.offset)
            done = {p for p in todo if p in finished or self.reached[p] >= ends.get(p, 0)}
            if done:
                self.consumer.pause([TopicPartition(self.topic, p) for p in done])
                self.paused |= done
                todo -= done
        return self.counted

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None


def stable_and_high(conf: dict[str, Any], topic: str, partitions: int, cluster_label: str,
                    admin: Any = None) -> tuple[dict[int, int], dict[int, int]]:
    """(last stable offsets, high watermarks): a partition whose first is below its second holds an
    open transaction (a missing topic reads as empty and open nowhere)."""
    admin = admin or offsets_admin(conf)
    return (end_offsets(conf, topic, partitions, cluster_label, True, admin),
            end_offsets(conf, topic, partitions, cluster_label, False, admin))


def still_open(stable: dict[int, int], high: dict[int, int]) -> list[int]:
    """The partitions where a transaction is open: the last stable offset is below the high watermark."""
    return sorted(p for p in stable if stable[p] < high[p])


def settle(conf: dict[str, Any], topic: str, partitions: int, cluster_label: str,
           timeout: float = 120.0) -> tuple[dict[int, int], dict[int, int]]:
    """:func:`stable_and_high` once no transaction is open on the topic, or when ``timeout`` is spent
    (the caller reads :func:`still_open` of the answer: a marker may still be on its way)."""
    admin = offsets_admin(conf)
    deadline = time.monotonic() + timeout
    while True:
        stable, high = stable_and_high(conf, topic, partitions, cluster_label, admin)
        if not still_open(stable, high) or time.monotonic() > deadline:
            return stable, high
        time.sleep(0.25)


def wait_until_stable(conf: dict[str, Any], topic: str, partitions: int, cluster_label: str,
                      timeout: float = 120.0) -> dict[int, int]:
    """Ends once no transaction is open on the topic (last stable offset == high watermark)."""
    return settle(conf, topic, partitions, cluster_label, timeout)[0]


def count_committed(conf: dict[str, Any], topic: str, partitions: int, cluster_label: str = "target") -> tuple[int,
                                                                                                               int]:
    """(committed records, offsets) of a topic whose writers are done; offsets - records = markers
    and aborted records."""
    ends = wait_until_stable(conf, topic, partitions, cluster_label)
    counter = CommittedCounter(conf, topic, partitions, cluster_label)
    try:
        return counter.count_to(ends), sum(ends.values())
    finally:
        counter.close()
