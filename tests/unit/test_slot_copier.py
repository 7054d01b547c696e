"""SlotCopier's copy protocol against scripted fake clients (control flow only, no brokers).

The fakes (tests/support/fakes.py) model just enough of Kafka for the protocol's decisions to be
observable; their clock moves one second per ``consume()``: with ``max_transaction_seconds`` below one
second, every transaction copies exactly one consumed batch, so tests know which records each
transaction holds. Whether the real clients behave like this is the integration tests' business.
"""

from __future__ import annotations

import dataclasses

import pytest
from confluent_kafka import KafkaError

from eosmirror.core.errors import FencedError
from eosmirror.core.foreign import Accounting
from eosmirror.kafka import progress
from eosmirror.slot import targetcheck
from eosmirror.slot.copier import MAX_ABORT_ATTEMPTS, SlotCopier
from eosmirror.slot.faults import Faults
from eosmirror.slot.slotstate import SlotTask
from tests.support.fakes import SRC, TGT, TXN_ID, FakeIO, FakeProducer, Msg, abortable, kafka_error, slot_task, values


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


# --- foreign writes: the target check after fencing (targetcheck.check_foreign, core/foreign.py) --------

def accounted(io: FakeIO) -> Accounting | None:
    return Accounting.of_metadata(progress.decode_metadata(io.target.progress_meta.get(TGT)))


def test_the_progress_carries_where_the_mirrors_records_and_marker_end_on_the_target(clock):
    io = FakeIO(clock, {SRC: values(9)}, per_consume=3)
    run(io)
    # three transactions of 3 records, each followed by its commit marker: the last copy ends at 11
    assert io.target.values(TGT) == values(9) and accounted(io) == Accounting(11, 12)
    assert io.data_reads == []                      # the target always ended where expected: nothing read
    result = run(io, slot_task(end=9))
    assert result.status == "nothing-to-do" and io.data_reads == []


def test_a_record_another_producer_wrote_between_runs_stops_the_next_run_before_it_writes(clock):
    io = FakeIO(clock, {SRC: values(9)}, per_consume=3)
    run(io, slot_task(end=3))                      # records 0..2, marker 3
    io.target.append(*TGT, b"foreign", "committed")   # offset 4
    begun = io.producer.calls.count("begin_transaction")
    result = run(io, slot_task(end=9))
    assert (result.status, result.error_type) == ("failed", "ForeignWriteError")
    assert "tgt[0]: 1 foreign record(s) at offset(s) 4 (the mirror's copies end below 3" in result.error
    assert io.producer.calls.count("begin_transaction") == begun     # nothing written
    assert io.target.values(TGT) == values(3) + [b"foreign"] and io.target.progress == {TGT: 3}
    assert io.data_reads[-1] == {TGT: (3, 5)}


def test_a_killed_attempt_of_the_slot_aborted_by_the_fence_is_not_foreign(clock):
    io = FakeIO(clock, {SRC: values(9)}, per_consume=3)
    run(io, slot_task(end=3))                      # records 0..2, marker 3
    for value in values(3):                        # a later attempt wrote 3 records and was killed ...
        io.target.append(*TGT, value, "aborted")
    io.target.logs[TGT].append({"value": None, "state": "marker"})   # ... and the next fence aborted it
    result = run(io, slot_task(end=9))
    assert (result.status, result.records) == ("committed", 6) and io.target.values(TGT) == values(9)
    assert io.data_reads == [{TGT: (3, 8)}]        # read once: only markers and aborted records there
    assert [s.target_base for s in io.target.syncs()][-2:] == [8, 12]


def test_a_foreign_record_landing_before_a_transactions_first_record_stops_the_slot(clock):
    io = FakeIO(clock, {SRC: values(9)}, per_consume=3)
    io.target.foreign_at.add((*TGT, 4))            # after the first commit's marker, before the second's records
    result = run(io)
    assert (result.status, result.error_type) == ("failed", "ForeignWriteError")
    assert "offset(s) 4 " in result.error
    assert len(io.producer.committed) == 1 and len(io.producer.aborted) == 1   # the second never committed
    assert io.target.values(TGT) == values(3) + [b"foreign"] and io.target.progress == {TGT: 3}


def test_foreign_records_an_operator_accepted_are_copied_after(clock):
    io = FakeIO(clock, {SRC: values(9)}, per_consume=3)
    run(io, slot_task(end=3))
    io.target.append(*TGT, b"foreign", "committed")
    result = run(io, dataclasses.replace(slot_task(end=9), accept_foreign=True))
    assert result.status == "committed" and io.target.values(TGT) == values(3) + [b"foreign"] + values(9)[3:]
    assert accounted(io) == Accounting(12, 13)
