"""The per-record loop of a slot: step 4.2 of docs/architecture.md "How a run works" (copy), consume -> produce.

``RecordLoop.copy`` polls the source consumer (assigned ``read_committed`` at the committed progress
by ``assign``) in batches of up to CONSUME_BATCH records and produces every record of a partition's
range ``[progress, end)`` to the same partition number of its target topic, with key, value (None
too), headers and timestamp. It stops when every range is complete, at the transaction's deadline
(``max_transaction_seconds``) or once the slot's byte budget is spent. A capped slot
(``max_bytes_per_second``, core/bandwidth.py) sizes each batch to what its token bucket holds and waits for
the bucket between batches, never past the deadline: a transaction the cap keeps from finishing its ranges
commits what it copied (``cut_by_cap``) and the next one goes on. A range is complete when a
record at or past its end arrives, or - for a range that ends on control markers or aborted records,
which read_committed never returns - when the consumer's position or a partition EOF reaches the
end; a complete partition is paused. What was copied is written into each partition's
``PartitionCopy`` (records, bytes, offset runs, how far the range is read, the newest timestamp);
``copy`` returns the slot's byte total.

Transactions, flushes and the checks before a commit are the copier's (copier.py); what an error
means is classify.py's. This module is the hot path: one pass over each record, nothing else.
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from eosmirror.core.bandwidth import Throttle
from eosmirror.core.errors import ClusterUnreachableError
from eosmirror.slot import lifeline
from eosmirror.slot.classify import oversize_record, producer_oversize, source_error
from eosmirror.slot.faults import Faults
from eosmirror.slot.slotstate import PartitionCopy, SlotTask

log = logging.getLogger(__name__)

PARTITION_EOF = -191
CONSUME_BATCH = 5000
# consume(n, timeout) returns when n messages are there OR the timeout passed: at the fetch frontier
# (a follow round, the tail of a range) every call with fewer than n waits the whole timeout, so the timeout
# is a floor under every follow transaction. Short enough not to add to a follower's time lag, long enough
# that a backlog's batches stay large and an idle wait costs few calls (figures:
# docs/results.md, "Figures behind the code").
CONSUME_TIMEOUT = 0.02
# Up to this many topics a slot asks their metadata one by one before its first assign; more: the
# whole cluster's in one request.
METADATA_ONE_BY_ONE = 10
METADATA_TIMEOUT = 10.0


def stall_seconds() -> float:
    return float(os.environ.get("EOSMIRROR_STALL_SECONDS", "60"))


class RecordLoop:
    """The source consumer's assignment and the consume -> produce loop of one slot attempt."""

    def __init__(self, task: SlotTask, consumer: Any, producer: Any, faults: Faults, throttle: Throttle | None = None):
        self.task, self.consumer, self.producer, self.faults = task, consumer, producer, faults
        self.throttle = throttle    # the slot's cap (kept by the copier across transactions); None: uncapped
        self.cut_by_cap = False     # the last copy ended at its deadline, ranges unfinished, held back by the cap
        self.source_group_refused = False   # the source refused Read on the progress group (seen while reading)
        # Topics whose metadata each client was asked for before their first use, per client ("source":
        # the consumer's source topics, "target": the producer's target topics); "*": the whole cluster's.
        self._learned: dict[str, set[str]] = {"source": set(), "target": set()}
        self._last_log = self._last_activity = time.monotonic()

    def assign(self, states: dict[tuple[str, int], PartitionCopy]) -> None:
        """Read every unfinished partition from its committed progress (step 3, again after a rewind,
        and at each follow round)."""
        from confluent_kafka import KafkaException, TopicPartition

        work = [TopicPartition(s.task.source_topic, s.task.partition, s.committed)
                for s in states.values() if not s.done]
        self._last_activity = time.monotonic()
        assigned = {(tp.topic, tp.partition) for tp in self.consumer.assignment()}
        if work and assigned and {(tp.topic, tp.partition) for tp in work} <= assigned:
            # Partitions already assigned (a follow round, a rewind): resume and seek each to its
            # progress. seek() drops what was fetched before it (librdkafka versions its fetches);
            # unassign() + assign() did the same but could make a round's first fetch wait up to 0.5 s.
            try:
                self.consumer.resume(work)
                for tp in work:
                    self.consumer.seek(tp)
                return
            except KafkaException as exc:   # e.g. a partition not fetching yet: assign anew
                log.debug("slot %d: seek failed (%s); re-assigning", self.task.slot, exc)
        # assign() keeps the fetch position of partitions that stay assigned: unassign first so
        # that a rewind after an abort really restarts at the committed progress.
        # librdkafka keeps a partition's pause flag across unassign()/assign(): partitions paused
        # when their range completed must be resumed, or a rewound partition would never fetch.
        self.consumer.unassign()
        # A first assign, or a chunk with topics not asked yet: the source topics' leaders for the consumer,
        # the target topics' for the producer (its first record of a topic it holds no metadata for waits for
        # the next metadata refresh; figures: docs/results.md, "Figures behind the code").
        self._learn_leaders(self.consumer, "source", {tp.topic for tp in work})
        self._learn_leaders(self.producer, "target", {s.task.target_topic for s in states.values() if not s.done})
        self.consumer.assign(work)
        if work:
            self.consumer.resume(work)

    def touch(self) -> None:
        """Count now as activity for the stall check (a follower that has read all there is)."""
        self._last_activity = time.monotonic()

    def _learn_leaders(self, client: Any, side: str, topics: set[str]) -> None:
        """Ask ``client`` for the metadata of ``topics`` it was not asked about yet (a request per topic, all
        at once, up to METADATA_ONE_BY_ONE, else the whole cluster's in one request). Partitions of topics a client held
        no metadata for often started fetching (or producing) only after its next metadata refresh (figures:
        docs/results.md, "Figures behind the code"). A failure here only costs that delay:
        the client looks the leaders up itself."""
        from confluent_kafka import KafkaException

        learned = self._learned[side]
        wanted = sorted(topics - learned)
        if "*" in learned or not wanted:
            return
        learned.update(wanted)
        try:
            if len(wanted) == 1:
                client.list_topics(wanted[0], timeout=METADATA_TIMEOUT)
            elif len(wanted) <= METADATA_ONE_BY_ONE:
                # At once, not one after the other: each request is a round trip to the cluster, and a
                # source a region away (100 ms) made ten topics' first assign wait a second.
                with ThreadPoolExecutor(max_workers=len(wanted), thread_name_prefix="eosmirror-metadata") as pool:
                    list(pool.map(lambda topic: client.list_topics(topic, timeout=METADATA_TIMEOUT), wanted))
            else:
                client.list_topics(timeout=METADATA_TIMEOUT)
                learned.add("*")
        except KafkaException as exc:
            log.debug("slot %d: %s metadata ahead of use failed (%s)", self.task.slot, side, exc)

    def copy(self, states: dict[tuple[str, int], PartitionCopy], deadline: float, bytes_copied: int) -> int:
        """Step 4.2: copy records until every range is complete, the deadline, or the byte budget.
        ``bytes_copied``: what this attempt copied before (the budget counts it); returns the new total."""
        max_bytes, throttle = self.task.max_bytes, self.throttle
        undone = [s for s in states.values() if not s.done]
        first_batch = True
        waited = throttle.waited if throttle is not None else 0.0
        while undone and time.monotonic() < deadline:
            lifeline.check()       # the lifeline was cut: start nothing new, wait for the exit
            if max_bytes is not None and bytes_copied >= max_bytes:
                break
            batch = CONSUME_BATCH
            if throttle is not None:
                if not self._wait_for_cap(throttle, deadline):
                    break
                batch = throttle.batch_records(CONSUME_BATCH)
            messages = self.consumer.consume(batch, CONSUME_TIMEOUT)
            if messages:
                self._last_activity = time.monotonic()
            copied, records = self._produce_batch(states, messages)
            bytes_copied += copied
            if throttle is not None and records:
                self._charge(throttle, copied, records, messages)
            # The fault point is "inside a transaction that holds records": a batch of end-of-partition
            # events only (a follower reaching the log's end) is not one.
            if first_batch and any(m.error() is None for m in messages):
                first_batch = False
                self.faults.hit("in_transaction", self.task.slot)
            self.producer.poll(0)
            undone = self._settle(undone)
            self._log_progress(states)
        self.cut_by_cap = bool(undone) and throttle is not None and throttle.waited > waited
        return bytes_copied

    def _wait_for_cap(self, throttle: Throttle, deadline: float) -> bool:
        """Wait until the slot's bucket allows the next batch, serving the producer's delivery reports
        meanwhile; False: the deadline came first (the transaction commits what it has)."""
        while (wait := throttle.wait_seconds()) > 0:
            now = time.monotonic()
            if now >= deadline:
                return False
            self.producer.poll(min(wait, deadline - now))
            throttle.waited_for(time.monotonic() - now)
            self._last_activity = time.monotonic()   # held back by the cap: no stall of the source
        return True

    def _charge(self, throttle: Throttle, copied: int, records: int, messages: list[Any]) -> None:
        """A capped batch was produced: its bytes leave the bucket; its last record's age says whether the
        slot is far behind (the catch-up rate)."""
        throttle.produced(copied, records)
        last = next((m for m in reversed(messages) if m.error() is None), None)
        if last is not None and throttle.observe_age(last.timestamp()[1], int(time.time() * 1000)):
            rate = f"{throttle.rate:,.0f} bytes/s" if throttle.rate else "no cap"
            log.info("slot %d: %s (catch_up_lag_seconds %g): %s", self.task.slot,
                     "far behind, catch-up rate" if throttle.far_behind else "no longer far behind, rate",
                     throttle.cap.catch_up_lag_seconds, rate)

    def _produce_batch(self, states: dict[tuple[str, int], PartitionCopy], messages: list[Any]) -> tuple[int, int]:
        """Produce the records of one consumed batch; returns the bytes and records copied. The per-record loop."""
        produce, poll = self.producer.produce, self.producer.poll
        copied = records = 0
        for m in messages:
            err = m.error()
            if err is not None:
                if err.code() == PARTITION_EOF:
                    s = states.get((m.topic(), m.partition()))
                    if s is not None:
                        s.eof = max(s.eof, m.offset())
                else:
                    self.source_group_refused = source_error(self.task, m, err, self.source_group_refused)
                continue
            s = states.get((m.topic(), m.partition()))
            if s is None:   # fetched before the slot moved to its next chunk: read again in its own chunk
                continue
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
                raise oversize_record(s, offset, size)
            ts = m.timestamp()[1]
            while True:
                try:
                    if s.count:
                        produce(s.target_topic, value, key, s.partition, timestamp=ts, headers=headers)
                    else:   # the first record's delivery report gives the transaction's target base
                        produce(s.target_topic, value, key, s.partition, timestamp=ts, headers=headers,
                                on_delivery=s.delivered_first)
                    break
                except BufferError:
                    poll(0.05)   # the local queue is full: let librdkafka send, then retry
                except Exception as exc:  # noqa: BLE001
                    oversize = producer_oversize(s, offset, size, exc)
                    if oversize is not None:
                        raise oversize from None
                    raise
            s.runs.add(offset)
            s.count += 1
            s.bytes += size
            s.next = offset + 1
            if ts > s.newest_ts:
                s.newest_ts = ts
            copied += size
            records += 1
        return copied, records

    def _settle(self, undone: list[PartitionCopy]) -> list[PartitionCopy]:
        """After a batch: mark and pause completed ranges; fail if the source stalls. Returns the undone."""
        from confluent_kafka import TopicPartition

        # Ranges that end on markers or aborted records only show it in position()/EOF.
        pending = [s for s in undone if not s.is_complete()]
        if pending:
            positions = self.consumer.position([TopicPartition(s.task.source_topic, s.task.partition)
                                                for s in pending])
            for s, tp in zip(pending, positions):
                if tp.offset >= 0:
                    s.position = tp.offset
        finished = [s for s in undone if s.is_complete()]
        if finished:
            for s in finished:
                s.done = True
            self.consumer.pause([TopicPartition(s.task.source_topic, s.task.partition) for s in finished])
            undone = [s for s in undone if not s.done]
            self._last_activity = time.monotonic()
        if undone and time.monotonic() - self._last_activity > stall_seconds():
            raise ClusterUnreachableError(
                f"{self.task.source_label}: no records for {stall_seconds():.0f} s while "
                f"{len(undone)} partition(s) of slot {self.task.slot} are unfinished (e.g. "
                f"{undone[0].task.source_topic}[{undone[0].task.partition}] at {undone[0].reached} of "
                f"{undone[0].end}); the source cluster is unreachable or too slow")
        return undone

    def _log_progress(self, states: dict[tuple[str, int], PartitionCopy]) -> None:
        now = time.monotonic()
        if now - self._last_log < 10:
            return
        self._last_log = now
        copied = sum(s.records_total + s.count for s in states.values())
        done = sum(1 for s in states.values() if s.done)
        log.info("mirror %s slot %d: %d records copied so far, %d of %d partitions complete",
                 self.task.mirror, self.task.slot, copied, done, len(states))
