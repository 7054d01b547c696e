"""SlotCopier's copy protocol against scripted fake clients (control flow only, no brokers).

The fakes model just enough of Kafka for the protocol's decisions to be observable:
- the source is one list of values per partition (offset = index); ``consume()`` returns at most
  ``per_consume`` records from the assigned position, then one _PARTITION_EOF event at the end;
- the target is one log per partition in which records keep their offsets whether their
  transaction commits or aborts, and every commit or abort adds a control marker (one offset),
  as in Kafka; the progress group holds what committed transactions sent with
  send_offsets_to_transaction, and is what ``read_progress`` returns;
- the producer fails its calls as a test scripts them.
The copier's clock is replaced by one that moves only when the source is polled (one second per
``consume()``) or the copier sleeps: with ``max_transaction_seconds`` below one second, every
transaction copies exactly one consumed batch, so tests know which records each transaction holds.
Whether the real clients behave like this is the integration tests' business (real brokers).
"""

from __future__ import annotations

import time as real_time
from collections import defaultdict

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from eosmirror.core.errors import FencedError
from eosmirror.core.offsetsync import OffsetSync
from eosmirror.kafka.progress import Progress
from eosmirror.slot import atleastonce, classify, copier, recordloop, syncwrites, targetcheck
from eosmirror.slot.copier import MAX_ABORT_ATTEMPTS, SlotCopier
from eosmirror.slot.faults import Faults
from eosmirror.slot.slotstate import PartitionTask, SlotTask

SRC, TGT, SYNCS, TXN_ID = ("src", 0), ("tgt", 0), "syncs", "eosmirror.m.0"


class Clock:
    """Stands in for the ``time`` module of the copier and the modules it runs."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    @staticmethod
    def time() -> float:
        return real_time.time()


class Msg:
    def __init__(self, topic: str, partition: int, offset: int, value: bytes | None = None,
                 error: KafkaError | None = None) -> None:
        self._topic, self._partition, self._offset, self._value, self._error = topic, partition, offset, value, error

    def error(self): return self._error
    def topic(self): return self._topic
    def partition(self): return self._partition
    def offset(self): return self._offset
    def value(self): return self._value
    def key(self): return b"k"
    def headers(self): return None
    def timestamp(self): return (1, 1_700_000_000_000 + self._offset)


class FakeTarget:
    """Target logs, the progress group, and foreign writers scripted by offset."""

    def __init__(self) -> None:
        self.logs: dict[tuple[str, int], list[dict]] = defaultdict(list)
        self.progress: dict[tuple[str, int], int] = {}
        self.foreign_at: set[tuple[str, int, int]] = set()   # a foreign record takes this offset first

    def append(self, topic: str, partition: int, value: bytes | None, state: str) -> int:
        log = self.logs[(topic, partition)]
        while (topic, partition, len(log)) in self.foreign_at:
            log.append({"value": b"foreign", "state": "committed"})
        log.append({"value": value, "state": state})
        return len(log) - 1

    def end_transaction(self, produced: list[tuple[str, int, int]], commit: bool) -> None:
        for topic, partition, offset in produced:
            self.logs[(topic, partition)][offset]["state"] = "committed" if commit else "aborted"
        for key in dict.fromkeys((t, p) for t, p, _ in produced):
            self.logs[key].append({"value": None, "state": "marker"})

    def values(self, key: tuple[str, int], state: str = "committed") -> list[bytes | None]:
        return [r["value"] for r in self.logs[key] if r["state"] == state]

    def syncs(self) -> list[OffsetSync]:
        return [OffsetSync.decode(v) for v in self.values((SYNCS, 0))]


def kafka_error(code: int, reason: str, **flags: bool) -> KafkaException:
    return KafkaException(KafkaError(code, reason, **flags))


def abortable(reason: str) -> KafkaException:
    return kafka_error(KafkaError.TRANSACTION_ABORTABLE, reason, txn_requires_abort=True)


class FakeProducer:
    """``fail`` scripts errors per method: a list consumed one entry per call (None: that call
    succeeds); a method whose list is used up succeeds."""

    def __init__(self, target: FakeTarget, fail: dict[str, list] | None = None) -> None:
        self.target = target
        self.fail = {method: list(outcomes) for method, outcomes in (fail or {}).items()}
        self.calls: list[str] = []
        self.open: list[tuple[str, int, int]] | None = None
        self.unreported: list[tuple] = []
        self.pending_offsets: dict[tuple[str, int], int] | None = None
        self.committed: list[list] = []      # per committed transaction: (topic, partition, offset) of its records
        self.aborted: list[list] = []

    def _scripted(self, method: str) -> None:
        self.calls.append(method)
        outcomes = self.fail.get(method)
        if outcomes:
            error = outcomes.pop(0)
            if error is not None:
                raise error

    def init_transactions(self, *timeout):
        self._scripted("init_transactions")

    def list_topics(self, topic=None, timeout=None):   # metadata before a chunk's first records: nothing to model
        return None

    def begin_transaction(self):
        self._scripted("begin_transaction")
        assert self.open is None, "begin_transaction while a transaction is open"
        self.open = []

    def produce(self, topic, value=None, key=None, partition=-1, timestamp=0, headers=None, on_delivery=None):
        self._scripted("produce")
        offset = self.target.append(topic, partition, value, "open" if self.open is not None else "committed")
        if self.open is not None:
            self.open.append((topic, partition, offset))
        if on_delivery is not None:
            self.unreported.append((on_delivery, topic, partition, offset))

    def poll(self, timeout=0):
        return 0

    def flush(self, timeout=None):
        self._scripted("flush")
        for callback, topic, partition, offset in self.unreported:
            callback(None, Msg(topic, partition, offset))
        self.unreported = []
        return 0

    def send_offsets_to_transaction(self, offsets, group_metadata, *timeout):
        self._scripted("send_offsets_to_transaction")
        assert group_metadata == "member-less group metadata"
        self.pending_offsets = {(tp.topic, tp.partition): tp.offset for tp in offsets}

    def commit_transaction(self, *timeout):
        self._scripted("commit_transaction")
        self.target.end_transaction(self.open, commit=True)
        self.target.progress.update(self.pending_offsets or {})
        self.committed.append(self.open)
        self.open = self.pending_offsets = None

    def abort_transaction(self, *timeout):
        self._scripted("abort_transaction")
        if self.open is None:
            raise kafka_error(KafkaError._STATE, "Operation not valid in state Ready")
        self.target.end_transaction(self.open, commit=False)
        self.aborted.append(self.open)
        self.open = self.pending_offsets = None


class FakeConsumer:
    def __init__(self, clock: Clock, source: dict[tuple[str, int], list[bytes]], per_consume: int) -> None:
        self.clock, self.source, self.per_consume = clock, source, per_consume
        self.positions: dict[tuple[str, int], int] = {}
        self.paused: set[tuple[str, int]] = set()
        self.eof_sent: set[tuple[str, int]] = set()
        self.assigned_at: list[dict[tuple[str, int], int]] = []   # the start offsets of every assign()

    def assignment(self):
        return [TopicPartition(t, p) for t, p in self.positions]

    def unassign(self):
        self.positions = {}

    def list_topics(self, topic=None, timeout=None):   # metadata before the first assign: nothing to model
        return None

    def assign(self, partitions):
        self.positions = {(tp.topic, tp.partition): tp.offset for tp in partitions}
        self.eof_sent = set()
        self.assigned_at.append(dict(self.positions))

    def seek(self, tp):   # like librdkafka: what was fetched before is dropped, fetching restarts here
        key = (tp.topic, tp.partition)
        self.positions[key] = tp.offset
        self.eof_sent.discard(key)
        self.assigned_at.append({key: tp.offset})

    def resume(self, partitions):
        self.paused -= {(tp.topic, tp.partition) for tp in partitions}

    def pause(self, partitions):
        self.paused |= {(tp.topic, tp.partition) for tp in partitions}

    def consume(self, num_messages, timeout):
        self.clock.now += 1.0
        out = []
        for key, position in self.positions.items():
            if key in self.paused:
                continue
            values = self.source[key][position:position + self.per_consume]
            out += [Msg(*key, position + n, value) for n, value in enumerate(values)]
            self.positions[key] = position = position + len(values)
            if position >= len(self.source[key]) and key not in self.eof_sent:
                self.eof_sent.add(key)
                out.append(Msg(*key, position, error=KafkaError(KafkaError._PARTITION_EOF)))
        return out

    def position(self, partitions):
        return [TopicPartition(tp.topic, tp.partition, self.positions.get((tp.topic, tp.partition), -1001))
                for tp in partitions]


class FakeReader:
    def __init__(self, target: FakeTarget) -> None:
        self.target = target

    def consumer_group_metadata(self):
        return "member-less group metadata"

    def commit(self, offsets, asynchronous):
        assert asynchronous is False
        self.target.progress.update({(tp.topic, tp.partition): tp.offset for tp in offsets})


class FakeIO:
    """The copier's I/O seam over the fakes; records what the copier asked."""

    def __init__(self, clock: Clock, source: dict[tuple[str, int], list[bytes]], per_consume: int = 100,
                 fail: dict[str, list] | None = None, generation_error: Exception | None = None) -> None:
        self.target = FakeTarget()
        self.producer = FakeProducer(self.target, fail)
        self.consumer = FakeConsumer(clock, source, per_consume)
        self.reader = FakeReader(self.target)
        self.generation_error = generation_error
        self.progress_reads: list[tuple[list, bool]] = []
        self.published: list[dict] = []
        self.closed = False

    def open(self, on_delivery):
        self.on_delivery = on_delivery

    def fence(self):
        self.producer.init_transactions()

    def read_progress(self, partitions, stable):
        partitions = list(partitions)
        self.progress_reads.append((partitions, stable))
        return {k: Progress(offset=self.target.progress[k]) for k in partitions if k in self.target.progress}

    def check_generation(self):
        if self.generation_error is not None:
            raise self.generation_error

    def target_end_offsets(self, partitions):
        return {k: len(self.target.logs[k]) for k in partitions}

    def target_stable_offsets(self, partitions):
        """Below the first record of a transaction still open (read_committed stops there)."""
        return {k: next((i for i, r in enumerate(self.target.logs[k]) if r["state"] == "open"), len(self.target.logs[k]))
                for k in partitions}

    def publish_to_source(self, offsets):
        self.published.append(dict(offsets))
        return None

    def close(self):
        self.closed = True


def values(count: int) -> list[bytes]:
    return [f"v{n}".encode() for n in range(count)]


def slot_task(end: int = 9, max_message_bytes: int = 1048588, delivery: str = "exactly_once") -> SlotTask:
    partition = PartitionTask(SRC[0], TGT[0], 0, start=0, end=end, had_progress=False,
                              max_message_bytes=max_message_bytes)
    return SlotTask(mirror="m", slot=0, transactional_id=TXN_ID, generation=1, delivery=delivery,
                    progress_group="eosmirror-m", partitions=(partition,), source_conf={}, target_conf={},
                    max_transaction_seconds=0.5, offset_sync_topic=SYNCS)


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    for module in (copier, classify, recordloop, atleastonce, syncwrites, targetcheck):   # every slot module using time
        monkeypatch.setattr(module, "time", fake)
    return fake


def run(io: FakeIO, task: SlotTask | None = None):
    return SlotCopier(task or slot_task(), faults=Faults([]), io=io).run()


# --- the protocol, end to end over the seam ---------------------------------------------------------

def test_progress_is_published_to_the_source_group_after_the_commit(clock):
    io = FakeIO(clock, {SRC: values(5)}, per_consume=5)
    result = run(io, slot_task(end=5))
    assert result.status == "committed" and io.published == [{SRC: 5}] and result.source_commit_error is None


def test_a_source_that_refused_the_group_while_reading_is_not_asked_again_at_publish(clock):
    """Asking again costs librdkafka's close() a wait for a coordinator it will never find (45 s per
    slot and run with the default session timeout); the refusal seen while reading is the answer."""
    io = FakeIO(clock, {SRC: values(5)}, per_consume=5)
    consume = io.consumer.consume
    refusal = [Msg(None, -1, -1, error=KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))]

    def refused_first(num_messages, timeout):
        batch = refusal + consume(num_messages, timeout)
        refusal.clear()
        return batch

    io.consumer.consume = refused_first
    result = run(io, slot_task(end=5))
    assert result.status == "committed" and io.target.values(TGT) == values(5)      # reading needs no group
    assert io.published == []
    assert "GROUP_AUTHORIZATION_FAILED" in result.source_commit_error and "eosmirror-m" in result.source_commit_error


def test_every_record_is_committed_once_with_exact_offset_syncs_and_progress(clock):
    io = FakeIO(clock, {SRC: values(9)}, per_consume=3)
    result = run(io)
    assert (result.status, result.records, result.transactions, result.aborts) == ("committed", 9, 3, 0)
    assert io.target.values(TGT) == values(9)
    # Each transaction's base is its first record's delivered offset; the commit marker takes one.
    assert [(s.source_start, s.source_end, s.target_base) for s in io.target.syncs()] == [(0, 3, 0), (3, 6, 4),
                                                                                         (6, 9, 8)]
    assert io.target.progress == {TGT: 9}
    # The report's target range covers the three transactions: records at 0-2, 4-6, 8-10, markers between.
    (part,) = result.partitions
    assert (part.target_from, part.target_to, part.records) == (0, 11, 9)
    assert io.progress_reads == [([TGT], True)]
    assert io.published == [{SRC: 9}]
    assert io.producer.calls[0] == "init_transactions" and io.producer.aborted == []


def test_at_least_once_commits_progress_after_delivery_and_bases_syncs_on_the_target_end(clock):
    io = FakeIO(clock, {SRC: values(5)})
    result = run(io, slot_task(end=5, delivery="at_least_once"))
    assert (result.status, result.records) == ("committed", 5)
    assert "init_transactions" not in io.producer.calls and "begin_transaction" not in io.producer.calls
    assert io.target.values(TGT) == values(5)
    assert [(s.source_start, s.source_end, s.target_base) for s in io.target.syncs()] == [(0, 5, 0)]
    assert io.target.progress == {TGT: 5}


def test_at_least_once_fails_the_slot_on_a_failed_delivery_and_commits_no_progress(clock):
    io = FakeIO(clock, {SRC: values(5)})
    produce = io.producer.produce

    def produce_and_lose_v2(topic, value=None, key=None, partition=-1, **kwargs):
        produce(topic, value, key, partition, **kwargs)
        if value == b"v2":    # the idempotent producer's delivery report of that record
            io.on_delivery(KafkaError(KafkaError._MSG_TIMED_OUT, "Local: Message timed out"), Msg(topic, partition, 2))

    io.producer.produce = produce_and_lose_v2
    result = run(io, slot_task(end=5, delivery="at_least_once"))
    assert (result.status, result.error_type) == ("failed", "EosMirrorError")
    assert "slot 0: delivery failed: tgt[0]: _MSG_TIMED_OUT: Local: Message timed out" in result.error
    assert io.target.progress == {} and io.target.syncs() == [] and io.published == []


# --- abortable errors -------------------------------------------------------------------------------

def test_an_abortable_error_aborts_rewinds_to_the_committed_progress_and_retries(clock):
    io = FakeIO(clock, {SRC: values(9)}, per_consume=3,
                fail={"commit_transaction": [None, abortable("coordinator moved")]})
    result = run(io)
    assert (result.status, result.error, result.aborts) == ("committed", None, 1)
    # The aborted transaction held source offsets 3..5; the retry re-read them from the committed progress (3).
    assert [[io.target.logs[TGT][o]["value"] for t, p, o in txn if (t, p) == TGT]
            for txn in io.producer.aborted] == [values(6)[3:]]
    assert io.consumer.assigned_at == [{SRC: 0}, {SRC: 3}]
    assert io.progress_reads == [([TGT], True), ([TGT], True)]
    assert io.target.values(TGT) == values(9)          # every record committed exactly once
    assert io.target.values(TGT, "aborted") == values(6)[3:]
    assert io.target.progress == {TGT: 9}


def test_abortable_errors_fail_the_slot_after_max_attempts_naming_the_last_reason(clock):
    reasons = [f"reason-{n}" for n in range(1, MAX_ABORT_ATTEMPTS + 1)]
    io = FakeIO(clock, {SRC: values(9)}, fail={"commit_transaction": [abortable(r) for r in reasons]})
    result = run(io)
    assert (result.status, result.error_type) == ("failed", "EosMirrorError")
    assert f"{MAX_ABORT_ATTEMPTS} transactions in a row had to be aborted" in result.error
    assert f"last reason: commit the transaction: TRANSACTION_ABORTABLE: {reasons[-1]}" in result.error
    assert reasons[-2] not in result.error
    assert len(io.producer.aborted) == MAX_ABORT_ATTEMPTS == result.aborts
    assert io.producer.committed == [] and io.target.progress == {} and io.target.values(TGT) == []
    # Rewound to the committed progress before every retry, never after the last abort.
    assert io.consumer.assigned_at == [{SRC: 0}] * MAX_ABORT_ATTEMPTS
    assert len(io.progress_reads) == MAX_ABORT_ATTEMPTS


def test_the_abort_budget_counts_aborts_in_a_row_only(clock):
    streak = [abortable("busy")] * (MAX_ABORT_ATTEMPTS - 1)
    io = FakeIO(clock, {SRC: values(6)}, per_consume=3, fail={"commit_transaction": streak + [None] + streak})
    result = run(io, slot_task(end=6))
    assert (result.status, result.aborts) == ("committed", 2 * (MAX_ABORT_ATTEMPTS - 1))
    assert io.target.values(TGT) == values(6)


def test_a_retriable_error_retries_the_same_call_without_aborting(clock):
    retriable = kafka_error(KafkaError.COORDINATOR_NOT_AVAILABLE, "coordinator loading", retriable=True)
    io = FakeIO(clock, {SRC: values(3)}, fail={"commit_transaction": [retriable]})
    result = run(io, slot_task(end=3))
    assert (result.status, result.aborts) == ("committed", 0)
    assert io.producer.calls.count("commit_transaction") == 2 and io.producer.aborted == []
    assert io.target.values(TGT) == values(3)


def test_an_abortable_error_a_retry_cannot_cure_fails_at_once(clock):
    too_large = kafka_error(KafkaError.MSG_SIZE_TOO_LARGE, "Broker: Message size too large", txn_requires_abort=True)
    io = FakeIO(clock, {SRC: values(3)}, fail={"commit_transaction": [too_large]})
    result = run(io, slot_task(end=3))
    assert (result.status, result.error_type) == ("failed", "OversizeRecordError")
    assert "raise max.message.bytes on the target topic" in result.error
    assert io.producer.calls.count("begin_transaction") == 1 and len(io.producer.aborted) == 1
    assert io.producer.committed == [] and io.target.progress == {}


# --- fenced -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("method, code", [
    ("init_transactions", KafkaError._FENCED),
    ("commit_transaction", KafkaError._FENCED),
    ("send_offsets_to_transaction", KafkaError.PRODUCER_FENCED),
    ("produce", KafkaError.PRODUCER_FENCED),          # raised outside a transactional call
])
def test_a_fenced_producer_stops_the_slot_as_fenced(clock, method, code):
    fenced = kafka_error(code, "There is a newer producer with the same transactionalId", fatal=True)
    io = FakeIO(clock, {SRC: values(3)}, fail={method: [fenced]})
    result = run(io, slot_task(end=3))
    assert (result.status, result.error_type) == ("fenced", "FencedError")
    assert f"a newer instance of transactional id {TXN_ID} took over" in result.error
    assert io.producer.calls.count("begin_transaction") <= 1          # never retried
    assert io.producer.committed == [] and io.target.progress == {} and io.published == []


def test_a_newer_generation_stops_the_slot_before_it_copies(clock):
    moved = FencedError("mirror 'm' moved to generation 2 (this slot belongs to 1)")
    io = FakeIO(clock, {SRC: values(3)}, generation_error=moved)
    result = run(io, slot_task(end=3))
    assert (result.status, result.error) == ("fenced", str(moved))
    assert io.producer.calls == ["init_transactions"] and io.progress_reads == []


# --- foreign writer ---------------------------------------------------------------------------------

def test_a_foreign_writer_on_the_target_aborts_and_fails_naming_partition_and_offsets(clock):
    io = FakeIO(clock, {SRC: values(9)})
    io.target.foreign_at.add((*TGT, 4))            # lands between this transaction's records
    result = run(io)
    assert (result.status, result.error_type) == ("failed", "TargetMismatchError")
    assert "target tgt[0] ends at 10 but this transaction's 9 records start at 0" in result.error
    assert "another producer writes to the target topic" in result.error
    assert len(io.producer.aborted) == 1 and io.producer.committed == []
    assert io.producer.calls.count("begin_transaction") == 1          # not retried
    assert io.target.values(TGT) == [b"foreign"] and io.target.syncs() == [] and io.target.progress == {}


def test_a_foreign_writer_check_whose_abort_is_fenced_reports_fenced(clock):
    fenced = kafka_error(KafkaError._FENCED, "Producer fenced", fatal=True)
    io = FakeIO(clock, {SRC: values(9)}, fail={"abort_transaction": [fenced]})
    io.target.foreign_at.add((*TGT, 4))
    result = run(io)
    assert (result.status, result.error_type) == ("fenced", "FencedError")
    assert io.producer.committed == [] and io.target.progress == {}


# --- a transaction the broker left open on a target partition ----------------------------------------

def hanging(io: FakeIO, count: int) -> None:
    """Records of a transaction the broker never closed (it skipped the marker), as at a hard restart."""
    for n in range(count):
        io.target.append(*TGT, f"v{n}".encode(), "open")


def test_a_slot_never_writes_on_top_of_a_transaction_left_open_and_names_how_to_abort_it(clock):
    io = FakeIO(clock, {SRC: values(9)})
    hanging(io, 4)
    result = run(io)
    assert (result.status, result.error_type) == ("failed", "TargetMismatchError")
    assert "1 target partition(s) still hold an open transaction" in result.error
    assert "tgt[0] last stable offset 0 < end 4" in result.error
    assert "abort --topic tgt --partition 0 --start-offset 0" in result.error
    assert "begin_transaction" not in io.producer.calls                    # nothing written
    assert io.target.values(TGT) == [] and io.target.syncs() == [] and io.target.progress == {}
    assert clock.now - 1000.0 >= targetcheck.SETTLE_SECONDS                # it waited before refusing


def test_a_transaction_that_ends_while_the_slot_waits_lets_it_copy(clock):
    io = FakeIO(clock, {SRC: values(9)})
    hanging(io, 4)
    asked = []
    stable = io.target_stable_offsets

    def committed_on_the_third_look(partitions):
        asked.append(1)
        if len(asked) == 3:
            for record in io.target.logs[TGT]:
                record["state"] = "committed"
        return stable(partitions)

    io.target_stable_offsets = committed_on_the_third_look
    result = run(io)
    assert result.status == "committed" and len(asked) == 3
    assert io.target.values(TGT) == values(4) + values(9)          # the other producer's 4, then the copy


# --- oversize record --------------------------------------------------------------------------------

def test_an_oversize_record_fails_naming_offset_size_and_limit_and_commits_nothing(clock):
    source = values(9)
    source[4] = b"x" * 2000
    io = FakeIO(clock, {SRC: source})
    result = run(io, slot_task(max_message_bytes=1100))
    assert (result.status, result.error_type) == ("failed", "OversizeRecordError")
    assert "source src[0] offset 4: record of 2001 bytes" in result.error          # value + key b"k"
    assert "max.message.bytes=1100" in result.error and "Raise max.message.bytes" in result.error
    assert io.producer.committed == [] and io.target.progress == {} and io.target.values(TGT) == []
    assert io.target.values(TGT, "aborted") == values(4)           # the open transaction was aborted
    assert io.producer.calls.count("begin_transaction") == 1


def test_a_run_with_nothing_to_copy_keeps_its_slots_on_the_driver_unless_they_follow():
    """A follow run's slots copy for minutes: on executors with their lifelines, never on the driver
    (where a killed spark-submit left the Python driver following with open transactions)."""
    from dataclasses import replace

    from eosmirror.spark.runner import runs_on_driver

    idle, busy = slot_task(end=0), slot_task(end=9)
    assert runs_on_driver([idle]) and not runs_on_driver([idle, busy])
    assert not runs_on_driver([replace(idle, follow_until=1e10)])


class RenewingIO(FakeIO):
    """Its fence replaces the producer, as KafkaSlotIO.fence does when an older instance's
    transaction was still open."""

    def fence(self):
        self.first = self.producer
        self.producer = FakeProducer(self.target)
        self.producer.init_transactions()


def test_the_copier_copies_with_the_producer_its_fence_left(clock):
    io = RenewingIO(clock, {SRC: values(5)})
    result = run(io, slot_task(end=5))
    assert (result.status, result.records) == ("committed", 5)
    assert io.first.calls == []                      # the replaced producer is never used
    assert io.producer.calls[:2] == ["init_transactions", "begin_transaction"]
    assert io.target.values(TGT) == values(5) and io.target.progress == {TGT: 5}
