"""Reading only the offset syncs a question needs: backward chunks, coverage, chains, the snapshot."""

import pytest

from eosmirror.core import groupsync as gs
from eosmirror.core import syncscan
from eosmirror.core.offsetsync import OffsetSync, PartitionSyncs
from eosmirror.core.syncscan import Need
from tests.unit.test_groupsync import mirrored


def test_backward_chunks_cover_the_range_from_the_end_adjacently_and_double():
    chunks = list(syncscan.backward_chunks(0, 10_000, first=1000))
    assert chunks == [(9000, 10_000), (7000, 9000), (3000, 7000), (0, 3000)]
    assert list(syncscan.backward_chunks(5, 5)) == []
    assert list(syncscan.backward_chunks(100, 150, first=1000)) == [(100, 150)]


def test_backward_chunks_stop_growing_at_the_largest_size():
    sizes = [end - start for start, end in syncscan.backward_chunks(0, 10_000_000, first=1000, largest=64_000)]
    assert sizes[:7] == [1000, 2000, 4000, 8000, 16_000, 32_000, 64_000]
    assert set(sizes[7:-1]) == {64_000} and sum(sizes) == 10_000_000


@pytest.mark.parametrize("seed", range(12))
def test_a_covering_suffix_translates_every_later_position_exactly_as_the_whole_history(seed):
    """The invariant the backward reader relies on: read back until Need.covered_by, then translate."""
    full, copied, targets = mirrored(seed, start=50, target_start=7)
    ordered = full.ordered()
    for committed in range(40, 360, 7):
        need = Need(source_offset=committed)
        suffix = next(ordered[i:] for i in range(len(ordered) - 1, -1, -1) if need.covered_by(ordered[i:])
                      ) if committed >= 50 else ordered   # before the start: the reader reaches the topic's start
        assert gs.failover(committed, PartitionSyncs(list(suffix))) == gs.failover(committed, full), committed
    for committed_target in range(0, targets[-1] + 5, 3):
        need = Need(target_offset=committed_target)
        covering = [i for i in range(len(ordered)) if need.covered_by(ordered[i:])]
        suffix = ordered[max(covering):] if covering else ordered
        assert gs.failback(committed_target, PartitionSyncs(list(suffix))) == gs.failback(committed_target, full)


def test_coverage_of_each_kind_of_need():
    a = OffsetSync("t", 0, "s", 0, 10, 0, ((0, 10),))
    b = OffsetSync("t", 0, "s", 10, 20, 10, ())                # nothing copied: no run to fail back to
    c = OffsetSync("t", 0, "s", 20, 30, 10, ((25, 5),))
    assert Need().covered_by([c]) and not Need().covered_by([])
    assert Need(source_offset=20).covered_by([c]) and not Need(source_offset=19).covered_by([c])
    assert Need(source_offset=12).covered_by([b, c])
    assert not Need(target_offset=10).covered_by([b]) and Need(target_offset=10).covered_by([c])
    assert not Need(target_offset=9).covered_by([b, c]) and Need(target_offset=9).covered_by([a, b, c])


def test_needs_of_several_groups_on_one_partition_merge_to_the_lowest_position():
    merged = syncscan.merge_needs([(("t", 0), Need(source_offset=9)), (("t", 0), Need(source_offset=4)),
                                   (("t", 1), Need())])
    assert merged == {("t", 0): Need(source_offset=4), ("t", 1): Need()}
    committed = [{("s", 0): 9, ("s", 1): 3}, {("s", 0): 2}]
    assert gs.sync_needs(gs.FAILOVER, committed, {"s": "t"}) == {("t", 0): Need(source_offset=2),
                                                                  ("t", 1): Need(source_offset=3)}
    assert gs.sync_needs(gs.FAILBACK, [{("t", 0): 5}], {"t": "s"}) == {("t", 0): Need(target_offset=5)}


def test_check_chain_orders_drops_duplicates_allows_gaps_and_refuses_overlaps():
    a = OffsetSync("t", 0, "s", 0, 10, 0, ((0, 10),))
    b = OffsetSync("t", 0, "s", 15, 20, 10, ((15, 5),))       # a gap: skip_to_log_start
    assert syncscan.check_chain([b, a, b], "t[0]") == [a, b]
    with pytest.raises(syncscan.ChainError, match="overlap"):
        syncscan.check_chain([a, OffsetSync("t", 0, "s", 5, 12, 3, ())], "t[0]")


def test_snapshot_keeps_the_newest_entry_per_partition_and_the_last_marker():
    old, new = OffsetSync("t", 0, "s", 0, 10, 0, ((0, 10),)), OffsetSync("t", 0, "s", 10, 20, 10, ((10, 10),))
    other = OffsetSync("u", 3, "s", 0, 5, 0, ((0, 5),))
    records = [(new.key(), syncscan.encode_entry(new, 7)), (old.key(), syncscan.encode_entry(old, 3)),
               (syncscan.MARKER_KEY, syncscan.encode_marker(3)), (other.key(), syncscan.encode_entry(other, 9)),
               (syncscan.MARKER_KEY, syncscan.encode_marker(9)), (b"x", None)]
    snapshot = syncscan.Snapshot.decode(records)
    assert snapshot.entries == {("t", 0): new, ("u", 3): other} and snapshot.upto == 9
    assert syncscan.Snapshot.decode([(new.key(), syncscan.encode_entry(new, 7))]).upto is None
    assert syncscan.changed_entries({("t", 0): old, ("u", 3): other}, {("t", 0): new, ("u", 3): other}) == [new]


def test_an_overlap_found_while_deciding_how_far_back_to_read_is_reported_not_raised_raw(monkeypatch):
    """load_needed checks the chains before the backward scan reads anything: an overlap there is a
    ProgressUnavailableError naming the cluster and partition, like one found after the scan."""
    from eosmirror.core.errors import ProgressUnavailableError
    from eosmirror.kafka import syncstore

    a, b = OffsetSync("t", 0, "s", 0, 10, 0, ((0, 10),)), OffsetSync("t", 0, "s", 5, 12, 3, ((5, 7),))
    view = syncstore.View(newest={("t", 0): b}, chains={("t", 0): [b, a]}, low=0, tail_start=40, end=50)
    monkeypatch.setattr(syncstore, "latest", lambda *args, **kwargs: view)
    with pytest.raises(ProgressUnavailableError, match=r"target: t\[0\]: offset syncs overlap"):
        syncstore.load_needed({}, "m", "target", "g", {("t", 0): Need(source_offset=0)})
