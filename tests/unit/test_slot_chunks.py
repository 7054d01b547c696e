"""A slot that commits its partitions in chunks (``max_partitions_per_transaction``, issue #44 item 2).

``partition_chunks`` cuts a slot's partitions; the copier then runs step 4 chunk after chunk, each
transaction carrying the records, offset syncs and progress of its own chunk's partitions only, and every
chunk at least one transaction (idle partitions' progress is committed each run). Over the scripted
fakes of tests/support/fakes.py (no brokers).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from eosmirror.slot.copier import SlotCopier
from eosmirror.slot.faults import Faults
from eosmirror.slot.slotstate import PartitionTask, SlotTask, partition_chunks
from tests.support.fakes import FENCED, SYNCS, TXN_ID, FakeIO, abortable, values


@pytest.mark.parametrize("count, most, sizes", [
    (5, 2, [2, 2, 1]), (1250, 500, [417, 417, 416]), (1250, 250, [250] * 5), (4, 4, [4]), (4, 10, [4]),
    (4, None, [4]), (4, 0, [4]), (7, 1, [1] * 7), (0, 3, []),
])
def test_chunks_are_even_consecutive_and_hold_every_partition_once(count, most, sizes):
    keys = [("t", p) for p in range(count)]
    chunks = partition_chunks(keys, most)
    assert [len(c) for c in chunks] == sizes
    assert [k for c in chunks for k in c] == keys            # every partition once, in order
    assert all(c for c in chunks) and all(len(c) <= (most or count) for c in chunks)


def chunked_task(ends: list[int], most: int | None, max_bytes: int | None = None) -> SlotTask:
    parts = tuple(PartitionTask("src", "tgt", p, start=0, end=end, had_progress=False) for p, end in enumerate(ends))
    return SlotTask(mirror="m", slot=0, transactional_id=TXN_ID, generation=1, delivery="exactly_once",
                    progress_group="eosmirror-m", partitions=parts, source_conf={}, target_conf={},
                    max_transaction_seconds=0.5, offset_sync_topic=SYNCS, max_bytes=max_bytes,
                    max_partitions_per_transaction=most)


def recording(io: FakeIO) -> list[set[int]]:
    """The partitions of every committed transaction's progress (send_offsets_to_transaction)."""
    sent: list[set[int]] = []
    send = io.producer.send_offsets_to_transaction

    def send_and_record(offsets, metadata, *timeout):
        send(offsets, metadata, *timeout)
        sent.append({tp.partition for tp in offsets})

    io.producer.send_offsets_to_transaction = send_and_record
    return sent


def test_each_transaction_carries_only_its_chunks_records_syncs_and_progress_and_every_partition_commits(clock):
    ends = [6, 0, 3, 6, 0]        # partitions 1 and 4 are idle: their progress is committed all the same
    io = FakeIO(clock, {("src", p): values(e) for p, e in enumerate(ends)}, per_consume=3)
    sent = recording(io)
    result = SlotCopier(chunked_task(ends, most=2), faults=Faults([]), io=io).run()
    assert (result.status, result.records, result.aborts) == ("committed", 15, 0)
    chunks = [{0, 1}, {2, 3}, {4}]
    # Chunk {0, 1}: two transactions (3 records each of partition 0), chunk {2, 3}: two, chunk {4}: one.
    assert sent == [{0, 1}, {0, 1}, {2, 3}, {2, 3}, {4}]
    for txn, progress in zip(io.producer.committed, sent):
        assert {p for t, p, _ in txn if t == "tgt"} <= progress          # records only of the chunk's partitions
        assert any(progress == c for c in chunks)
    for p, end in enumerate(ends):
        assert io.target.values(("tgt", p)) == values(end)                  # every record exactly once
    assert io.target.progress == {("tgt", p): end for p, end in enumerate(ends)}
    # Offset syncs: each chunk's partitions' syncs in that chunk's transactions, chained without holes.
    assert sorted((s.partition, s.source_start, s.source_end) for s in io.target.syncs()) == [
        (0, 0, 3), (0, 3, 6), (1, 0, 0), (2, 0, 3), (3, 0, 3), (3, 3, 6), (4, 0, 0)]
    # The consumer held one chunk at a time (its unfinished partitions; chunk {4} has none).
    assert io.consumer.assigned_at == [{("src", 0): 0}, {("src", 2): 0, ("src", 3): 0}, {}]


def test_a_spent_byte_budget_still_commits_every_later_chunks_progress(clock):
    ends = [6, 6, 6]
    io = FakeIO(clock, {("src", p): values(e) for p, e in enumerate(ends)}, per_consume=3)
    sent = recording(io)
    result = SlotCopier(chunked_task(ends, most=1, max_bytes=5), faults=Faults([]), io=io).run()
    assert result.status == "committed" and sent == [{0}, {1}, {2}]
    # The budget is spent by the first transaction: the later chunks commit their (unmoved) progress.
    assert io.target.progress == {("tgt", 0): 3, ("tgt", 1): 0, ("tgt", 2): 0}


def test_an_abort_in_a_later_chunk_rewinds_that_chunk_only(clock):
    ends = [3, 3]
    io = FakeIO(clock, {("src", p): values(e) for p, e in enumerate(ends)}, per_consume=3,
                fail={"commit_transaction": [None, abortable("coordinator moved")]})
    sent = recording(io)
    result = SlotCopier(chunked_task(ends, most=1), faults=Faults([]), io=io).run()
    assert (result.status, result.records, result.aborts) == ("committed", 6, 1)
    assert sent == [{0}, {1}, {1}]
    assert io.target.values(("tgt", 1), "aborted") == values(3) and io.target.values(("tgt", 1)) == values(3)
    assert io.target.values(("tgt", 0)) == values(3) and io.target.progress == {("tgt", 0): 3, ("tgt", 1): 3}
    assert io.consumer.assigned_at[-1] == {("src", 1): 0}       # rewound to chunk {1}'s committed progress


def test_unchunked_slot_commits_every_partition_in_each_transaction(clock):
    ends = [3, 0]
    io = FakeIO(clock, {("src", p): values(e) for p, e in enumerate(ends)}, per_consume=3)
    sent = recording(io)
    result = SlotCopier(chunked_task(ends, most=None), faults=Faults([]), io=io).run()
    assert result.status == "committed" and sent == [{0, 1}]


class GrowingIO(FakeIO):
    """Partition 0 of the source grows by 2 records after every committed transaction; the others stay idle."""

    def __init__(self, clock, ends, fail):
        super().__init__(clock, {("src", p): values(e) for p, e in enumerate(ends)}, per_consume=100, fail=fail)
        commit = self.producer.commit_transaction

        def commit_then_grow(*timeout):
            commit(*timeout)
            self.consumer.source[("src", 0)] = values(len(self.consumer.source[("src", 0)]) + 2)

        self.producer.commit_transaction = commit_then_grow

    def source_stable_offsets(self, partitions):
        return {k: len(self.consumer.source[k]) for k in partitions}


def test_a_chunked_slots_follow_rounds_carry_the_moved_partitions_progress_and_one_chunk_in_rotation(wall):
    # 4 chunks of one partition; 4 bounded transactions, then follow rounds until the 10th commit is fenced
    # (the next run took over): each round's progress is partition 0 (it moved) and the next chunk in turn.
    ends = [3, 0, 0, 0]
    io = GrowingIO(wall, ends, fail={"commit_transaction": [None] * 9 + [FENCED]})
    sent = recording(io)
    task = replace(chunked_task(ends, most=1), follow_until=50_000.0 + 1000.0 + 600)
    result = SlotCopier(task, faults=Faults([]), io=io).run()
    assert (result.status, result.follow_end, result.transactions) == ("handed-over", "handed-over", 9)
    assert sent == [{0}, {1}, {2}, {3}] + [{0, 1}, {0, 2}, {0, 3}, {0}, {0, 1}, {0, 2}]
    # Exactly once: 2 records arrive after every commit; by the end of the 9th, 3 + 2 * 8 are copied and
    # committed, the 2 the fenced round copied are aborted.
    assert io.target.values(("tgt", 0)) == values(19) == values(result.records)
    assert io.target.progress == {("tgt", 0): 19, ("tgt", 1): 0, ("tgt", 2): 0, ("tgt", 3): 0}


def test_an_unchunked_slots_follow_rounds_carry_every_partitions_progress(wall):
    ends = [3, 0]
    io = GrowingIO(wall, ends, fail={"commit_transaction": [None] * 3 + [FENCED]})
    sent = recording(io)
    task = replace(chunked_task(ends, most=None), follow_until=50_000.0 + 1000.0 + 600)
    result = SlotCopier(task, faults=Faults([]), io=io).run()
    assert result.status == "handed-over" and sent == [{0, 1}] * 4
