"""Bounded reads of partitions (verification, internal topics, tests). Never commit anything.

Reads of many partitions use ONE consumer with all of them assigned (``scan_ranges``): a consumer
per partition costs a client start, a metadata round trip and a fetch session each."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, TypeVar

from eosmirror.core.errors import EosMirrorError, TargetMismatchError
from eosmirror.core.groupfailover import LogRead
from eosmirror.kafka import calls, clients
from eosmirror.kafka.cluster import Cluster
from eosmirror.kafka.retry import retry_until

T = TypeVar("T")

# How long one consume() call of a bounded read waits for more records (iter_range).
READ_WAIT_SECONDS = 0.01


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


def watermarks(cluster: Cluster, topic: str, partition: int, read_committed: bool = True,
               client_id: str = "eosmirror-reader", group_id: str | None = None) -> tuple[int, int]:
    """(log start, end) where end is the LSO when ``read_committed``, else the high watermark."""
    consumer = clients.plain_consumer(cluster.settings, client_id, read_committed=read_committed, group_id=group_id)
    try:
        return ends_by(consumer, cluster, topic, partition)
    finally:
        consumer.close()


def ends_by(consumer: Any, cluster: Cluster, topic: str, partition: int) -> tuple[int, int]:
    """(log start, end) of the partition, asked by ``consumer`` (its isolation level decides the end)."""
    from confluent_kafka import TopicPartition

    try:
        # The topic's metadata first: a fresh consumer's offsets query could otherwise wait for the
        # partition's leader (a slot's generation check at its start).
        consumer.list_topics(topic, timeout=15)
        # A topic just created has no leader for a moment: wait for it, briefly.
        low, high = retry_until(10, lambda: consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                                           timeout=15, cached=False),
                                lambda exc: calls.error_name(exc) in calls.LEADERSHIP_MOVING)
        return int(low), int(high)
    except Exception as exc:  # noqa: BLE001 - translated
        raise calls.translate(exc, f"read the offsets of {topic}[{partition}]", cluster.label,
                              f"Describe on topic {topic}") from None


def read_range(cluster: Cluster, topic: str, partition: int, start: int, end: int,
               read_committed: bool = True, client_id: str = "eosmirror-reader", timeout: float = 120.0,
               group_id: str | None = None) -> list[Record]:
    """The records with offsets in [start, end); ``end`` must not exceed the partition's end offset."""
    if end <= start:
        return []
    consumer = clients.plain_consumer(cluster.settings, client_id, read_committed=read_committed, group_id=group_id)
    try:
        return list(iter_range(consumer, topic, partition, start, end, cluster.label, timeout))
    finally:
        consumer.close()


def read_held(cluster: Cluster, topic: str, partition: int, start: int, end: int, client_id: str,
              group: str | None) -> tuple[int, list[Record]]:
    """(first offset of [start, end) the partition still holds, its committed records from there).

    Retention or delete-records may have moved the log start past ``start``, even while reading
    (the read then fails with an offset out of range): ask for the log start again, a few times."""
    for attempt in range(3):
        low = watermarks(cluster, topic, partition, client_id=client_id, group_id=group)[0]
        held = min(max(start, low), end)
        try:
            return held, read_range(cluster, topic, partition, held, end, client_id=client_id, group_id=group)
        except EosMirrorError as exc:
            if "_AUTO_OFFSET_RESET" not in str(exc) or attempt == 2:
                raise
    raise AssertionError("not reached")


def iter_range(consumer: Any, topic: str, partition: int, start: int, end: int, cluster_label: str,
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
            raise calls.translate(TimeoutError(), f"read {topic}[{partition}] {start}..{end}", cluster_label)
        # consume(n, t) waits out t unless n records came: every read of a small internal topic (a
        # slot's generation check at each start, on the hand-over's path) waits at least t, so t is short.
        for m in consumer.consume(5000, READ_WAIT_SECONDS):
            err = m.error()
            if err is not None:
                if calls.is_partition_eof(err):
                    reached = max(reached, m.offset())
                    continue
                if err.name() == "GROUP_AUTHORIZATION_FAILED":
                    continue   # a coordinator lookup for group.id; reading with assign() needs no group
                raise calls.translate(Exception(err), f"read {topic}[{partition}]", cluster_label,
                                      f"Read on topic {topic}")
            if m.offset() < start:
                continue   # fetched for an earlier range of a reused consumer (librdkafka drops most of these)
            if m.offset() >= end:
                reached = end
                continue
            yield _record(m)
            reached = max(reached, m.offset() + 1)
        position = consumer.position([TopicPartition(topic, partition)])[0].offset
        reached = max(reached, position)


def read_all(cluster: Cluster, topic: str, partition: int, read_committed: bool = True,
             client_id: str = "eosmirror-reader", timeout: float = 120.0, missing_ok: bool = False,
             group_id: str | None = None) -> list[Record]:
    """Every record from the partition's start to its current end ([] for a missing topic if ``missing_ok``).
    One consumer asks the ends and reads: a second client's start costs its own connections and
    metadata, a few round trips (the state topic is read this way at every command's step, across a
    region when the mirror's target is far: the reverse mirror's)."""
    consumer = clients.plain_consumer(cluster.settings, client_id, read_committed=read_committed, group_id=group_id)
    try:
        return read_all_by(consumer, cluster, topic, partition, timeout, missing_ok)
    finally:
        consumer.close()


def read_all_by(consumer: Any, cluster: Cluster, topic: str, partition: int, timeout: float = 120.0,
                missing_ok: bool = False) -> list[Record]:
    """``read_all`` by a ``plain_consumer`` of the caller's (reusable for other reads of the same cluster)."""
    try:
        low, high = ends_by(consumer, cluster, topic, partition)
    except TargetMismatchError:
        if missing_ok:
            return []
        raise
    return list(iter_range(consumer, topic, partition, low, high, cluster.label, timeout))


def first_timestamps(cluster: Cluster, ranges: dict[tuple[str, int], tuple[int, int]],
                     client_id: str = "eosmirror-reader", group_id: str | None = None,
                     timeout: float = 30.0) -> dict[tuple[str, int], int | None]:
    """Per partition, the timestamp of the first committed record in [start, end) (read_committed,
    one consumer for all partitions); None when the range holds only markers or aborted records."""
    from confluent_kafka import TopicPartition

    wanted = {tp: rng for tp, rng in ranges.items() if rng[1] > rng[0]}
    found: dict[tuple[str, int], int | None] = {tp: None for tp in ranges}
    if not wanted:
        return found
    consumer = clients.plain_consumer(cluster.settings, client_id, read_committed=True, group_id=group_id)
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
                    raise calls.translate(Exception(err), f"read {tp[0]}[{tp[1]}]", cluster.label,
                                          f"Read on topic {tp[0]}")
                if err is None and m.offset() < wanted[tp][1]:
                    found[tp] = m.timestamp()[1]
                pending.discard(tp)   # a record, or the end of the partition: either way, decided
                consumer.pause([TopicPartition(*tp)])
        return found
    finally:
        consumer.close()


def data_offsets(cluster: Cluster, ranges: dict[tuple[str, int], tuple[int, int]],
                 client_id: str = "eosmirror-reader", group_id: str | None = None,
                 timeout: float = 60.0) -> dict[tuple[str, int], tuple[int, tuple[int, ...]]]:
    """Per partition, the offsets of the committed data records in [start, end) (read_committed, one
    consumer for all partitions), as (reached, offsets): every offset below ``reached`` was read. It
    falls short of ``end`` only where the partition's last stable offset lies below ``end``.
    Transaction markers and aborted records are skipped by the consumer, as any consumer skips them."""
    reached, found = scan_ranges(cluster, ranges, lambda m: m.offset(), client_id, group_id, timeout)
    return {tp: (reached[tp], tuple(found[tp])) for tp in ranges}


def log_reads(cluster: Cluster, ranges: dict[tuple[str, int], tuple[int, int]], client_id: str,
              group_id: str | None = None) -> dict[tuple[str, int], LogRead]:
    """``data_offsets`` as the group moves' decisions take it: per partition a ``LogRead`` of [start, end)."""
    if not ranges:
        return {}
    found = data_offsets(cluster, ranges, client_id, group_id=group_id)
    return {tp: LogRead(ranges[tp][0], reached, data) for tp, (reached, data) in found.items()}


def read_ranges(cluster: Cluster, ranges: dict[tuple[str, int], tuple[int, int]],
                client_id: str = "eosmirror-reader", group_id: str | None = None, timeout: float = 120.0,
                moved: set[tuple[str, int]] | None = None) -> dict[tuple[str, int], list[Record]]:
    """Per partition, its committed records in [start, end) (read_committed, ONE consumer for all the
    partitions: one assignment, fetches shared among them, so the cost follows the records read, not
    the partitions). ``end`` must not exceed the partition's last stable offset. A partition whose
    ``start`` lies below its log start (retention or delete-records ran) is added to ``moved`` and
    left out, when ``moved`` is given; otherwise it fails as ``read_range`` does."""
    return scan_ranges(cluster, ranges, _record, client_id, group_id, timeout, moved)[1]


def scan_ranges(cluster: Cluster, ranges: dict[tuple[str, int], tuple[int, int]],
                keep: Callable[[Any], T], client_id: str = "eosmirror-reader", group_id: str | None = None,
                timeout: float = 60.0, moved: set[tuple[str, int]] | None = None,
                ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], list[T]]]:
    """(reached, kept): the committed records of every [start, end) read by one read_committed
    consumer, ``keep(message)`` of each, in offset order; every offset below ``reached`` was read."""
    from confluent_kafka import TopicPartition

    wanted = {tp: rng for tp, rng in ranges.items() if rng[1] > rng[0]}
    reached = {tp: start for tp, (start, _) in ranges.items()}
    found: dict[tuple[str, int], list[T]] = {tp: [] for tp in ranges}
    if not wanted:
        return reached, found
    consumer = clients.plain_consumer(cluster.settings, client_id, read_committed=True, group_id=group_id)
    try:
        consumer.assign([TopicPartition(t, p, start) for (t, p), (start, _) in wanted.items()])
        pending, deadline = set(wanted), time.monotonic() + timeout

        def done(tp: tuple[str, int]) -> None:
            pending.discard(tp)
            consumer.pause([TopicPartition(*tp)])

        while pending:
            if time.monotonic() > deadline:
                raise _timed_out(pending, reached, wanted, timeout, cluster.label)
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
                    if moved is not None and err.name() == "_AUTO_OFFSET_RESET":
                        moved.add(tp)
                        found[tp] = []
                        done(tp)
                        continue
                    raise calls.translate(Exception(err), f"read {tp[0]}[{tp[1]}]", cluster.label,
                                          f"Read on topic {tp[0]}")
                if m.offset() >= wanted[tp][1]:
                    reached[tp] = wanted[tp][1]
                    done(tp)
                    continue
                found[tp].append(keep(m))
                reached[tp] = max(reached[tp], m.offset() + 1)
            if pending:   # markers and aborted records move the position without a message
                _advance(consumer, pending, reached, wanted, done)
        return reached, found
    finally:
        consumer.close()


def _advance(consumer: Any, pending: set[tuple[str, int]], reached: dict[tuple[str, int], int],
             wanted: dict[tuple[str, int], tuple[int, int]], done: Callable[[tuple[str, int]], None]) -> None:
    """Move ``reached`` to each pending partition's position; a range whose end it reaches is done."""
    from confluent_kafka import TopicPartition

    for position in consumer.position([TopicPartition(*tp) for tp in pending]):
        tp = (position.topic, position.partition)
        if position.offset >= 0:
            reached[tp] = max(reached[tp], min(position.offset, wanted[tp][1]))
        if reached[tp] >= wanted[tp][1]:
            done(tp)


def _timed_out(pending: set[tuple[str, int]], reached: dict[tuple[str, int], int],
               wanted: dict[tuple[str, int], tuple[int, int]], timeout: float, cluster_label: str) -> Exception:
    left = sorted(pending)
    named = ", ".join(f"{t}[{p}] at {reached[(t, p)]} of {wanted[(t, p)][1]}" for t, p in left[:10])
    more = f" and {len(left) - 10} more partition(s)" if len(left) > 10 else ""
    return calls.translate(TimeoutError(), f"read {named}{more} within {timeout:.0f} s", cluster_label)
