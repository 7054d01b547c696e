"""Reading only the offset syncs a question needs: backward chunks, coverage, chains, the snapshot."""

import pytest

from eosmirror.core import groupfailover as gs
from eosmirror.core import syncscan
from eosmirror.core.offsetsync import OffsetSync, PartitionSyncs
from eosmirror.core.syncscan import Need
from tests.support.syncs import mirrored


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
    from eosmirror.kafka.cluster import Cluster

    a, b = OffsetSync("t", 0, "s", 0, 10, 0, ((0, 10),)), OffsetSync("t", 0, "s", 5, 12, 3, ((5, 7),))
    view = syncstore.View(newest={("t", 0): b}, chains={("t", 0): [b, a]}, low=0, tail_start=40, end=50)
    monkeypatch.setattr(syncstore, "latest", lambda *args, **kwargs: view)
    with pytest.raises(ProgressUnavailableError, match=r"target: t\[0\]: offset syncs overlap"):
        syncstore.load_needed(Cluster.from_settings("target", {}), "m", "g", {("t", 0): Need(source_offset=0)})


# --- a migration/reset sync starts the partition's chain -------------------------------------------

def _reset_history():
    """Written order: a chain up to 10 (with an overlap inside it), a reset back to 4, a chain from 4."""
    a = OffsetSync("t", 0, "s", 0, 10, 0, ((0, 10),))
    clash = OffsetSync("t", 0, "s", 5, 12, 3, ((5, 7),))       # overlaps a: superseded by the reset below
    reset = OffsetSync("t", 0, "s", 4, 4, 12, (), slot=-1, moved_from=10)   # driver/migrate.py's empty sync
    c = OffsetSync("t", 0, "s", 4, 8, 12, ((4, 4),), slot=0)
    d = OffsetSync("t", 0, "s", 8, 10, 16, ((8, 2),), slot=1)
    return a, clash, reset, c, d


def test_the_last_reset_sync_starts_the_chain_and_positions_before_it_get_no_number():
    from eosmirror.core.offsetsync import BeforeBoundary, BeforeFirstSync

    a, clash, reset, c, d = _reset_history()
    chain = syncscan.check_chain([a, clash, reset, c, d], "t[0]")   # the overlaps before the reset are ignored
    assert chain == [reset, c, d]
    syncs = PartitionSyncs(chain)
    assert [syncs.translate(o) for o in (4, 6, 9, 10)] == [12, 14, 17, 18] and syncs.progress == 10
    with pytest.raises(BeforeBoundary, match="before the migration or reset this partition's offset map starts at"
                       ) as raised:
        syncs.translate(3)
    assert (raised.value.first, raised.value.target) == (4, 12) and isinstance(raised.value, BeforeFirstSync)
    assert gs.failover(3, syncs) == gs.Translation(gs.BEFORE_RANGE, records=1)
    assert gs.failover(6, syncs) == gs.Translation(gs.EXACT, offset=14)
    assert gs.failback(5, syncs).outcome == gs.BEFORE_RANGE      # a copy made before the reset
    assert gs.failback(13, syncs) == gs.Translation(gs.EXACT, offset=5)
    # A chain that starts at a cutting migration/reset sync reaches back far enough for any position.
    assert Need(source_offset=0).covered_by(chain, cut=True) and Need(target_offset=0).covered_by(chain, cut=True)
    assert syncscan.covered([a, clash, reset, c, d], Need(source_offset=0), "t[0]")
    assert syncscan.covered([reset, c, d], Need(source_offset=0), "t[0]")     # it says it moved progress back
    old_format = OffsetSync(**{**reset.__dict__, "moved_from": None})           # written before moved_from
    assert not syncscan.covered([old_format, c, d], Need(source_offset=0), "t[0]")   # unknown: read on
    assert syncscan.check_chain([a, clash, old_format, c, d], "t[0]") == [old_format, c, d]   # its predecessor tells
    # A run's empty first sync at the reset's place does not hide the boundary (the first written is kept).
    empty = OffsetSync("t", 0, "s", 4, 4, 12, (), slot=0)
    assert syncscan.check_chain([a, reset, empty, c], "t[0]")[0] is reset
    # Without a reset sync the same history still overlaps.
    with pytest.raises(syncscan.ChainError, match="overlap"):
        syncscan.check_chain([a, c, d], "t[0]")


def test_an_overlap_after_the_last_reset_is_still_refused_and_the_last_of_several_resets_wins():
    a, clash, reset, c, d = _reset_history()
    with pytest.raises(syncscan.ChainError, match="overlap"):
        syncscan.check_chain([a, reset, c, OffsetSync("t", 0, "s", 6, 9, 20, ((6, 3),))], "t[0]")
    again = OffsetSync("t", 0, "s", 2, 2, 18, (), slot=-1)
    e = OffsetSync("t", 0, "s", 2, 6, 18, ((2, 4),))
    assert syncscan.check_chain([a, clash, reset, c, d, again, e], "t[0]") == [again, e]
    assert PartitionSyncs([again, e]).translate(5) == 21
    # The newest sync is the last written, not the one ending furthest (recovery after a reset: 4, not 10).
    assert syncscan.newer(a, reset) is reset and syncscan.newer(reset, c) is c


class _Record:
    def __init__(self, offset, sync):
        self.offset, self.key, self.value = offset, sync.key(), sync.encode()


def test_the_backward_scan_stops_at_the_reset_sync_and_keeps_write_order(monkeypatch):
    """load_needed for a position before the reset: reads back only until the reset sync, and answers
    from the chain it starts (the older, overlapping chain is never read)."""
    from eosmirror.kafka import syncstore
    from eosmirror.kafka.cluster import Cluster

    a, clash, reset, c, d = _reset_history()
    filler = [OffsetSync("u", 1, "s", 10 * i, 10 * i + 10, 10 * i, ((10 * i, 10),)) for i in range(3000)]
    topic = [a, clash] + filler + [reset] + filler[:1500] + [c] + filler[:10] + [d]   # offsets = positions
    records = [_Record(i, s) for i, s in enumerate(topic)]
    read = []

    def iter_range(consumer, name, partition, start, end, cluster, timeout):
        read.append((start, end))
        return iter(records[start:end])

    view = syncstore.View(newest={("t", 0): c}, chains={("t", 0): [c, d]}, low=0, end=len(topic),
                          tail_start=len(topic) - 11)   # the snapshot's entry is c; the tail holds d
    monkeypatch.setattr(syncstore, "latest", lambda *args, **kwargs: view)
    monkeypatch.setattr(syncstore.clients, "plain_consumer", lambda *args, **kwargs: type("C", (), {
        "close": lambda self: None})())
    monkeypatch.setattr(syncstore.readers, "iter_range", iter_range)
    stats = syncstore.ReadStats()
    chains = syncstore.load_needed(Cluster.from_settings("target", {}), "m", "g", {("t", 0): Need(source_offset=0)},
                                   stats)
    assert chains[("t", 0)].ordered() == [reset, c, d]
    assert min(start for start, _ in read) > 2, read          # the chain before the reset was not read
    assert stats.backward_chunks == len(read) == 2


# --- a migration/reset that moves progress forwards is a gap, not a new chain ----------------------

def _forward_history():
    """Written order: a chain 0..10 (targets 0..9), a reset 10 -> 20 (records 10..19 skipped), a chain from 20."""
    a = OffsetSync("t", 0, "s", 0, 6, 0, ((0, 6),))
    b = OffsetSync("t", 0, "s", 6, 10, 6, ((6, 4),), slot=1)
    forward = OffsetSync("t", 0, "s", 20, 20, 10, (), slot=-1, moved_from=10)
    c = OffsetSync("t", 0, "s", 20, 25, 10, ((20, 5),))
    return a, b, forward, c


def test_a_forward_reset_keeps_the_chain_and_the_skipped_range_goes_to_the_next_copied_record():
    a, b, forward, c = _forward_history()
    written = [a, b, forward, c]
    assert syncscan.check_chain(written, "t[0]") == written and not syncscan.cuts(written)
    syncs = PartitionSyncs(syncscan.check_chain(written, "t[0]"))
    assert [syncs.translate(o) for o in range(10)] == list(range(10))           # below it: still exact
    assert {syncs.translate(o) for o in range(10, 21)} == {forward.target_base}   # skipped: the next copy
    assert [syncs.translate(o) for o in (22, 24, 25)] == [12, 14, 15] and syncs.progress == 25
    assert gs.failover(3, syncs) == gs.Translation(gs.EXACT, offset=3)
    assert gs.failover(15, syncs) == gs.Translation(gs.EXACT, offset=10)         # resumes at source 20's copy
    assert gs.failback(9, syncs) == gs.Translation(gs.EXACT, offset=9)
    assert gs.failback(10, syncs) == gs.Translation(gs.EXACT, offset=20)
    # Nothing copied after the reset yet: the skipped range goes to where the next copy will land.
    assert PartitionSyncs([a, b, forward]).translate(15) == forward.target_base
    # The scan does not stop at it while older positions are asked, and does when they are covered.
    assert not syncscan.covered([forward, c], Need(source_offset=5), "t[0]")
    assert not syncscan.covered([b, forward, c], Need(source_offset=5), "t[0]")
    assert syncscan.covered([a, b, forward, c], Need(source_offset=5), "t[0]")
    assert syncscan.covered([forward, c], Need(source_offset=20), "t[0]")
    assert not syncscan.covered([forward, c], Need(target_offset=9), "t[0]")
    # A migration onto a gap (no recorded progress before it) and a reset to the end are gaps too.
    for boundary in (OffsetSync(**{**forward.__dict__, "moved_from": None}),
                     OffsetSync("t", 0, "s", 10, 10, 10, (), slot=-1, moved_from=10)):
        assert syncscan.check_chain([a, b, boundary, c], "t[0]")[0] is a
        assert PartitionSyncs([a, b, boundary, c]).translate(7) == 7


def test_a_backward_reset_after_a_forward_one_cuts_and_a_forward_one_after_a_cut_does_not():
    from eosmirror.core.offsetsync import BeforeBoundary

    a, b, forward, c = _forward_history()
    back = OffsetSync("t", 0, "s", 15, 15, 15, (), slot=-1, moved_from=25)     # 25 -> 15: re-copies 15..
    d = OffsetSync("t", 0, "s", 15, 18, 15, ((15, 3),))
    assert syncscan.check_chain([a, b, forward, c, back, d], "t[0]") == [back, d]
    with pytest.raises(BeforeBoundary):
        PartitionSyncs([back, d]).translate(12)
    # Reset 10 -> 4 (cut), copy 4..6, then forward 6 -> 8: the chain starts at the cut, the forward one is a gap.
    reset = OffsetSync("t", 0, "s", 4, 4, 12, (), slot=-1, moved_from=10)
    e = OffsetSync("t", 0, "s", 4, 6, 12, ((4, 2),))
    ahead = OffsetSync("t", 0, "s", 8, 8, 14, (), slot=-1, moved_from=6)
    f = OffsetSync("t", 0, "s", 8, 9, 14, ((8, 1),))
    chain = syncscan.check_chain([a, b, reset, e, ahead, f], "t[0]")
    assert chain == [reset, e, ahead, f]
    syncs = PartitionSyncs(chain)
    assert [syncs.translate(o) for o in (4, 5, 6, 7, 8, 9)] == [12, 13, 14, 14, 14, 15]
    with pytest.raises(BeforeBoundary):
        syncs.translate(3)
    # An overlap after a forward reset is still refused.
    with pytest.raises(syncscan.ChainError, match="overlap"):
        syncscan.check_chain([a, b, forward, c, OffsetSync("t", 0, "s", 22, 26, 30, ((22, 4),))], "t[0]")


def _scan(monkeypatch, topic, tail, need):
    """load_needed over ``topic`` (record offset = index) with a mocked reader; the snapshot's view
    holds the last ``tail`` syncs of partition t[0]. Returns (chain in source order, chunks read)."""
    from eosmirror.kafka import syncstore
    from eosmirror.kafka.cluster import Cluster

    records = [_Record(i, s) for i, s in enumerate(topic)]
    read = []

    def iter_range(consumer, name, partition, start, end, cluster, timeout):
        read.append((start, end))
        return iter(records[start:end])

    mine = [i for i, s in enumerate(topic) if s.target_topic == "t"][-tail:]
    view = syncstore.View(newest={("t", 0): topic[mine[-1]]}, chains={("t", 0): [topic[i] for i in mine]}, low=0,
                          end=len(topic), tail_start=mine[0])
    monkeypatch.setattr(syncstore, "latest", lambda *args, **kwargs: view)
    monkeypatch.setattr(syncstore.clients, "plain_consumer", lambda *args, **kwargs: type("C", (), {
        "close": lambda self: None})())
    monkeypatch.setattr(syncstore.readers, "iter_range", iter_range)
    chains = syncstore.load_needed(Cluster.from_settings("target", {}), "m", "g", {("t", 0): need})
    return chains[("t", 0)], read


def test_the_backward_scan_reads_past_a_forward_reset_for_older_positions(monkeypatch):
    a, b, forward, c = _forward_history()
    filler = [OffsetSync("u", 1, "s", 10 * i, 10 * i + 10, 10 * i, ((10 * i, 10),)) for i in range(3000)]
    topic = [a] + filler + [b] + filler[:1500] + [forward] + filler[:10] + [c]
    found, read = _scan(monkeypatch, topic, 1, Need(source_offset=2))
    assert found.ordered() == [a, b, forward, c] and found.translate(2) == 2 and found.translate(12) == 10
    assert min(start for start, _ in read) == 0, read
    found, read = _scan(monkeypatch, topic, 1, Need(source_offset=7))          # b holds it: no need to go further
    assert found.ordered() == [b, forward, c] and found.translate(7) == 7 and min(s for s, _ in read) > 0


def test_a_boundary_sync_keeps_the_progress_it_moved_from_and_older_syncs_still_decode():
    _, _, forward, _ = _forward_history()
    assert OffsetSync.decode(forward.encode()) == forward and b'"o":10' in forward.encode()
    plain = OffsetSync("t", 0, "s", 0, 6, 0, ((0, 6),))
    assert b'"o"' not in plain.encode() and OffsetSync.decode(plain.encode()).moved_from is None
