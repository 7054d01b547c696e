"""What a slot knows about each of its partitions while it copies, and what it reports.

Picklable plain data: ``PartitionTask``/``SlotTask`` travel from the driver to a Spark executor,
``SlotResult`` (core/runreport.py) travels back.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from dataclasses import dataclass, field
from typing import Any

import eosmirror
from eosmirror.core.bandwidth import SlotCap
from eosmirror.core.errors import ProgressUnavailableError, TargetMismatchError
from eosmirror.core.foreign import Accounting
from eosmirror.core.offsetsync import OffsetSync, RunBuilder
from eosmirror.core.runreport import PartitionResult, SlotResult, SlotStatus

log = logging.getLogger(__name__)

RECORD_OVERHEAD = 100   # bytes a record adds to a batch beyond key, value and headers (upper bound)


@dataclass(frozen=True)
class PartitionTask:
    source_topic: str
    target_topic: str
    partition: int
    start: int                  # the driver's planned start (progress, recovered, or start_from)
    end: int                    # exclusive bound; never above the source LSO seen by the driver
    had_progress: bool          # the planned start came from committed progress
    skip_truncated: bool = False  # on_truncation=skip_to_log_start moved the start past deleted data
    source_topic_id: str = ""
    target_topic_id: str = ""
    max_message_bytes: int = 1048588


@dataclass(frozen=True)
class SlotTask:
    mirror: str
    slot: int
    transactional_id: str
    generation: int
    delivery: str
    progress_group: str
    partitions: tuple[PartitionTask, ...]
    source_conf: dict[str, Any] = field(repr=False)   # secrets: never logged, never in results
    target_conf: dict[str, Any] = field(repr=False)
    source_overrides: dict[str, Any] = field(default_factory=dict, repr=False)
    target_overrides: dict[str, Any] = field(default_factory=dict, repr=False)
    max_transaction_seconds: float = 30.0
    transaction_timeout_ms: int = 90000
    max_bytes: int | None = None
    source_label: str = "source"
    target_label: str = "target"
    run_id: str = ""
    offset_sync_topic: str = ""
    # Follow runs (follow.py): after the bounded ranges, keep copying up to the source's last stable
    # offsets until this wall-clock time (epoch seconds) or until the next run takes over. None: bounded.
    follow_until: float | None = None
    # A run served by the run server (spark/server.py): its lease, (host, port, token) of the server's
    # lease listener (spark/leases.py). The Spark JVM outlives such a run, so the lease's end (its
    # client is gone) is what ends the slot (lifeline.py). None: the run's own JVM is the lifeline.
    lease: tuple[str, int, str] | None = field(default=None, repr=False)
    # exactly_once: at most this many partitions per transaction (the copier commits the slot in chunks,
    # each chunk's transactions carrying its own partitions' records, syncs and progress). None: one chunk.
    max_partitions_per_transaction: int | None = None
    # The final run of a switchover: the slot copies while the mirror is switching-over (no other does).
    final_of_switchover: bool = False
    # The slot's share of the mirror's bandwidth cap (core/bandwidth.py); None: not capped.
    cap: SlotCap | None = None
    # An operator accepted the foreign records found on the target (`eosmirror run --accept-foreign`):
    # they are logged, not refused, and the mirror copies on after them (core/foreign.py).
    accept_foreign: bool = False


class PartitionCopy:
    """Mutable per-partition state of one slot attempt."""

    __slots__ = ("task", "target_topic", "partition", "limit", "committed", "had_committed", "end", "done", "eof",
                 "next", "base", "count", "bytes", "runs", "txn_start", "position", "first_error", "records_total",
                 "bytes_total", "newest_ts", "copy_start", "target_from", "target_to", "accounting")

    def __init__(self, task: PartitionTask, committed: int | None, accounting: Accounting | None = None):
        self.task = task
        # What the mirror accounts for on the target partition (core/foreign.py): from the committed
        # progress, then from the slot's own target check and commits. None: not checked yet.
        self.accounting = accounting
        # Copied out of the task for the per-record loop (one attribute lookup instead of two).
        self.target_topic, self.partition = task.target_topic, task.partition
        self.limit = task.max_message_bytes - RECORD_OVERHEAD
        self.had_committed = committed is not None
        self.committed = committed if committed is not None else task.start
        self.copy_start = self.committed
        self.end = max(task.end, self.committed)   # never move progress backwards
        self.records_total = 0
        self.bytes_total = 0
        self.newest_ts = -1
        # Target offsets this attempt's committed transactions wrote: [target_from, target_to).
        self.target_from: int | None = None
        self.target_to: int | None = None
        self.first_error: str | None = None
        self.begin_transaction()

    def begin_transaction(self) -> None:
        self.txn_start = self.committed
        self.next = self.committed
        self.eof = -1
        self.position = -1
        self.done = self.committed >= self.end
        self.base: int | None = None
        self.count = 0
        self.bytes = 0
        self.runs = RunBuilder()

    def delivered_first(self, err: Any, msg: Any) -> None:
        """Delivery report of this transaction's first record: its target offset is the base."""
        if err is not None:
            self.first_error = err.str()
        else:
            self.base = msg.offset()

    @property
    def reached(self) -> int:
        """Source offset up to which everything is copied or known to be a gap, capped at end."""
        return min(self.end, max(self.next, self.eof, self.position))

    def is_complete(self) -> bool:
        return self.reached >= self.end

    def moved(self) -> bool:
        return self.reached != self.txn_start or not self.had_committed

    def sync(self, target_base: int, generation: int, slot: int, now_ms: int) -> OffsetSync:
        return OffsetSync(target_topic=self.task.target_topic, partition=self.task.partition,
                          source_topic=self.task.source_topic, source_start=self.txn_start,
                          source_end=self.reached, target_base=target_base, runs=self.runs.finish(),
                          generation=generation, slot=slot, created_ms=now_ms,
                          source_topic_id=self.task.source_topic_id, target_topic_id=self.task.target_topic_id)

    def accounting_after(self) -> Accounting | None:
        """The accounting this transaction commits with the progress: moved past its records, if it wrote any."""
        if self.accounting is None or not self.count or self.base is None:
            return self.accounting
        return self.accounting.after_write(self.base, self.count)

    def commit(self) -> None:
        self.accounting = self.accounting_after()
        self.committed = self.reached
        self.had_committed = True
        if self.count and self.base is not None:
            # One transaction's copies take consecutive target offsets from its base (checked against
            # the target's end before the commit), so the run's range is [first base, last base + count).
            self.target_from = self.base if self.target_from is None else self.target_from
            self.target_to = self.base + self.count
        self.records_total += self.count
        self.bytes_total += self.bytes

    def foreign_writer_error(self, target_label: str, end: int) -> TargetMismatchError:
        """Step 4.4 failed: the target partition does not end at base + records."""
        return TargetMismatchError(
            f"{target_label}: target {self.task.target_topic}[{self.task.partition}] ends at {end} but this "
            f"transaction's {self.count} records start at {self.base}: another producer writes to the target "
            f"topic. eosmirror must be the only writer of its target topics; the transaction was aborted")

    def report(self, now_ms: int) -> PartitionResult:
        return PartitionResult(
            source_topic=self.task.source_topic, target_topic=self.task.target_topic, partition=self.task.partition,
            start=self.copy_start, end=self.committed, planned_end=self.task.end, records=self.records_total,
            bytes=self.bytes_total, complete=self.committed >= self.end, target_from=self.target_from,
            target_to=self.target_to, record_age_ms=(now_ms - self.newest_ts) if self.newest_ts >= 0 else None)


def executor_info() -> dict[str, str]:
    """Where a slot ran: host, interpreter, and where eosmirror came from."""
    return {"host": socket.gethostname(), "python": sys.executable, "eosmirror": str(eosmirror.__file__)}


def slot_result(task: SlotTask, status: SlotStatus = SlotStatus.PENDING) -> SlotResult:
    """The result of a slot that runs in this process (attempt_pid, executor: where it ran)."""
    return SlotResult(slot=task.slot, transactional_id=task.transactional_id, status=status, attempt_pid=os.getpid(),
                      executor=executor_info())


def start_states(t: SlotTask, committed: dict[tuple[str, int], Any],
                 previous: dict[tuple[str, int], PartitionCopy]) -> dict[tuple[str, int], PartitionCopy]:
    """Step 3: each partition's copy state from its committed progress (``progress.Progress`` by target
    partition), checked against the plan; ``previous``: this attempt's states before a rewind, whose
    committed totals carry over."""
    states = {}
    for p in t.partitions:
        found = committed.get((p.target_topic, p.partition))
        where = f"{p.target_topic}[{p.partition}]"
        if found is None and p.had_progress:
            raise ProgressUnavailableError(f"slot {t.slot}: the progress of {where} disappeared after "
                                           f"planning (was it reset by hand?); run again to re-plan")
        if found is not None and p.skip_truncated and found.offset < p.start:
            log.warning("slot %d: %s: skipping deleted offsets %d..%d (on_truncation: skip_to_log_start)",
                        t.slot, where, found.offset, p.start - 1)
            found = found.__class__(**{**found.__dict__, "offset": p.start})
        if found is not None and p.had_progress and found.offset < p.start:
            raise ProgressUnavailableError(f"slot {t.slot}: the progress of {where} moved backwards from "
                                           f"{p.start} to {found.offset} after planning; run again to re-plan")
        before = previous.get((p.source_topic, p.partition))
        state = PartitionCopy(p, found.offset if found else None, found.accounting if found else None)
        if before is not None:  # keep the totals of transactions this attempt already committed
            state.records_total, state.bytes_total = before.records_total, before.bytes_total
            state.newest_ts, state.copy_start = before.newest_ts, before.copy_start
        states[(p.source_topic, p.partition)] = state
    return states


def partition_chunks(keys: list[tuple[str, int]], most: int | None) -> list[list[tuple[str, int]]]:
    """The slot's partitions (``keys``, in order) cut into consecutive chunks of at most ``most`` each, as
    even as possible (5 of at most 2: 2, 2, 1; 1,250 of at most 500: 417, 417, 416). Every partition is in
    exactly one chunk; no chunk is empty. ``most`` None or 0, or not fewer than the partitions: one chunk."""
    if not keys:
        return []
    if not most or most >= len(keys):
        return [list(keys)]
    count = -(-len(keys) // most)
    size, larger = divmod(len(keys), count)
    chunks, at = [], 0
    for index in range(count):
        width = size + (1 if index < larger else 0)
        chunks.append(list(keys[at:at + width]))
        at += width
    return chunks


def steps_text(names: tuple[str, ...], marks: list[float]) -> str:
    """"fence 0.50, generation 0.11, ...": the time between consecutive marks, named."""
    return ", ".join(f"{name} {b - a:.2f}" for name, a, b in zip(names, marks, marks[1:]))
