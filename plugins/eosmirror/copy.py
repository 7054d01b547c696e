"""One slot's copy: design steps 5a-5f and 6. Runs inside a Spark task (or directly in tests).

exactly_once, per slot attempt:
  1. init_transactions() with the slot's stable transactional id. This fences every older
     instance of the slot (a retried or speculative Spark attempt, an overlapping run, a stalled
     process) and aborts or completes its open transaction.
  2. Read the mirror's generation; stop if a newer run re-planned the slots (generation.py).
  3. Re-read the committed progress of the slot's partitions AFTER fencing: that, not the
     driver's plan, is where copying starts. A partition already at or past its planned end has
     nothing to do.
  4. Per transaction:
     a. begin; consume [progress, end) read_committed and produce every record to the same
        partition number of its target topic, with key, value (null too), headers, timestamp;
     b. stop at the end of every range, at ``max_transaction_seconds``, or at the slot's byte budget;
     c. produce an offset-sync record for every partition whose progress moves;
     d. flush; check that each target partition's end is exactly (first record's offset + records):
        otherwise another writer interleaved and the sync would be wrong -> abort, fail loudly;
     e. send_offsets_to_transaction with the new progress of EVERY partition of the slot (idle
        ones too, so that member-less group offsets never expire);
     f. commit_transaction.
     Errors: retriable -> retry the same call; abortable -> abort, rewind to the committed
     progress (step 3 again), bounded attempts; fatal or fenced -> stop this slot and report it.
  5. Best effort: publish the progress to the same group on the SOURCE cluster.

at_least_once: the same loop with an idempotent producer; progress is committed with a plain
offset commit after every record of the batch was acknowledged (duplicates possible on a crash
between the two, never loss).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from eosmirror import clients, kafkaio, progress, state
from eosmirror.errors import (ClusterUnreachableError, DataLossError, EosMirrorError, FencedError,
                              OversizeRecordError, ProgressUnavailableError, TargetMismatchError)
from eosmirror.faults import Faults, InjectedAbort
from eosmirror.offsetsync import split
from eosmirror.slotstate import PartitionCopy, SlotResult, SlotTask

log = logging.getLogger(__name__)

PARTITION_EOF = -191
CONSUME_BATCH = 5000
MAX_ABORT_ATTEMPTS = 5


def stall_seconds() -> float:
    return float(os.environ.get("EOSMIRROR_STALL_SECONDS", "60"))


class _Abortable(Exception):
    """The current transaction must be aborted and the slot rewound to its committed progress."""


_PERMANENT = {
    "MSG_SIZE_TOO_LARGE": OversizeRecordError, "Message size too large": OversizeRecordError,
    "RECORD_LIST_TOO_LARGE": OversizeRecordError,
    "TOPIC_AUTHORIZATION_FAILED": None, "Topic authorization failed": None,
    "GROUP_AUTHORIZATION_FAILED": None, "Group authorization failed": None,
}


def _permanent_cause(text: str) -> EosMirrorError | None:
    """An abortable error that a retry cannot cure (a record too large, a missing ACL)."""
    from eosmirror.errors import AuthorizationError

    for marker, kind in _PERMANENT.items():
        if marker in text:
            if kind is OversizeRecordError:
                return OversizeRecordError(f"the target refused a record as too large ({text}); raise "
                                           f"max.message.bytes on the target topic. Nothing was committed")
            return AuthorizationError(f"the target refused the transaction ({text}); the mirror's principal "
                                      f"needs Write on the target topics and Read on the progress group")
    return None


_FENCED_NAMES = {"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"}


def _is_fenced(exc: BaseException) -> bool:
    """A newer instance took over the transactional id (librdkafka may report it later as _FATAL)."""
    return kafkaio.error_name(exc) in _FENCED_NAMES or (
        kafkaio.error_name(exc) == "_FATAL" and "fenced" in kafkaio.error_text(exc).lower())


def executor_info() -> dict[str, str]:
    import socket
    import sys

    import eosmirror

    return {"host": socket.gethostname(), "python": sys.executable, "eosmirror": str(eosmirror.__file__)}


def _now_ms() -> int:
    return int(time.time() * 1000)


class SlotCopier:
    def __init__(self, task: SlotTask, faults: Faults | None = None):
        self.task = task
        self.faults = faults or Faults.from_env()
        self.exactly_once = task.delivery == "exactly_once"
        self.result = SlotResult(slot=task.slot, transactional_id=task.transactional_id, attempt_pid=os.getpid(),
                                 executor=executor_info())
        self.states: dict[tuple[str, int], PartitionCopy] = {}
        self.delivery_errors: list[str] = []
        self.bytes_copied = 0
        self._last_log = self._last_activity = time.monotonic()
        self.producer = self.consumer = self.reader = self.admin = None

    # --- clients -----------------------------------------------------------------------------------

    def _open(self) -> None:
        t = self.task
        name = f"eosmirror-{t.mirror}-{t.slot}"
        self.reader = clients.progress_reader(t.target_conf, t.progress_group, f"{name}-progress")
        self.admin = clients.admin_client(t.target_conf, f"{t.mirror}-{t.slot}-target")
        self.consumer = clients.source_consumer(t.source_conf, t.source_overrides, t.progress_group,
                                                f"{name}-consumer", where=f"mirror {t.mirror!r}: source_consumer")
        limits = max(p.max_message_bytes for p in t.partitions) if t.partitions else 1048588
        sizing = {"message.max.bytes": max(1048588, limits + 1024),
                  "batch.size": min(1_000_000, min(p.max_message_bytes for p in t.partitions) - 1024)
                  if t.partitions else 1_000_000,
                  "queue.buffering.max.messages": 500_000,
                  "linger.ms": 20}
        if self.exactly_once:
            self.producer = clients.transactional_producer(
                t.target_conf, t.target_overrides, t.transactional_id, t.transaction_timeout_ms,
                f"{name}-producer", where=f"mirror {t.mirror!r}: target_producer", extra=sizing)
        else:
            sizing["on_delivery"] = self._delivery_failed
            self.producer = clients.idempotent_producer(t.target_conf, t.target_overrides, f"{name}-producer",
                                                        where=f"mirror {t.mirror!r}: target_producer", extra=sizing)

    def _delivery_failed(self, err: Any, msg: Any) -> None:
        if err is not None and len(self.delivery_errors) < 20:
            self.delivery_errors.append(f"{msg.topic()}[{msg.partition()}]: {err.name()}: {err.str()}")

    def close(self) -> None:
        for client in (self.consumer, self.reader):
            if client is not None:
                try:
                    client.close()
                except Exception:  # noqa: BLE001
                    pass
        if self.producer is not None:
            try:
                self.producer.flush(1)
            except Exception:  # noqa: BLE001
                pass
        # Drop the clients now: a traceback that keeps this copier alive must not keep a producer
        # reconnecting (and logging) to a cluster long after the slot ended.
        self.producer = self.admin = self.consumer = self.reader = None

    # --- protocol ----------------------------------------------------------------------------------

    def run(self) -> SlotResult:
        started = time.monotonic()
        t = self.task
        try:
            self._open()
            if self.exactly_once:
                # 1. Fence every older instance of this slot.
                self._txn_call(self.producer.init_transactions, "initialise transactions")
                self.faults.hit("after_init", t.slot)
                # 2. Stop if the slots were re-planned by a newer run.
                state.check_generation(t.target_conf, t.mirror, t.generation, t.target_label, t.progress_group)
            # 3. The authoritative start: committed progress, read after fencing.
            self._load_progress()
            self._assign()
            attempts = 0
            while True:
                try:
                    if self.exactly_once:
                        self._transaction()
                    else:
                        self._at_least_once_batch()
                except (_Abortable, InjectedAbort) as why:
                    permanent = _permanent_cause(str(why))
                    if permanent:
                        self._abort_quietly()
                        raise permanent from None
                    attempts += 1
                    self.result.aborts += 1
                    log.warning("slot %d: transaction aborted (%s); rewinding to committed progress "
                                "(attempt %d of %d)", t.slot, why, attempts, MAX_ABORT_ATTEMPTS)
                    if self.exactly_once:
                        self._txn_call(self.producer.abort_transaction, "abort the transaction")
                    if attempts >= MAX_ABORT_ATTEMPTS:
                        raise EosMirrorError(f"slot {t.slot}: {attempts} transactions in a row had to be aborted; "
                                             f"last reason: {why}") from None
                    self._load_progress()
                    self._assign()
                    self.bytes_copied = sum(st.bytes_total for st in self.states.values())
                    continue
                attempts = 0
                if self._finished():
                    break
            self.result.status = "committed"
            self._publish_to_source()
        except FencedError as exc:
            self.result.status, self.result.error, self.result.error_type = "fenced", str(exc), "FencedError"
        except EosMirrorError as exc:
            self._abort_quietly()
            self.result.status, self.result.error, self.result.error_type = "failed", str(exc), type(exc).__name__
        except Exception as exc:  # noqa: BLE001 - report, never crash the Spark task with a secret in it
            if _is_fenced(exc):   # fenced while producing (not inside a transactional call)
                self.result.status, self.result.error_type = "fenced", "FencedError"
                self.result.error = (f"slot {t.slot}: a newer instance of transactional id {t.transactional_id} took "
                                     f"over ({kafkaio.error_text(exc)}); this attempt stops")
            else:
                self._abort_quietly()
                error = kafkaio.translate(exc, "copy", f"slot {t.slot}")
                self.result.status, self.result.error = "failed", str(error)
                self.result.error_type = type(error).__name__
        finally:
            now = _now_ms()
            self.result.partitions = [s.report(now) for s in self.states.values()]
            self.result.records = sum(p["records"] for p in self.result.partitions)
            self.result.bytes = sum(p["bytes"] for p in self.result.partitions)
            self.result.seconds = round(time.monotonic() - started, 3)
            self.close()
        if self.result.status == "committed" and self.result.records == 0:
            self.result.status = "nothing-to-do"
        return self.result

    def _finished(self) -> bool:
        if all(s.committed >= s.end for s in self.states.values()):
            return True
        return self.task.max_bytes is not None and self.bytes_copied >= self.task.max_bytes

    def _abort_quietly(self) -> None:
        if self.exactly_once and self.producer is not None:
            try:
                self.producer.abort_transaction(10)
            except Exception:  # noqa: BLE001 - no transaction open, or fenced: nothing to undo
                pass

    def _txn_call(self, fn: Any, what: str, *args: Any) -> Any:
        """Retry retriable errors; abortable -> _Abortable; fatal (fenced included) -> raise."""
        deadline = time.monotonic() + max(60.0, self.task.transaction_timeout_ms / 1000)
        while True:
            try:
                return fn(*args)
            except Exception as exc:  # noqa: BLE001
                err = exc.args[0] if exc.args and hasattr(exc.args[0], "fatal") else None
                if err is None:
                    raise
                if err.fatal():
                    if _is_fenced(exc):
                        raise FencedError(f"slot {self.task.slot}: a newer instance of transactional id "
                                          f"{self.task.transactional_id} took over ({what} failed: "
                                          f"{err.str()}); this attempt stops") from None
                    raise kafkaio.translate(exc, what, f"{self.task.target_label} (slot {self.task.slot})",
                                            f"Write and Describe on transactional id {self.task.transactional_id}"
                                            ) from None
                if err.txn_requires_abort():
                    raise _Abortable(f"{what}: {err.name()}: {err.str()}") from None
                if err.retriable() and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                raise kafkaio.translate(exc, what, f"{self.task.target_label} (slot {self.task.slot})") from None

    def _load_progress(self) -> None:
        t = self.task
        committed = progress.read(t.target_conf, [(p.target_topic, p.partition) for p in t.partitions],
                                  t.target_label, t.progress_group, stable=True)
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
            previous = self.states.get((p.source_topic, p.partition))
            state_ = PartitionCopy(p, found.offset if found else None)
            if previous is not None:  # keep the totals of transactions this attempt already committed
                state_.records_total, state_.bytes_total = previous.records_total, previous.bytes_total
                state_.newest_ts, state_.copy_start = previous.newest_ts, previous.copy_start
            states[(p.source_topic, p.partition)] = state_
        self.states = states

    def _assign(self) -> None:
        from confluent_kafka import TopicPartition

        work = [TopicPartition(s.task.source_topic, s.task.partition, s.committed)
                for s in self.states.values() if not s.done]
        # assign() keeps the fetch position of partitions that stay assigned: unassign first so
        # that a rewind after an abort really restarts at the committed progress.
        # librdkafka keeps a partition's pause flag across unassign()/assign(): partitions paused
        # when their range completed must be resumed, or a rewound partition would never fetch.
        self.consumer.unassign()
        self.consumer.assign(work)
        if work:
            self.consumer.resume(work)
        self._last_activity = time.monotonic()

    # --- the copy loop -----------------------------------------------------------------------------

    def _copy(self, deadline: float) -> None:
        """Step 4a/4b: copy records until every range is complete, the deadline, or the byte budget."""
        from confluent_kafka import TopicPartition

        states, consumer, produce, poll = self.states, self.consumer, self.producer.produce, self.producer.poll
        max_bytes = self.task.max_bytes
        undone = [s for s in states.values() if not s.done]
        first_batch = True
        copied = 0
        while undone and time.monotonic() < deadline:
            if max_bytes is not None and self.bytes_copied >= max_bytes:
                break
            messages = consumer.consume(CONSUME_BATCH, 0.2)
            if messages:
                self._last_activity = time.monotonic()
            for m in messages:
                err = m.error()
                if err is not None:
                    if err.code() == PARTITION_EOF:
                        s = states[(m.topic(), m.partition())]
                        s.eof = max(s.eof, m.offset())
                        continue
                    self._consumer_error(m, err)
                    continue
                s = states[(m.topic(), m.partition())]
                offset = m.offset()
                if offset >= s.end:
                    s.eof = max(s.eof, s.end)   # a record past the range: the range is complete
                    continue
                value, key, headers = m.value(), m.key(), m.headers()
                size = (len(value) if value is not None else 0) + (len(key) if key is not None else 0)
                if headers:
                    for name, header in headers:
                        size += len(name) + (len(header) if header is not None else 0)
                if size > s.limit:
                    raise OversizeRecordError(
                        f"source {s.task.source_topic}[{s.task.partition}] offset {offset}: record of {size} bytes "
                        f"is larger than target topic {s.task.target_topic} accepts (max.message.bytes="
                        f"{s.task.max_message_bytes}). Raise max.message.bytes on the target topic; nothing "
                        f"of this transaction was committed")
                ts = m.timestamp()[1]
                while True:
                    try:
                        if s.count:
                            produce(s.target_topic, value, key, s.partition, timestamp=ts, headers=headers)
                        else:
                            produce(s.target_topic, value, key, s.partition, timestamp=ts, headers=headers,
                                    on_delivery=s.delivered_first)
                        break
                    except BufferError:
                        poll(0.05)   # the local queue is full: let librdkafka send, then retry
                    except Exception as exc:  # noqa: BLE001
                        if kafkaio.error_name(exc) == "MSG_SIZE_TOO_LARGE":
                            raise OversizeRecordError(
                                f"source {s.task.source_topic}[{s.task.partition}] offset {offset}: record of "
                                f"{size} bytes is too large for the target producer ({kafkaio.error_text(exc)})"
                            ) from None
                        raise
                s.runs.add(offset)
                s.count += 1
                s.bytes += size
                s.next = offset + 1
                if ts > s.newest_ts:
                    s.newest_ts = ts
                copied += size
            self.bytes_copied += copied
            copied = 0
            if first_batch and messages:
                first_batch = False
                self.faults.hit("in_transaction", self.task.slot)
            poll(0)
            # Ranges that end on markers or aborted records only show it in position()/EOF.
            pending = [s for s in undone if not s.is_complete()]
            if pending:
                positions = consumer.position([TopicPartition(s.task.source_topic, s.task.partition) for s in pending])
                for s, tp in zip(pending, positions):
                    if tp.offset >= 0:
                        s.position = tp.offset
            finished = [s for s in undone if s.is_complete()]
            if finished:
                for s in finished:
                    s.done = True
                consumer.pause([TopicPartition(s.task.source_topic, s.task.partition) for s in finished])
                undone = [s for s in undone if not s.done]
                self._last_activity = time.monotonic()
            if undone and time.monotonic() - self._last_activity > stall_seconds():
                raise ClusterUnreachableError(
                    f"{self.task.source_label}: no records for {stall_seconds():.0f} s while "
                    f"{len(undone)} partition(s) of slot {self.task.slot} are unfinished (e.g. "
                    f"{undone[0].task.source_topic}[{undone[0].task.partition}] at {undone[0].reached} of "
                    f"{undone[0].end}); the source cluster is unreachable or too slow")
            self._log_progress()

    def _consumer_error(self, m: Any, err: Any) -> None:
        name = err.name()
        where = (f"{self.task.source_label}: {m.topic()}[{m.partition()}]" if m.topic()
                 else self.task.source_label)
        if name == "GROUP_AUTHORIZATION_FAILED":
            # Reading with assign() needs no group; only publishing progress to the source group
            # (best effort, for lag tools) does. Say so once; publish_to_source reports the failure.
            if not getattr(self, "_warned_group", False):
                self._warned_group = True
                log.warning("slot %d: %s: no Read on group %s on the source; the mirror's progress will not be "
                            "visible to lag tools there", self.task.slot, where, self.task.progress_group)
            return
        if name in ("_AUTO_OFFSET_RESET", "OFFSET_OUT_OF_RANGE"):
            raise DataLossError(f"{where}: the offsets the mirror must copy next were deleted on the source while "
                                f"this run was copying ({err.str()}); nothing of this transaction was committed. "
                                f"Raise the source retention; see on_truncation in the README")
        if name in ("TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED"):
            raise kafkaio.translate(Exception(err), "read the source topic", where, f"Read on topic {m.topic()}")
        if name in kafkaio.MISSING_TOPIC:
            raise DataLossError(f"{where}: the source topic or partition was deleted while the mirror copied it")
        if err.fatal():
            raise kafkaio.translate(Exception(err), "read the source", where)
        log.warning("slot %d: source consumer: %s: %s (retrying)", self.task.slot, name, err.str())

    def _log_progress(self) -> None:
        now = time.monotonic()
        if now - self._last_log < 10:
            return
        self._last_log = now
        copied = sum(s.records_total + s.count for s in self.states.values())
        done = sum(1 for s in self.states.values() if s.done)
        log.info("mirror %s slot %d: %d records copied so far, %d of %d partitions complete",
                 self.task.mirror, self.task.slot, copied, done, len(self.states))

    # --- one transaction (exactly_once) ----------------------------------------------------------

    def _transaction(self) -> None:
        t, producer = self.task, self.producer
        for s in self.states.values():
            s.begin_transaction()
        self._txn_call(producer.begin_transaction, "begin a transaction")
        started = time.monotonic()
        self._copy(started + t.max_transaction_seconds)                           # 4a, 4b
        self._produce_syncs()                                                     # 4c
        self._flush_and_check()                                                   # 4d
        offsets = self._progress_offsets()
        self._txn_call(producer.send_offsets_to_transaction, "send the progress offsets",   # 4e
                       offsets, self.reader.consumer_group_metadata())
        self.faults.hit("before_commit", t.slot)
        self._txn_call(producer.commit_transaction, "commit the transaction")     # 4f
        elapsed = time.monotonic() - started
        for s in self.states.values():
            s.commit()
        self.result.transactions += 1
        self.result.transaction_seconds = round(self.result.transaction_seconds + elapsed, 3)
        self.result.max_transaction_seconds = round(max(self.result.max_transaction_seconds, elapsed), 3)
        self.faults.hit("after_commit", t.slot)

    def _progress_offsets(self) -> list[Any]:
        from confluent_kafka import TopicPartition

        return [TopicPartition(s.task.target_topic, s.task.partition, s.reached,
                               metadata=progress.encode_metadata(s.task.source_topic, s.task.source_topic_id,
                                                                 self.task.generation))
                for s in self.states.values()]

    def _produce_syncs(self) -> None:
        """Step 4c (bases of empty syncs are filled in after the flush)."""
        self._pending_syncs = [s for s in self.states.values() if s.moved()]

    def _flush_and_check(self) -> None:
        """Step 4d: every record acknowledged; target offsets exactly as the syncs will say."""
        from confluent_kafka.admin import OffsetSpec

        remaining = self.producer.flush(max(30.0, self.task.transaction_timeout_ms / 1000 / 2))
        if remaining:
            raise _Abortable(f"{remaining} records were not acknowledged in time")
        written = [s for s in self.states.values() if s.count]
        for s in written:
            if s.first_error:
                raise _Abortable(f"{s.task.target_topic}[{s.task.partition}]: delivery failed: {s.first_error}")
            if s.base is None:
                raise _Abortable(f"{s.task.target_topic}[{s.task.partition}]: no delivery report for the first record")
        from eosmirror.observe import list_offsets

        needed = {(s.task.target_topic, s.task.partition): OffsetSpec.latest() for s in self._pending_syncs + written}
        ends = list_offsets(self.admin, needed, self.task.target_label, read_committed=False)
        for s in written:
            end = ends[(s.task.target_topic, s.task.partition)]
            if end != s.base + s.count:
                self._raise_foreign_writer(s, end)
        now = _now_ms()
        for s in self._pending_syncs:
            base = s.base if s.count else ends[(s.task.target_topic, s.task.partition)]
            for sync in split(s.sync(base, self.task.generation, self.task.slot, now)):
                self._produce_sync(sync)
        if self._pending_syncs:
            remaining = self.producer.flush(30)
            if remaining:
                raise _Abortable(f"{remaining} offset-sync records were not acknowledged in time")

    def _produce_sync(self, sync: Any) -> None:
        while True:
            try:
                self.producer.produce(self.task.offset_sync_topic, sync.encode(), sync.key(), 0)
                return
            except BufferError:
                self.producer.poll(0.05)

    def _raise_foreign_writer(self, s: PartitionCopy, end: int) -> None:
        # A newer instance of this slot aborting our transaction also moves the end; if so the
        # abort below fails with _FENCED and the slot reports "fenced" instead.
        if self.exactly_once:
            self._txn_call(self.producer.abort_transaction, "abort the transaction")
        raise TargetMismatchError(
            f"{self.task.target_label}: target {s.task.target_topic}[{s.task.partition}] ends at {end} but this "
            f"transaction's {s.count} records start at {s.base}: another producer writes to the target topic. "
            f"eosmirror must be the only writer of its target topics; the transaction was aborted")

    # --- at_least_once ---------------------------------------------------------------------------

    def _at_least_once_batch(self) -> None:
        from confluent_kafka.admin import OffsetSpec

        from eosmirror.observe import list_offsets

        for s in self.states.values():
            s.begin_transaction()
        started = time.monotonic()
        self._copy(started + self.task.max_transaction_seconds)
        if self.producer.flush(120):
            raise EosMirrorError(f"slot {self.task.slot}: records were not acknowledged within 120 s")
        if self.delivery_errors:
            raise EosMirrorError(f"slot {self.task.slot}: delivery failed: {'; '.join(self.delivery_errors[:3])}")
        moved = [s for s in self.states.values() if s.moved()]
        ends = list_offsets(self.admin, {(s.task.target_topic, s.task.partition): OffsetSpec.latest() for s in moved},
                            self.task.target_label, read_committed=False)
        now = _now_ms()
        for s in moved:
            end = ends[(s.task.target_topic, s.task.partition)]
            for sync in split(s.sync(end - s.count, self.task.generation, self.task.slot, now)):
                self._produce_sync(sync)
        if self.producer.flush(60) or self.delivery_errors:
            raise EosMirrorError(f"slot {self.task.slot}: offset syncs were not acknowledged")
        self.faults.hit("before_commit", self.task.slot)
        kafkaio.call(self.reader.commit, "commit the progress", self.task.target_label,
                     f"Read on group {self.task.progress_group}", offsets=self._progress_offsets(),
                     asynchronous=False)
        elapsed = time.monotonic() - started
        for s in self.states.values():
            s.commit()
        self.result.transactions += 1
        self.result.transaction_seconds = round(self.result.transaction_seconds + elapsed, 3)
        self.result.max_transaction_seconds = round(max(self.result.max_transaction_seconds, elapsed), 3)

    # --- step 5 --------------------------------------------------------------------------------

    def _publish_to_source(self) -> None:
        offsets = {(s.task.source_topic, s.task.partition): s.committed for s in self.states.values()}
        error = progress.publish_to_source(self.task.source_conf, offsets, self.task.progress_group)
        if error:
            self.result.source_commit_error = error
            log.warning("slot %d: publishing progress to the source group %s failed (not fatal): %s",
                        self.task.slot, self.task.progress_group, error)


def run_slot(task: SlotTask) -> dict[str, Any]:
    """Spark task entry: copy one slot and return its result as a plain dict."""
    from dataclasses import asdict

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not task.partitions:
        return asdict(SlotResult(slot=task.slot, transactional_id=task.transactional_id, status="nothing-to-do",
                                 attempt_pid=os.getpid()))
    return asdict(SlotCopier(task).run())
