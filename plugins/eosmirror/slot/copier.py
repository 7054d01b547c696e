"""One slot's copy: the commit protocol, run inside a Spark task (or directly in tests).

The steps are docs/architecture.md's "How a run works" (1 fence, 2 generation, 3 start, 4.1-4.7 one
transaction, 5 publish), and the methods below carry their numbers. What holds (exactly_once):
  * copying starts at the progress re-read after fencing (step 3), never at the driver's plan;
  * records, offset syncs and progress commit in one transaction, so progress never runs ahead of the records;
  * a written target partition ends exactly at its first record's offset + the records written (step 4.4),
    else the transaction aborts and the slot fails: another writer would make the offset sync wrong.
A follow run repeats step 4 on open ends until the next run fences it or its bound passes (follow.py);
at_least_once is atleastonce.py. All I/O goes through a ``SlotIO`` (slotio.py): real clients, or fakes in tests.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from eosmirror.core.bandwidth import Throttle
from eosmirror.core.errors import EosMirrorError, FencedError
from eosmirror.core.logformat import LOG_FORMAT
from eosmirror.core.runreport import FollowEnd, SlotResult, SlotStatus
from eosmirror.kafka import calls
from eosmirror.slot import follow, lifeline, targetcheck
from eosmirror.slot.atleastonce import AtLeastOnce
from eosmirror.slot.classify import Abortable, is_fenced, permanent_cause, transactional_call
from eosmirror.slot.faults import Faults, InjectedAbort
from eosmirror.slot.recordloop import RecordLoop, stall_seconds
from eosmirror.slot.slotio import KafkaSlotIO, SlotIO
from eosmirror.slot.slotstate import (
    PartitionCopy,
    SlotTask,
    partition_chunks,
    slot_result,
    start_states,
    steps_text,
)
from eosmirror.slot.syncwrites import now_ms, produce_syncs, progress_offsets

log = logging.getLogger(__name__)

MAX_ABORT_ATTEMPTS = 5


def _no_delivery_report(err: Any, msg: Any) -> None:
    """exactly_once needs only each partition's first delivery report (PartitionCopy.delivered_first)."""


class SlotCopier:
    def __init__(self, task: SlotTask, faults: Faults | None = None, io: SlotIO | None = None):
        self.task = task
        self.faults = faults or Faults.from_env()
        self.io: SlotIO = io if io is not None else KafkaSlotIO(task)
        self.exactly_once = task.delivery == "exactly_once"
        self.result = slot_result(task)
        self.states: dict[tuple[str, int], PartitionCopy] = {}
        self.at_least_once = None if self.exactly_once else AtLeastOnce(task, self.io, self.faults)
        self.bytes_copied = 0
        # The I/O's confluent-kafka clients (or a test's fakes), bound after open(); None once closed.
        self.producer: Any = None
        self.consumer: Any = None
        self.reader: Any = None
        self.loop: RecordLoop | None = None   # step 4.2, on the clients opened
        self.following = False   # step F: the ranges' ends are open
        self.fenced_at = 0.0      # monotonic time step 1 ended (a follower's first commits are logged from it)
        self.last_marks: list[float] = []   # the last transaction's step times (follow.TRANSACTION_STEPS)
        self.chunks: list[list[tuple[str, int]]] = []   # step 4's chunks of the slot's partitions
        self.chunk: list[tuple[str, int]] | None = None   # the partitions the transactions cover; None: all
        self.follow_round = 0   # step F: which chunk's idle partitions a round's progress covers
        # The slot's share of the mirror's bandwidth cap, across every transaction of this attempt (step 4.2).
        self.throttle = Throttle(task.cap, time.monotonic) if task.cap is not None and task.cap.capped else None
        self.cut_logged_at = -1e9   # when a transaction cut short by the cap was last logged

    # --- clients -----------------------------------------------------------------------------------

    def _open(self) -> None:
        self.io.open(self.at_least_once.on_delivery if self.at_least_once else _no_delivery_report)
        self._bind()

    def _bind(self) -> None:
        self.producer, self.consumer, self.reader = self.io.producer, self.io.consumer, self.io.reader
        self.loop = RecordLoop(self.task, self.consumer, self.producer, self.faults, self.throttle)

    def _record_loop(self) -> RecordLoop:
        """Step 4.2's loop: set by ``_bind`` once the clients are open, dropped by ``close``."""
        assert self.loop is not None, "the slot's clients are not open"
        return self.loop

    def close(self) -> None:
        self.io.close()
        lifeline.release(self)   # a served run may end now: its revoked lease must not cut this worker
        # Drop the clients now: a traceback holding this copier must not keep a producer reconnecting.
        self.producer = self.consumer = self.reader = self.loop = None

    # --- protocol ----------------------------------------------------------------------------------

    def run(self) -> SlotResult:
        started = time.monotonic()
        try:
            lifeline.watch(self)   # in a Spark worker: abort and exit once the run's JVM (or lease) is gone
            self._open()
            self._start()
            follows = self.task.follow_until is not None and self.exactly_once
            if not (follows and self._finished()):   # a hand-over's follower: its ranges are done, follow at once
                self._copy_until_finished()                                       # 4 (loop)
            if follows and not self._budget_spent():
                self._follow()                                                    # F
            self.result.status = SlotStatus.FOLLOW_BOUND if self.result.follow_end else SlotStatus.COMMITTED
            publishing = time.monotonic()
            self._publish_to_source()                                             # 5
            self.result.add_steps(("publish to source",), [publishing, time.monotonic()])
        except FencedError as exc:
            self.result.status, self.result.error, self.result.error_type = SlotStatus.FENCED, str(exc), "FencedError"
            self._handed_over()
        except EosMirrorError as exc:
            self._abort_quietly()
            self.result.status, self.result.error, self.result.error_type = SlotStatus.FAILED, str(exc), type(exc).__name__
        except Exception as exc:  # noqa: BLE001 - report, never crash the Spark task with a secret in it
            self._report_unexpected(exc)
        finally:
            self._report(started)
            self.close()
        if self.result.status is SlotStatus.COMMITTED and self.result.records == 0:
            self.result.status = SlotStatus.NOTHING_TO_DO
        return self.result

    def _start(self) -> None:
        """Steps 1-3: fence, check the generation, start at the committed progress."""
        marks = [time.monotonic()]
        if self.exactly_once:
            # 1. Fence every older instance of this slot (the I/O may replace the producer: slotio.py).
            self.producer = self.loop = None
            self._txn_call(self.io.fence, "initialise transactions")
            self._bind()
            self.faults.hit("after_init", self.task.slot)
            marks.append(time.monotonic())
            self.fenced_at = marks[-1]
            # 2. Stop if the slots were re-planned by a newer run.
            self.io.check_generation()
            marks.append(time.monotonic())
        # 3. The authoritative start: committed progress, read after fencing.
        self._load_progress()
        if self.exactly_once:
            # 3b. Never write on top of a transaction the broker left open; 3c. nor after records the mirror
            # did not write (targetcheck.py).
            self._check_targets()
        keys = [(p.source_topic, p.partition) for p in self.task.partitions]
        self.chunks = partition_chunks(keys, self.task.max_partitions_per_transaction if self.exactly_once else None)
        self.chunk = self.chunks[0] if len(self.chunks) > 1 else None
        self._record_loop().assign(self._active())
        marks.append(time.monotonic())
        steps = ("fence", "generation", "progress, target check") if self.exactly_once else ("progress",)
        self.result.add_steps(steps, marks)
        log.info("slot %d: started in %.2f s (%s)", self.task.slot, marks[-1] - marks[0], steps_text(steps, marks))

    def _follow(self) -> None:
        """Step F: a transaction per max_transaction_seconds, copying what arrives, until handed over
        (FencedError, see ``_handed_over``) or bounded (follow.py)."""
        t = self.task
        assert t.follow_until is not None and self.loop is not None
        started = time.monotonic()
        keys = [(p.source_topic, p.partition) for p in t.partitions]
        self.following = True
        self.chunk = None   # a follow round copies the whole slot (its progress: _progress_covered)
        follow.open_ends(self.states.values())
        self.loop.assign(self.states)   # partitions paused at their bounded end read on from their progress
        assigned, logged = time.monotonic(), False   # the first round is logged: the hand-over's gap
        next_check, check_every = started, min(follow.SOURCE_CHECK_SECONDS, stall_seconds() / 4)
        try:
            while True:
                reason = follow.stop_reason(time.time(), t.follow_until, self.bytes_copied, t.max_bytes)
                if reason:
                    self.result.follow_end = reason
                    log.info("slot %d: follow run ends (%s)", t.slot, reason)
                    return
                if time.monotonic() >= next_check:
                    # The source answers (or this fails loudly); caught up is activity, not a stall.
                    if follow.caught_up(self.states.values(), self.io.source_stable_offsets(keys)):
                        self.loop.touch()
                    next_check = (checked := time.monotonic()) + check_every
                    if not logged:
                        follow.log_following(t, self.fenced_at, [started, assigned, checked])
                        logged = True
                # At least one transaction even with nothing new: it carries the progress, and the
                # broker's answer is how an idle follower learns that the next run took over.
                self._copy_until_finished(once=True)
                if self.result.transactions <= follow.FIRST_TRANSACTIONS_LOGGED:
                    follow.log_first(t, self.result.transactions, self.fenced_at, self.last_marks)
        finally:
            self.following = False
            follow.close_ends(self.states.values())
            self.result.follow_seconds = round(time.monotonic() - started, 3)

    def _handed_over(self) -> None:
        """Fenced in a follow run by the next run of the same generation: the normal end (follow.py)."""
        if follow.is_hand_over(self.task, self.io, self.exactly_once):
            self.result.status, self.result.follow_end = SlotStatus.HANDED_OVER, FollowEnd.HANDED_OVER
            self.result.error = self.result.error_type = None
            log.info("slot %d: handed over to the next run (its slot fenced %s)", self.task.slot,
                     self.task.transactional_id)

    def _budget_spent(self) -> bool:
        return self.task.max_bytes is not None and self.bytes_copied >= self.task.max_bytes

    def _copy_until_finished(self, once: bool = False) -> None:
        """Step 4, per chunk of the slot's partitions (``max_partitions_per_transaction``; every partition in
        exactly one chunk), one chunk after the other with only its partitions assigned: its transactions
        carry the records, offset syncs and progress (4.6: of every partition of the chunk, idle ones too)
        of its partitions alone, and each chunk commits at least one, so every partition's progress is
        committed each run. Unchunked, and in a follow round (step F): the whole slot (a chunked slot's follow
        round sends the progress of only part of it: ``_progress_covered``)."""
        if self.following or len(self.chunks) <= 1:
            self._copy_chunk(once)
            return
        for index, keys in enumerate(self.chunks):
            began = time.monotonic()
            if keys != self.chunk:
                self.chunk = keys
                self._record_loop().assign(self._active())
            assigned = time.monotonic()
            self._copy_chunk(once)
            # Where a chunked run's time goes: a later chunk's flush waits for the previous chunk's commit
            # markers (figures: docs/results.md, "Figures behind the code").
            log.info("slot %d: chunk %d of %d (%d partitions) committed in %.2f s (assign %.2f; last "
                     "transaction: %s)", self.task.slot, index + 1, len(self.chunks), len(keys),
                     time.monotonic() - began, assigned - began,
                     steps_text(follow.TRANSACTION_STEPS, self.last_marks))

    def _active(self) -> dict[tuple[str, int], PartitionCopy]:
        """The partitions the next transaction covers: the current chunk's (all when unchunked)."""
        if self.chunk is None:
            return self.states
        return {key: self.states[key] for key in self.chunk}

    def _copy_chunk(self, once: bool) -> None:
        """Step 4 on the current chunk, repeated (``once``: until one transaction committed); an abortable
        error rewinds to step 3, MAX_ABORT_ATTEMPTS times in a row."""
        attempts = 0
        while True:
            try:
                if self.exactly_once:
                    self._transaction()
                else:
                    assert self.at_least_once is not None   # built whenever the delivery is not exactly_once
                    self.bytes_copied, elapsed = self.at_least_once.batch(self.states, self._record_loop(),
                                                                          self.bytes_copied)
                    self._committed(elapsed)
                    self._cut_by_cap(self.states)
            except (Abortable, InjectedAbort) as why:
                attempts += 1
                self._abort_and_rewind(why, attempts)
                continue
            attempts = 0
            if once or self._finished(self._active()):
                return

    def _abort_and_rewind(self, why: Exception, attempts: int) -> None:
        t = self.task
        permanent = permanent_cause(str(why))
        if permanent:
            self._abort_quietly()
            raise permanent from None
        self.result.aborts += 1
        log.warning("slot %d: transaction aborted (%s); rewinding to committed progress "
                    "(attempt %d of %d)", t.slot, why, attempts, MAX_ABORT_ATTEMPTS)
        if self.exactly_once:
            self._txn_call(self.producer.abort_transaction, "abort the transaction")
        if attempts >= MAX_ABORT_ATTEMPTS:
            raise EosMirrorError(f"slot {t.slot}: {attempts} transactions in a row had to be aborted; "
                                 f"last reason: {why}") from None
        # 3 again: the committed progress is the only position known to be consistent.
        self._load_progress()
        if self.exactly_once:
            self._check_targets()   # 3b, 3c: what landed on the target since (the abort's marker at least)
        if self.following:
            follow.open_ends(self.states.values())
        self._record_loop().assign(self._active())
        self.bytes_copied = sum(st.bytes_total for st in self.states.values())

    def _report_unexpected(self, exc: Exception) -> None:
        t = self.task
        # Fenced while producing (not in a transactional call), or while a follower flushed.
        if is_fenced(exc) or follow.fenced_while_flushing(t, self.producer, self.exactly_once):
            self.result.status, self.result.error_type = SlotStatus.FENCED, "FencedError"
            self.result.error = (f"slot {t.slot}: a newer instance of transactional id {t.transactional_id} took "
                                 f"over ({calls.error_text(exc)}); this attempt stops")
            self._handed_over()
        else:
            self._abort_quietly()
            error = calls.translate(exc, "copy", f"slot {t.slot}")
            self.result.status, self.result.error = SlotStatus.FAILED, str(error)
            self.result.error_type = type(error).__name__

    def _report(self, started: float) -> None:
        now = now_ms()
        self.result.partitions = [s.report(now) for s in self.states.values()]
        self.result.records = sum(p.records for p in self.result.partitions)
        self.result.bytes = sum(p.bytes for p in self.result.partitions)
        self.result.seconds = round(time.monotonic() - started, 3)
        if self.throttle is not None:
            cap = self.throttle.cap
            self.result.cap_bytes_per_second, self.result.catch_up_bytes_per_second = (
                cap.bytes_per_second, cap.catch_up_bytes_per_second)
            self.result.throttled_seconds = round(self.throttle.waited, 3)
            self.result.catch_up_seconds = round(self.throttle.catch_up_total(), 3)

    def _finished(self, states: dict[tuple[str, int], PartitionCopy] | None = None) -> bool:
        """Every range (of ``states``, else of the slot) is complete, or the byte budget is spent."""
        return (all(s.committed >= s.end for s in (self.states if states is None else states).values())
                or self._budget_spent())

    def _abort_quietly(self) -> None:
        if self.exactly_once and self.producer is not None:
            try:
                self.producer.abort_transaction(10)
            except Exception:  # noqa: BLE001 - no transaction open, or fenced: nothing to undo
                pass

    def _txn_call(self, fn: Any, what: str, *args: Any) -> Any:
        return transactional_call(self.task, what, fn, *args)

    # --- step 3 ------------------------------------------------------------------------------------

    def _load_progress(self) -> None:
        t = self.task
        committed = self.io.read_progress([(p.target_topic, p.partition) for p in t.partitions], stable=True)
        self.states = start_states(t, committed, self.states)

    def _check_targets(self) -> None:
        """Steps 3b and 3c (exactly_once): the target partitions are closed and hold nothing the mirror did
        not write (targetcheck.py); every partition's accounting is then exact up to its end."""
        targetcheck.check_foreign(self.io, self.task.slot, self.task.target_label, self.states.values(),
                                  accept=self.task.accept_foreign)

    # --- step 4: one transaction (exactly_once) ----------------------------------------------------

    def _transaction(self) -> None:
        t, producer = self.task, self.producer
        states = self._active()
        # 4.1 Begin; every partition's transaction starts at its committed progress.
        for s in states.values():
            s.begin_transaction()
        self._txn_call(producer.begin_transaction, "begin a transaction")
        started = time.monotonic()
        marks = [started]
        # 4.2 Copy.
        self.bytes_copied = self._record_loop().copy(states, started + t.max_transaction_seconds, self.bytes_copied)
        moved = [s for s in states.values() if s.moved()]   # fixed once the copy stopped
        marks.append(time.monotonic())
        # 4.3 Flush: every record acknowledged, each written partition's target base known.
        written = self._flush_records(states)
        marks.append(time.monotonic())
        # 4.4 Check: the target offsets are exactly the ones the offset syncs will state.
        ends = self._check_target_ends(moved, written)
        marks.append(time.monotonic())
        # 4.5 Offset syncs, in the same transaction.
        self._produce_syncs(moved, ends)
        marks.append(time.monotonic())
        # 4.6 The new progress of every partition of the chunk (a chunked follow round: _progress_covered), in
        # the same transaction.
        self._txn_call(producer.send_offsets_to_transaction, "send the progress offsets",
                       progress_offsets(self._progress_covered(states, moved), t.generation, accounted=True),
                       self.reader.consumer_group_metadata())
        marks.append(time.monotonic())
        self.faults.hit("before_commit", t.slot)
        # 4.7 Commit: records, offset syncs and progress become visible together.
        self._txn_call(producer.commit_transaction, "commit the transaction")
        marks.append(time.monotonic())
        self._committed(marks[-1] - started, states)
        self._cut_by_cap(states)
        self.last_marks = marks
        self.result.add_steps(follow.TRANSACTION_STEPS, marks)
        self.faults.hit("after_commit", t.slot)
        if self.following:
            follow.warn_if_slow(t, marks)

    def _cut_by_cap(self, states: dict[tuple[str, int], PartitionCopy]) -> None:
        """After a commit: if the cap kept the transaction from finishing its ranges in max_transaction_seconds,
        the chunk goes on in smaller transactions; count it and say so (at most once a minute). Never in a
        follow round: its transactions end at the deadline by design."""
        if self.following or self.throttle is None or not self._record_loop().cut_by_cap:
            return
        self.result.cap_cut_transactions += 1
        now = time.monotonic()
        if now - self.cut_logged_at >= 60:
            self.cut_logged_at = now
            rate = self.throttle.rate or 0.0
            log.info("slot %d: the cap (%s bytes/s for this slot) holds a transaction to about %s bytes in "
                     "max_transaction_seconds=%g s: the chunk of %d partition(s) is committed in smaller "
                     "transactions (%d so far; transaction.timeout.ms %d is never reached)", self.task.slot,
                     f"{rate:,.0f}", f"{rate * self.task.max_transaction_seconds:,.0f}",
                     self.task.max_transaction_seconds, len(states), self.result.cap_cut_transactions,
                     self.task.transaction_timeout_ms)

    def _progress_covered(self, states: dict[tuple[str, int], PartitionCopy], moved: list[PartitionCopy]
                          ) -> list[PartitionCopy]:
        """Step 4.6's partitions: every partition of ``states``; in a chunked slot's follow round the ones
        that moved and the round's chunk in rotation (an unmoved partition's progress is unchanged, and the
        rotation commits each once per len(chunks) rounds, well inside offsets.retention.minutes). Never empty
        (no chunk is): an idle round still commits progress, which is how an idle follower learns it was fenced."""
        if not self.following or len(self.chunks) <= 1:
            return list(states.values())
        self.follow_round += 1
        chunk = set(self.chunks[self.follow_round % len(self.chunks)])
        return [s for key, s in states.items() if key in chunk or s.moved()]

    def _committed(self, elapsed: float, states: dict[tuple[str, int], PartitionCopy] | None = None) -> None:
        """A transaction (or an at_least_once batch) committed: each partition it covers (``states``, else
        the slot's) moves its progress to where its copy reached; the transaction is counted."""
        for s in (self.states if states is None else states).values():
            s.commit()
        self.result.count_transaction(elapsed)

    def _flush_records(self, states: dict[tuple[str, int], PartitionCopy]) -> list[PartitionCopy]:
        """Step 4.3: every record acknowledged; returns the partitions written, each with its base."""
        remaining = self.producer.flush(max(30.0, self.task.transaction_timeout_ms / 1000 / 2))
        if remaining:
            raise Abortable(f"{remaining} records were not acknowledged in time")
        written = [s for s in states.values() if s.count]
        for s in written:
            if s.first_error:
                raise Abortable(f"{s.task.target_topic}[{s.task.partition}]: delivery failed: {s.first_error}")
            if s.base is None:
                raise Abortable(f"{s.task.target_topic}[{s.task.partition}]: no delivery report for the first record")
        return written

    def _check_target_ends(self, moved: list[PartitionCopy], written: list[PartitionCopy]
                           ) -> dict[tuple[str, int], int]:
        """Step 4.4: each written target partition ends at base + records. Returns the ends of the
        moved and written partitions (an idle partition's sync starts at its end)."""
        keys = dict.fromkeys((s.task.target_topic, s.task.partition) for s in moved + written)
        ends = self.io.target_end_offsets(list(keys))
        for s in written:
            end = ends[(s.task.target_topic, s.task.partition)]
            assert s.base is not None   # step 4.3 refused a written partition without its first delivery report
            if end != s.base + s.count:
                # A newer instance of this slot aborting our transaction also moves the end; if so the
                # abort fails with _FENCED and the slot reports "fenced" instead.
                if self.exactly_once:
                    self._txn_call(self.producer.abort_transaction, "abort the transaction")
                raise s.foreign_writer_error(self.task.target_label, end)
        for s in dict.fromkeys(moved + written):
            self._check_accounted(s, ends[(s.task.target_topic, s.task.partition)])
        return ends

    def _check_accounted(self, s: PartitionCopy, end: int) -> None:
        """Step 4.4, the partition's start: a written partition's records begin where its accounting expects
        the partition to end, and an idle one still ends there. Otherwise something landed on it since the
        slot last judged it: abortable, and the rewind judges what it is (foreign records stop the slot,
        targetcheck.py; markers and aborted records only: the transaction is retried)."""
        expected = s.accounting.expected_end if s.accounting is not None else None
        found = s.base if s.count else end
        if expected is not None and found != expected:
            raise Abortable(f"{s.task.target_topic}[{s.task.partition}]: the target partition "
                            f"{'takes this transaction from' if s.count else 'ends at'} offset {found}, not at "
                            f"{expected} where the mirror's records and markers end: something else landed there")

    def _produce_syncs(self, moved: list[PartitionCopy], ends: dict[tuple[str, int], int]) -> None:
        """Step 4.5: an offset sync per partition whose progress moves, acknowledged before the commit."""
        produce_syncs(self.producer, self.task, [(s, _sync_base(s, ends)) for s in moved])
        if moved:
            remaining = self.producer.flush(30)
            if remaining:
                raise Abortable(f"{remaining} offset-sync records were not acknowledged in time")

    # --- step 5 ------------------------------------------------------------------------------------

    def _publish_to_source(self) -> None:
        """Step 5: best effort; a failure is reported in the result, never fails the slot."""
        offsets = {(s.task.source_topic, s.task.partition): s.committed for s in self.states.values()}
        error: str | None
        if self._record_loop().source_group_refused:
            # Already known: trying would only wait for a coordinator the source will never grant.
            error = (f"GROUP_AUTHORIZATION_FAILED: the source refused Read on group {self.task.progress_group} "
                     f"while this slot read; progress not published there")
        else:
            error = self.io.publish_to_source(offsets)
        if error:
            self.result.source_commit_error = error
            log.warning("slot %d: publishing progress to the source group %s failed (not fatal): %s",
                        self.task.slot, self.task.progress_group, error)


def _sync_base(s: PartitionCopy, ends: dict[tuple[str, int], int]) -> int:
    """Where a moved partition's offset sync starts on the target: its transaction's first record, or the
    partition's end when it wrote nothing (idle: only its progress moved)."""
    if not s.count:
        return ends[(s.task.target_topic, s.task.partition)]
    assert s.base is not None   # step 4.3 refused a written partition without its first delivery report
    return s.base


def run_slot(task: SlotTask) -> SlotResult:
    """Copy one slot and return its result (pickled back to the driver): the Spark task entry
    (``spark/runner.py`` maps it) and what ``run_in_process`` runs in threads of the driver.

    Then ``lifeline.check()``: a slot that ended while its lifeline was being cut must not hand
    control back to pyspark's worker loop, which would exit the process (writing to the dead JVM
    fails) before the abort completed. Outside a Spark worker the lifeline is never cut and the
    check returns at once."""
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    if not task.partitions:
        result = slot_result(task, SlotStatus.NOTHING_TO_DO)
    else:
        result = SlotCopier(task).run()
    lifeline.check()
    return result
