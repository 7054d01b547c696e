"""A synthetic offset-sync history, written straight to a mirror's sync topic (fast), with a known answer.

Shape (``Shape``): ``topics`` target topics of ``partitions`` partitions each, plus one IDLE partition
whose only syncs are the first ones of the history (its progress "expired": recovering it must not
read the history). Sync k of a partition covers source [100k, 100k + 100) and copied source
[100k, 100k + 60) and [100k + 70, 100k + 100) (a gap of 10: markers, aborted or compacted records)
to target [90k, 90k + 90). Records go round-robin over the partitions, in transactions; every
``abort_every``-th transaction also writes syncs that CONTRADICT the chain and is aborted, so a reader
that ever took an aborted record gives a wrong translation (checked) or an overlap error.

The real encoding (``OffsetSync.encode``) and the real key, so the real readers read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from eosmirror.core.offsetsync import OffsetSync

SOURCE_PER_SYNC, COPIED_PER_SYNC = 100, 90
IDLE_SYNCS = 10


@dataclass(frozen=True)
class Shape:
    records: int
    topics: int = 10
    partitions: int = 20
    prefix: str = "bench-sync"
    transaction_records: int = 20_000
    abort_every: int = 10

    def topic(self, index: int) -> str:
        return f"{self.prefix}-t{index}"

    @property
    def idle(self) -> tuple[str, int]:
        return f"{self.prefix}-idle", 0

    @property
    def topics_partitions(self) -> range:
        return range(self.topics * self.partitions)

    def busy(self) -> list[tuple[str, int]]:
        return [(self.topic(t), p) for t in range(self.topics) for p in range(self.partitions)]

    def syncs_of(self, tp: tuple[str, int]) -> int:
        """How many syncs the history holds for a partition (so its progress is 100x that)."""
        if tp == self.idle:
            return IDLE_SYNCS
        busy = len(self.topics_partitions)
        rest = self.records - IDLE_SYNCS
        index = int(tp[0].rsplit("-t", 1)[1]) * self.partitions + tp[1]
        return rest // busy + (1 if index < rest % busy else 0)


def sync(tp: tuple[str, int], k: int, target_base: int | None = None) -> OffsetSync:
    start = k * SOURCE_PER_SYNC
    return OffsetSync(target_topic=tp[0], partition=tp[1], source_topic=tp[0], source_start=start,
                      source_end=start + SOURCE_PER_SYNC,
                      target_base=k * COPIED_PER_SYNC if target_base is None else target_base,
                      runs=((start, 60), (start + 70, 30)), generation=1, slot=tp[1] % 2, created_ms=1)


def expected_target(committed: int) -> int:
    """The exact failover translation of a source position in this history (the copy of the first
    copied record at or after it)."""
    k, r = divmod(committed, SOURCE_PER_SYNC)
    return k * COPIED_PER_SYNC + (r if r < 60 else 60 if r < 70 else r - 10)


def _records(shape: Shape) -> Iterator[OffsetSync]:
    for k in range(IDLE_SYNCS):
        yield sync(shape.idle, k)
    busy, counters = shape.busy(), {}
    for i in range(shape.records - IDLE_SYNCS):
        tp = busy[i % len(busy)]
        k = counters.get(tp, 0)
        counters[tp] = k + 1
        yield sync(tp, k)


def write(conf: dict[str, Any], topic: str, shape: Shape, transactional_id: str) -> int:
    """Write the history; returns the aborted sync records written (they are in the log, never visible)."""
    from confluent_kafka import Producer

    producer = Producer({**conf, "transactional.id": transactional_id, "linger.ms": 50, "batch.size": 1_000_000,
                         "compression.type": "lz4", "queue.buffering.max.messages": 1_000_000})
    producer.init_transactions(60)
    aborted, in_txn, txns = 0, 0, 0
    producer.begin_transaction()
    for record in _records(shape):
        producer.produce(topic, key=record.key(), value=record.encode(), partition=0)
        in_txn += 1
        if in_txn >= shape.transaction_records:
            producer.commit_transaction(120)
            txns += 1
            in_txn = 0
            if txns % shape.abort_every == 0:
                aborted += _aborted_transaction(producer, topic, shape, txns * shape.transaction_records)
            producer.begin_transaction()
            producer.poll(0)
    producer.commit_transaction(120)
    producer.flush(120)
    return aborted


def _aborted_transaction(producer: Any, topic: str, shape: Shape, written: int) -> int:
    """Syncs that overlap the chain where it is being written (a wrong target base), then aborted."""
    k = max(0, written // len(shape.busy()) - 1)
    producer.begin_transaction()
    for tp in shape.busy():
        producer.produce(topic, key=sync(tp, k).key(), value=sync(tp, k, target_base=10**12).encode(), partition=0)
    producer.flush(60)
    producer.abort_transaction(60)
    return len(shape.busy())


def append_tail(conf: dict[str, Any], topic: str, shape: Shape, transactional_id: str, per_partition: int) -> Shape:
    """``per_partition`` more syncs of every busy partition (a mirror run since the snapshot); the new shape."""
    from confluent_kafka import Producer

    producer = Producer({**conf, "transactional.id": transactional_id, "linger.ms": 20})
    producer.init_transactions(60)
    producer.begin_transaction()
    for step in range(per_partition):
        for tp in shape.busy():
            producer.produce(topic, key=sync(tp, 0).key(), value=sync(tp, shape.syncs_of(tp) + step).encode(),
                             partition=0)
    producer.commit_transaction(120)
    return Shape(**{**shape.__dict__, "records": shape.records + per_partition * len(shape.busy())})
