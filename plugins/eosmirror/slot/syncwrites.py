"""What a slot writes besides the records, in both delivery modes: the offset syncs (docs/architecture.md "How a
run works", slot step 4.5) and the progress offsets (step 4.6, or at_least_once's plain commit).

An offset sync states which source offsets of a partition went to which target offsets; a
partition's sync starts at its committed progress and ends where the copy reached, so that the syncs
of a partition form a chain without holes (core/offsetsync.py).
"""

from __future__ import annotations

import time
from typing import Any, Iterable

from eosmirror.core.offsetsync import split
from eosmirror.kafka import progress
from eosmirror.slot.slotstate import PartitionCopy, SlotTask


def now_ms() -> int:
    return int(time.time() * 1000)


def produce_syncs(producer: Any, task: SlotTask, bases: Iterable[tuple[PartitionCopy, int]]) -> None:
    """Produce the offset sync of every (partition, its target base) to the sync topic; the caller
    flushes (and decides what an unacknowledged sync means)."""
    now = now_ms()
    for s, base in bases:
        for sync in split(s.sync(base, task.generation, task.slot, now)):
            _produce_sync(producer, task.offset_sync_topic, sync)


def _produce_sync(producer: Any, topic: str, sync: Any) -> None:
    while True:
        try:
            producer.produce(topic, sync.encode(), sync.key(), 0)
            return
        except BufferError:
            producer.poll(0.05)


def progress_offsets(states: Iterable[PartitionCopy], generation: int, accounted: bool = False) -> list[Any]:
    """The new progress of every partition of the slot (idle ones too, so that it never expires),
    each with the metadata that ties it to its source topic and the generation, and (``accounted``:
    exactly_once, whose transactions end in markers) what the mirror accounts for on the target
    after this transaction (core/foreign.py), committed atomically with the records."""
    from confluent_kafka import TopicPartition

    return [TopicPartition(s.task.target_topic, s.task.partition, s.reached,
                           metadata=progress.encode_metadata(s.task.source_topic, s.task.source_topic_id, generation,
                                                             s.accounting_after() if accounted else None))
            for s in states]
