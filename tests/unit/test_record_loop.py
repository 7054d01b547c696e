"""The per-record loop (slot/recordloop.py) on its own: real ``confluent_kafka.Message`` records from a
scripted consumer, a producer that records every call. No brokers, no transactions.

The consumer returns one scripted batch per ``consume()`` (then empty ones) and moves the clock one
second per call, like the slot copier's fakes (tests/support/fakes.py, whose ``Clock`` this reuses),
so deadlines and the stall limit are counted in polls. ``position()`` answers what a test scripts: that is how a range
that ends on control markers or aborted records (which read_committed never returns) shows its end.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from eosmirror.core.errors import ClusterUnreachableError, DataLossError, OversizeRecordError
from eosmirror.slot import classify, recordloop
from eosmirror.slot.faults import Faults, InjectedAbort, Rule
from eosmirror.slot.recordloop import RecordLoop
from eosmirror.slot.slotstate import PartitionCopy, PartitionTask, SlotTask
from tests.support.fakes import Clock

A, B = ("src-a", 0), ("src-b", 3)
TARGET = {A: "tgt-a", B: "tgt-b"}
STALL = 5


def record(key: tuple[str, int], offset: int, value: bytes | None = b"value", k: bytes | None = b"key",
           headers: list | None = None, ts: int = 1_700_000_000_000) -> Message:
    return Message(topic=key[0], partition=key[1], offset=offset, key=k, value=value, headers=headers,
                   timestamp=(1, ts))


def event(code: int, key: tuple[str, int] | None = None, offset: int = -1) -> Message:
    """What consume() returns in place of a record: an end-of-partition event or an error."""
    if key is None:
        return Message(error=KafkaError(code))
    return Message(topic=key[0], partition=key[1], offset=offset, error=KafkaError(code))


class ScriptedConsumer:
    def __init__(self, clock: Clock, batches: list[list[Message]], positions: dict | None = None,
                 assigned: list[tuple[str, int]] | None = None) -> None:
        self.clock, self.batches, self.positions = clock, list(batches), dict(positions or {})
        self.calls: list[tuple] = []
        self.polls = 0
        self.assigned = list(assigned or [])

    def consume(self, num_messages, timeout):
        self.clock.now += 1.0
        self.polls += 1
        return self.batches.pop(0) if self.batches else []

    def position(self, partitions):
        return [TopicPartition(tp.topic, tp.partition, self.positions.get((tp.topic, tp.partition), -1001))
                for tp in partitions]

    def _record(self, name, partitions=None):
        self.calls.append((name, [(tp.topic, tp.partition, tp.offset) for tp in partitions or []]))

    def assignment(self): return [TopicPartition(t, p) for t, p in self.assigned]
    def list_topics(self, topic=None, timeout=None): self.calls.append(("metadata", [(topic,)]))
    def seek(self, partition): self._record("seek", [partition])
    def unassign(self): self._record("unassign")
    def assign(self, partitions): self._record("assign", partitions)
    def resume(self, partitions): self._record("resume", partitions)
    def pause(self, partitions): self._record("pause", partitions)


class RecordingProducer:
    """Records every produce(); ``full`` BufferErrors come first, then ``error`` (if any) is raised."""

    def __init__(self, full: int = 0, error: Exception | None = None) -> None:
        self.produced: list[dict] = []
        self.polls: list[float] = []
        self.full, self.error = full, error
        self.metadata: list[str | None] = []

    def list_topics(self, topic=None, timeout=None): self.metadata.append(topic)

    def produce(self, topic, value=None, key=None, partition=-1, **kwargs):
        if self.full:
            self.full -= 1
            raise BufferError("Local: Queue full")
        if self.error is not None:
            raise self.error
        self.produced.append({"topic": topic, "value": value, "key": key, "partition": partition, **kwargs})

    def poll(self, timeout=0):
        self.polls.append(timeout)
        return 0


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    for module in (recordloop, classify):
        monkeypatch.setattr(module, "time", fake)
    monkeypatch.setenv("EOSMIRROR_STALL_SECONDS", str(STALL))
    return fake


def slot(ranges: dict[tuple[str, int], tuple[int, int]], max_bytes: int | None = None,
         max_message_bytes: int = 1048588, faults: list[Rule] | None = None):
    """(task, states, faults) of a slot copying ``ranges`` (source partition -> [committed, end))."""
    parts = tuple(PartitionTask(k[0], TARGET[k], k[1], start=start, end=end, had_progress=True,
                                max_message_bytes=max_message_bytes) for k, (start, end) in ranges.items())
    task = SlotTask(mirror="m", slot=2, transactional_id="eosmirror.m.2", generation=1, delivery="exactly_once",
                    progress_group="eosmirror-m", partitions=parts, source_conf={}, target_conf={},
                    max_bytes=max_bytes, source_label="source 'a'")
    states = {(p.source_topic, p.partition): PartitionCopy(p, p.start) for p in parts}
    return task, states, Faults(faults or [])


def copy(clock, ranges, batches, positions=None, producer=None, seconds=100.0, bytes_before=0, **slot_args):
    task, states, faults = slot(ranges, **slot_args)
    consumer, producer = ScriptedConsumer(clock, batches, positions), producer or RecordingProducer()
    loop = RecordLoop(task, consumer, producer, faults)
    copied = loop.copy(states, clock.now + seconds, bytes_before)
    return copied, states, consumer, producer, loop


# --- what is produced ----------------------------------------------------------------------------------

def test_every_record_goes_to_the_same_partition_of_its_target_with_key_value_headers_and_timestamp(clock):
    headers = [("h", b"1"), ("h", b"2"), ("empty", None)]          # order, duplicates and a null value
    batch = [record(A, 5, b"v5", b"k5", headers, ts=11), record(B, 0, None, b"k0", ts=12),   # a tombstone
             record(A, 6, b"v6", None, ts=13), record(B, 1, b"v1", b"k1", ts=10)]
    copied, states, consumer, producer, _ = copy(clock, {A: (5, 7), B: (0, 2)}, [batch])
    assert [(p["topic"], p["partition"], p["key"], p["value"], p["headers"], p["timestamp"])
            for p in producer.produced] == [("tgt-a", 0, b"k5", b"v5", headers, 11),
                                            ("tgt-b", 3, b"k0", None, None, 12),
                                            ("tgt-a", 0, None, b"v6", None, 13),
                                            ("tgt-b", 3, b"k1", b"v1", None, 10)]
    a, b = states[A], states[B]
    # bytes: key + value + header names and values (b"v5" b"k5" "h" b"1" "h" b"2" "empty": 13)
    assert (a.count, a.bytes, a.next, a.newest_ts) == (2, 13 + 2, 7, 13)
    assert (b.count, b.bytes, b.next, b.newest_ts) == (2, 2 + 4, 2, 12)
    assert copied == 13 + 2 + 2 + 4
    assert (a.runs.finish(), b.runs.finish()) == (((5, 2),), ((0, 2),))      # (first offset, records)
    assert a.done and b.done and consumer.polls == 1          # both ranges complete after one batch


def test_only_a_partitions_first_record_asks_for_its_delivery_report_which_sets_the_base(clock):
    batch = [record(A, 5), record(A, 6), record(B, 0), record(B, 1)]
    _, states, _, producer, _ = copy(clock, {A: (5, 7), B: (0, 2)}, [batch])
    reports = [p.get("on_delivery") for p in producer.produced]
    assert reports == [states[A].delivered_first, None, states[B].delivered_first, None]
    reports[0](None, record(("tgt-a", 0), 40))
    assert (states[A].base, states[B].base) == (40, None)


def test_offsets_missing_from_the_source_split_the_copied_offsets_into_runs(clock):
    """Compaction (or markers inside the range) leaves gaps: the offset sync states them as runs."""
    batch = [record(A, 0), record(A, 1), record(A, 4), record(A, 6), record(A, 7)]
    _, states, _, _, _ = copy(clock, {A: (0, 8)}, [batch])
    assert states[A].runs.finish() == ((0, 2), (4, 1), (6, 2))
    assert (states[A].count, states[A].next, states[A].done) == (5, 8, True)


def test_a_full_local_queue_is_polled_and_the_same_record_produced_once(clock):
    producer = RecordingProducer(full=2)
    _, states, _, producer, _ = copy(clock, {A: (0, 1)}, [[record(A, 0)]], producer=producer)
    assert [p["value"] for p in producer.produced] == [b"value"] and states[A].count == 1
    assert producer.polls[:2] == [0.05, 0.05]


# --- where a range ends --------------------------------------------------------------------------------

def test_a_record_at_or_past_the_range_end_completes_the_range_and_is_not_copied(clock):
    batch = [record(A, 1), record(A, 2), record(A, 3), record(A, 4)]
    _, states, consumer, producer, _ = copy(clock, {A: (1, 3)}, [batch])
    assert [p["value"] for p in producer.produced] == [b"value"] * 2
    assert (states[A].count, states[A].next, states[A].reached, states[A].done) == (2, 3, 3, True)
    assert consumer.calls == [("pause", [("src-a", 0, -1001)])] and consumer.polls == 1


def test_a_range_that_ends_on_control_markers_completes_at_the_consumer_position(clock):
    """Offsets 3 and 4 are a commit marker and an aborted record: read_committed returns neither."""
    _, states, consumer, _, _ = copy(clock, {A: (0, 5)}, [[record(A, 0), record(A, 1), record(A, 2)]],
                                     positions={A: 5})
    assert (states[A].count, states[A].next, states[A].reached, states[A].done) == (3, 3, 5, True)
    assert ("pause", [("src-a", 0, -1001)]) in consumer.calls and consumer.polls == 1


def test_a_partition_eof_completes_a_range_that_ends_on_markers(clock):
    batch = [record(A, 0), event(KafkaError._PARTITION_EOF, A, 2)]
    _, states, consumer, _, _ = copy(clock, {A: (0, 2)}, [batch])
    assert (states[A].count, states[A].reached, states[A].done) == (1, 2, True) and consumer.polls == 1


def test_an_unfinished_range_stays_assigned_and_unpaused(clock):
    _, states, consumer, _, _ = copy(clock, {A: (0, 9)}, [[record(A, 0)]], seconds=1.5)
    assert (states[A].count, states[A].reached, states[A].done) == (1, 1, False)
    assert consumer.calls == [] and consumer.polls == 2


# --- when the loop stops -------------------------------------------------------------------------------

def test_the_loop_stops_at_the_transaction_deadline(clock):
    batches = [[record(A, n)] for n in range(10)]
    copied, states, consumer, _, _ = copy(clock, {A: (0, 10)}, batches, seconds=2.5)
    assert consumer.polls == 3 and states[A].count == 3 and not states[A].done      # polls at 0, 1 and 2 s
    assert copied == 3 * len(b"valuekey")


def test_the_loop_stops_once_the_slots_byte_budget_is_spent(clock):
    batches = [[record(A, n)] for n in range(10)]                     # 8 bytes a record
    copied, states, consumer, _, _ = copy(clock, {A: (0, 10)}, batches, max_bytes=20, bytes_before=5)
    assert (consumer.polls, states[A].count, copied) == (2, 2, 5 + 16)


def test_a_budget_spent_by_earlier_transactions_copies_nothing(clock):
    copied, states, consumer, _, _ = copy(clock, {A: (0, 10)}, [[record(A, 0)]], max_bytes=20, bytes_before=20)
    assert (consumer.polls, states[A].count, copied) == (0, 0, 20)


def test_a_source_silent_longer_than_the_stall_limit_fails_naming_a_partition(clock):
    with pytest.raises(ClusterUnreachableError) as failed:
        copy(clock, {A: (4, 9)}, [])
    assert f"source 'a': no records for {STALL} s" in str(failed.value)
    assert "1 partition(s) of slot 2 are unfinished (e.g. src-a[0] at 4 of 9)" in str(failed.value)


def test_the_in_transaction_fault_fires_once_records_are_produced(clock):
    rule = Rule(point="in_transaction", action="abort")
    with pytest.raises(InjectedAbort):
        copy(clock, {A: (0, 9)}, [[], [record(A, 0)]], producer=(producer := RecordingProducer()), faults=[rule])
    assert len(producer.produced) == 1


def test_a_batch_of_end_of_partition_events_only_is_not_inside_a_transaction_with_records(clock):
    # A follower reaching the log's end gets an EOF event first; the fault must wait for records.
    rule = Rule(point="in_transaction", action="abort")
    eof = event(KafkaError._PARTITION_EOF, A, 0)
    with pytest.raises(InjectedAbort):
        copy(clock, {A: (0, 9)}, [[eof], [], [record(A, 0)]], producer=(producer := RecordingProducer()),
             faults=[rule])
    assert len(producer.produced) == 1


# --- errors ----------------------------------------------------------------------------------------------

def test_a_record_larger_than_the_target_accepts_fails_before_it_is_produced(clock):
    batch = [record(A, 0), record(A, 1, b"x" * 1000)]
    with pytest.raises(OversizeRecordError) as failed:
        copy(clock, {A: (0, 2)}, [batch], producer=(producer := RecordingProducer()), max_message_bytes=1000)
    assert "source src-a[0] offset 1: record of 1003 bytes" in str(failed.value)
    assert "max.message.bytes=1000" in str(failed.value) and len(producer.produced) == 1


def test_a_record_the_producer_refuses_as_too_large_fails_naming_it(clock):
    too_large = KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "Broker: Message size too large"))
    with pytest.raises(OversizeRecordError) as failed:
        copy(clock, {A: (0, 2)}, [[record(A, 0)]], producer=RecordingProducer(error=too_large))
    assert "source src-a[0] offset 0: record of 8 bytes is too large for the target producer" in str(failed.value)


def test_any_other_produce_error_is_raised_as_it_is(clock):
    fenced = KafkaException(KafkaError(KafkaError._FENCED, "Producer fenced", fatal=True))
    with pytest.raises(KafkaException) as failed:
        copy(clock, {A: (0, 2)}, [[record(A, 0)]], producer=RecordingProducer(error=fenced))
    assert failed.value is fenced


def test_offsets_deleted_on_the_source_while_copying_are_data_loss(clock):
    with pytest.raises(DataLossError) as failed:
        copy(clock, {A: (0, 2)}, [[event(KafkaError.OFFSET_OUT_OF_RANGE, A, 0)]])
    assert "source 'a': src-a[0]: the offsets the mirror must copy next were deleted" in str(failed.value)


def test_a_refused_source_group_and_a_retriable_error_do_not_stop_the_copy(clock):
    refused, transport = event(KafkaError.GROUP_AUTHORIZATION_FAILED), event(KafkaError._TRANSPORT)
    _, states, _, _, loop = copy(clock, {A: (0, 2)}, [[refused, record(A, 0)], [transport, refused, record(A, 1)]])
    assert (states[A].count, states[A].done, loop.source_group_refused) == (2, True, True)


# --- assignment --------------------------------------------------------------------------------------------

def test_assign_restarts_every_unfinished_partition_at_its_committed_progress_and_resumes_it(clock):
    task, states, faults = slot({A: (4, 9), B: (7, 7)})               # B has nothing to do
    consumer = ScriptedConsumer(clock, [])
    RecordLoop(task, consumer, RecordingProducer(), faults).assign(states)
    # unassign first (assign keeps a still-assigned partition's fetch position); resume (the pause
    # of a range completed before a rewind survives unassign and assign in librdkafka)
    # the topic's metadata is asked before the first assign (without it the first fetch waited 0.7 s
    # in about half the tries)
    assert consumer.calls == [("unassign", []), ("metadata", [("src-a",)]), ("assign", [("src-a", 0, 4)]),
                              ("resume", [("src-a", 0, 4)])]


def test_a_slot_of_many_topics_asks_the_whole_metadata_once_not_topic_by_topic(clock, monkeypatch):
    many = {(f"t{n:02d}", 0): (0, 5) for n in range(recordloop.METADATA_ONE_BY_ONE + 1)}
    for key in many:
        monkeypatch.setitem(TARGET, key, key[0])
    task, states, faults = slot(many)
    consumer = ScriptedConsumer(clock, [])
    producer = RecordingProducer()
    loop = RecordLoop(task, consumer, producer, faults)
    loop.assign(states)
    loop.assign(states)
    assert [c for c in consumer.calls if c[0] == "metadata"] == [("metadata", [(None,)])]
    assert producer.metadata == [None]                          # the target cluster's whole metadata, once


def test_a_few_topics_metadata_is_asked_at_once_not_one_round_trip_after_the_other(clock, monkeypatch):
    """Each metadata request is a round trip to its cluster: with the source 100 ms away, ten topics one by one
    made a slot's first assign wait a second. Every request must be in flight together: the barrier lets none
    return before all arrived (one by one, the first waits in vain and breaks it)."""
    import threading

    few = {(f"t{n:02d}", 0): (0, 5) for n in range(4)}
    for key in few:
        monkeypatch.setitem(TARGET, key, key[0])
    task, states, faults = slot(few)
    in_flight = threading.Barrier(len(few), timeout=5)

    class FarConsumer(ScriptedConsumer):
        def list_topics(self, topic=None, timeout=None):
            in_flight.wait()
            super().list_topics(topic, timeout)

    consumer = FarConsumer(clock, [])
    RecordLoop(task, consumer, RecordingProducer(), faults).assign(states)
    assert sorted(c[1][0][0] for c in consumer.calls if c[0] == "metadata") == sorted(t for t, _ in few)
    assert not in_flight.broken


def test_a_chunk_of_topics_not_asked_yet_asks_their_metadata_and_a_message_of_another_chunk_is_skipped(clock):
    """A slot committing in chunks assigns one chunk at a time: a chunk's new topics are asked before its
    assign (as a slot's first assign), topics already asked are not; a record of a partition outside the
    chunk (fetched before the move) is left for its own chunk."""
    task, states, faults = slot({A: (0, 1), B: (0, 5)})
    consumer = ScriptedConsumer(clock, [[record(B, 0), record(A, 0)]])
    loop = RecordLoop(task, consumer, RecordingProducer(), faults)
    loop.assign({A: states[A]})
    loop.assign({B: states[B]})
    loop.assign({A: states[A]})
    assert [c for c in consumer.calls if c[0] == "metadata"] == [("metadata", [("src-a",)]), ("metadata", [("src-b",)])]
    assert loop.producer.metadata == [TARGET[A], TARGET[B]]     # the producer learns each chunk's target topics too
    loop.copy({A: states[A]}, 1e9, 0)
    assert (states[A].count, states[B].count) == (1, 0)


def test_partitions_still_assigned_are_resumed_and_sought_to_their_progress_not_reassigned(clock):
    """A follow round or a rewind: seek (which drops what was fetched before it) instead of unassign +
    assign, which made a follow round's first fetch wait for the fetch in flight (up to 0.5 s)."""
    task, states, faults = slot({A: (4, 9), B: (7, 7)})
    consumer = ScriptedConsumer(clock, [], assigned=[("src-a", 0), ("src-b", 0)])
    RecordLoop(task, consumer, RecordingProducer(), faults).assign(states)
    assert consumer.calls == [("resume", [("src-a", 0, 4)]), ("seek", [("src-a", 0, 4)])]
