"""Bounded reads of one partition (verification, internal topics, tests). Never commit anything."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterator

from eosmirror.kafka import calls, clients
from eosmirror.kafka.retry import retry_until



@dataclass(frozen=True)
class Record:
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int

    def same_content(self, other: "Record") -> bool:
        return (self.key, self.value, self.headers, self.timestamp) == (other.key, other.value, other.headers,
                                                                       other.timestamp)


def _record(m: Any) -> Record:
    return Record(offset=m.offset(), key=m.key(), value=m.value(), headers=tuple(m.headers() or ()),
                  timestamp=m.timestamp()[1])


def watermarks(conf: dict[str, Any], topic: str, partition: int, cluster: str, read_committed: bool = True,
               client_id: str = "eosmirror-reader", group_id: str | None = None) -> tuple[int, int]:
    """(log start, end) where end is the LSO when ``read_committed``, else the high watermark."""
    from confluent_kafka import TopicPartition

    consumer = clients.plain_consumer(conf, client_id, read_committed=read_committed, group_id=group_id)
    try:
        # A topic just created has no leader for a moment: wait for it, briefly.
        low, high = retry_until(10, lambda: consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                                           timeout=15, cached=False),
                                lambda exc: calls.error_name(exc) in calls.LEADERSHIP_MOVING)
        return int(low), int(high)
    except Exception as exc:  # noqa: BLE001 - translated
        raise calls.translate(exc, f"read the offsets of {topic}[{partition}]", cluster,
                              f"Describe on topic {topic}") from None
    finally:
        consumer.close()


def read_range(conf: dict[str, Any], topic: str, partition: int, start: int, end: int, cluster: str,
               read_committed: bool = True, client_id: str = "eosmirror-reader", timeout: float = 120.0,
               group_id: str | None = None) -> list[Record]:
    """The records with offsets in [start, end); ``end`` must not exceed the partition's end offset."""
    if end <= start:
        return []
    consumer = clients.plain_consumer(conf, client_id, read_committed=read_committed, group_id=group_id)
    try:
        return list(iter_range(consumer, topic, partition, start, end, cluster, timeout))
    finally:
        consumer.close()


def iter_range(consumer: Any, topic: str, partition: int, start: int, end: int, cluster: str,
               timeout: float = 120.0) -> Iterator[Record]:
    """The records with offsets in [start, end), read by ``consumer`` (a ``plain_consumer``, reusable
    for several ranges). ``end`` must not exceed the end offset (the LSO for read_committed). ``start``
    may fall inside a transaction, aborted data or a marker: the consumer skips what is not committed
    and its position moves past it, so the range ends even when its last offsets are not records."""
    from confluent_kafka import TopicPartition

    if end <= start:
        return
    consumer.assign([TopicPartition(topic, partition, start)])
    deadline = time.monotonic() + timeout
    reached = start
    while reached < end:
        if time.monotonic() > deadline:
            raise calls.translate(TimeoutError(), f"read {topic}[{partition}] {start}..{end}", cluster)
        for m in consumer.consume(5000, 0.1):   # short waits: internal topics are small
            err = m.error()
            if err is not None:
                if calls.is_partition_eof(err):
                    reached = max(reached, m.offset())
                    continue
                if err.name() == "GROUP_AUTHORIZATION_FAILED":
                    continue   # a coordinator lookup for group.id; reading with assign() needs no group
                raise calls.translate(Exception(err), f"read {topic}[{partition}]", cluster, f"Read on topic {topic}")
            if m.offset() < start:
                continue   # fetched for an earlier range of a reused consumer (librdkafka drops most of these)
            if m.offset() >= end:
                reached = end
                continue
            yield _record(m)
            reached = max(reached, m.offset() + 1)
        position = consumer.position([TopicPartition(topic, partition)])[0].offset
        reached = max(reached, position)


def read_all(conf: dict[str, Any], topic: str, partition: int, cluster: str, read_committed: bool = True,
             client_id: str = "eosmirror-reader", timeout: float = 120.0, missing_ok: bool = False,
             group_id: str | None = None) -> list[Record]:
    """Every record from the partition's start to its current end ([] for a missing topic if ``missing_ok``)."""
    from eosmirror.core.errors import TargetMismatchError

    try:
        low, high = watermarks(conf, topic, partition, cluster, read_committed, client_id, group_id)
    except TargetMismatchError:
        if missing_ok:
            return []
        raise
    return read_range(conf, topic, partition, low, high, cluster, read_committed, client_id, timeout, group_id)


def first_timestamps(conf: dict[str, Any], ranges: dict[tuple[str, int], tuple[int, int]], cluster: str,
                     client_id: str = "eosmirror-reader", group_id: str | None = None,
                     timeout: float = 30.0) -> dict[tuple[str, int], int | None]:
    """Per partition, the timestamp of the first committed record in [start, end) (read_committed,
    one consumer for all partitions); None when the range holds only markers or aborted records."""
    from confluent_kafka import TopicPartition

    wanted = {tp: rng for tp, rng in ranges.items() if rng[1] > rng[0]}
    found: dict[tuple[str, int], int | None] = {tp: None for tp in ranges}
    if not wanted:
        return found
    consumer = clients.plain_consumer(conf, client_id, read_committed=True, group_id=group_id)
    try:
        consumer.assign([TopicPartition(t, p, start) for (t, p), (start, _) in wanted.items()])
        pending, deadline = set(wanted), time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.2):
                tp, err = (m.topic(), m.partition()), m.error()
                if tp not in pending:
                    continue
                if err is not None and not calls.is_partition_eof(err):
                    if err.name() == "GROUP_AUTHORIZATION_FAILED":
                        continue
                    raise calls.translate(Exception(err), f"read {tp[0]}[{tp[1]}]", cluster, f"Read on topic {tp[0]}")
                if err is None and m.offset() < wanted[tp][1]:
                    found[tp] = m.timestamp()[1]
                pending.discard(tp)   # a record, or the end of the partition: either way, decided
                consumer.pause([TopicPartition(*tp)])
        return found
    finally:
        consumer.close()


def data_offsets(conf: dict[str, Any], ranges: dict[tuple[str, int], tuple[int, int]], cluster: str,
                 client_id: str = "eosmirror-reader", group_id: str | None = None,
                 timeout: float = 60.0) -> dict[tuple[str, int], tuple[int, tuple[int, ...]]]:
    """Per partition, the offsets of the committed data records in [start, end) (read_committed, one
    consumer for all partitions), as (reached, offsets): every offset below ``reached`` was read. It
    falls short of ``end`` only where the partition's last stable offset lies below ``end``.
    Transaction markers and aborted records are skipped by the consumer, as any consumer skips them."""
    from confluent_kafka import TopicPartition

    wanted = {tp: rng for tp, rng in ranges.items() if rng[1] > rng[0]}
    reached = {tp: start for tp, (start, _) in ranges.items()}
    found: dict[tuple[str, int], list[int]] = {tp: [] for tp in ranges}
    if not wanted:
        return {tp: (reached[tp], ()) for tp in ranges}
    consumer = clients.plain_consumer(conf, client_id, read_committed=True, group_id=group_id)
    try:
        consumer.assign([TopicPartition(t, p, start) for (t, p), (start, _) in wanted.items()])
        pending, deadline = set(wanted), time.monotonic() + timeout

        def done(tp: tuple[str, int]) -> None:
            pending.discard(tp)
            consumer.pause([TopicPartition(*tp)])

        while pending:
            if time.monotonic() > deadline:
                left = ", ".join(f"{t}[{p}] at {reached[(t, p)]} of {wanted[(t, p)][1]}" for t, p in sorted(pending))
                raise calls.translate(TimeoutError(), f"read {left} within {timeout:.0f} s", cluster)
            for m in consumer.consume(500, 0.2):
                tp, err = (m.topic(), m.partition()), m.error()
                if tp not in pending:
                    continue
                if err is not None:
                    if calls.is_partition_eof(err):   # the log (its last stable offset) ends here
                        reached[tp] = max(reached[tp], min(m.offset(), wanted[tp][1]))
                        done(tp)
                        continue
                    if err.name() == "GROUP_AUTHORIZATION_FAILED":
                        continue
                    raise calls.translate(Exception(err), f"read {tp[0]}[{tp[1]}]", cluster, f"Read on topic {tp[0]}")
                if m.offset() >= wanted[tp][1]:
                    reached[tp] = wanted[tp][1]
                    done(tp)
                    continue
                found[tp].append(m.offset())
                reached[tp] = max(reached[tp], m.offset() + 1)
            if pending:   # markers and aborted records move the position without a message
                for position in consumer.position([TopicPartition(*tp) for tp in pending]):
                    tp = (position.topic, position.partition)
                    if position.offset >= 0:
                        reached[tp] = max(reached[tp], min(position.offset, wanted[tp][1]))
                    if reached[tp] >= wanted[tp][1]:
                        done(tp)
        return {tp: (reached[tp], tuple(found[tp])) for tp in ranges}
    finally:
        consumer.close()
