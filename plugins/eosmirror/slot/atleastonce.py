"""The at_least_once delivery mode of a slot: no transactions, so duplicates are possible, never loss.

Per batch (the numbers are docs/architecture.md "How a run works", slot steps): 4.2 copy (recordloop.py); 4.3
flush, where any failed delivery fails the slot (progress must never pass a lost record); 4.5 the
offset syncs, each based on the target's end minus the records written (there is no delivery report
per record); then, instead of 4.6-4.7, a plain commit of the progress once every record and sync was
acknowledged. A crash between the acknowledgement and that commit copies the batch again next time.
Steps 3 and 5 and the abort/rewind policy are the copier's, as in exactly_once.
"""

from __future__ import annotations

import time
from typing import Any

from eosmirror.core.errors import EosMirrorError
from eosmirror.kafka import calls
from eosmirror.slot.faults import Faults
from eosmirror.slot.recordloop import RecordLoop
from eosmirror.slot.slotio import SlotIO
from eosmirror.slot.slotstate import PartitionCopy, SlotTask
from eosmirror.slot.syncwrites import produce_syncs, progress_offsets

MAX_DELIVERY_ERRORS = 20   # kept for the error message (three are shown)


class AtLeastOnce:
    def __init__(self, task: SlotTask, io: SlotIO, faults: Faults):
        self.task, self.io, self.faults = task, io, faults
        self.delivery_errors: list[str] = []

    def on_delivery(self, err: Any, msg: Any) -> None:
        """The idempotent producer's delivery report of every record and sync."""
        if err is not None and len(self.delivery_errors) < MAX_DELIVERY_ERRORS:
            self.delivery_errors.append(f"{msg.topic()}[{msg.partition()}]: {err.name()}: {err.str()}")

    def batch(self, states: dict[tuple[str, int], PartitionCopy], loop: RecordLoop, bytes_copied: int
              ) -> tuple[int, float]:
        """Copy one batch and commit its progress. Returns the slot's bytes copied and the batch's
        seconds; the caller then marks every partition's progress committed."""
        task, producer = self.task, self.io.producer
        for s in states.values():
            s.begin_transaction()
        started = time.monotonic()
        # 4.2 Copy.
        bytes_copied = loop.copy(states, started + task.max_transaction_seconds, bytes_copied)
        # 4.3 Flush: a failed delivery fails the slot (progress must not pass a lost record).
        if producer.flush(120):
            raise EosMirrorError(f"slot {task.slot}: records were not acknowledged within 120 s")
        if self.delivery_errors:
            raise EosMirrorError(f"slot {task.slot}: delivery failed: {'; '.join(self.delivery_errors[:3])}")
        # 4.5 Offset syncs; no delivery report per record here, so the base is the end minus the records.
        moved = [s for s in states.values() if s.moved()]
        ends = self.io.target_end_offsets([(s.task.target_topic, s.task.partition) for s in moved])
        produce_syncs(producer, task, [(s, ends[(s.task.target_topic, s.task.partition)] - s.count) for s in moved])
        if producer.flush(60) or self.delivery_errors:
            raise EosMirrorError(f"slot {task.slot}: offset syncs were not acknowledged")
        self.faults.hit("before_commit", task.slot)
        # Instead of 4.6-4.7: a plain commit of the progress, after every record was acknowledged.
        calls.call(self.io.reader.commit, "commit the progress", task.target_label,
                   f"Read on group {task.progress_group}", offsets=progress_offsets(states.values(), task.generation),
                   asynchronous=False)
        return bytes_copied, time.monotonic() - started
