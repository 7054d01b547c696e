import random

import pytest

from eosmirror.core.offsetsync import (
    OffsetSync,
    PartitionSyncs,
    RunBuilder,
    TranslationError,
    group_by_partition,
    split,
)


def test_run_builder_merges_consecutive_offsets():
    b = RunBuilder()
    for o in [3, 4, 5, 9, 10, 20]:
        b.add(o)
    assert b.finish() == ((3, 3), (9, 2), (20, 1))


def test_encode_decode_round_trip():
    sync = OffsetSync("t", 2, "s", 100, 130, 7, ((101, 3), (110, 5), (129, 1)), 3, 1, 99, "sid", "tid")
    assert OffsetSync.decode(sync.encode()) == sync


def test_split_keeps_meaning():
    runs = tuple((i * 3, 2) for i in range(10))
    sync = OffsetSync("t", 0, "s", 0, 30, 50, runs)
    parts = split(sync, max_runs=3)
    assert len(parts) == 4
    assert parts[0].source_start == 0 and parts[-1].source_end == 30
    assert all(a.source_end == b.source_start for a, b in zip(parts, parts[1:]))
    whole, chained = PartitionSyncs([sync]), PartitionSyncs(parts)
    assert [whole.translate(o) for o in range(31)] == [chained.translate(o) for o in range(31)]


def simulate(seed: int):
    """A source log with gaps (markers, aborted, compacted) copied in random-sized transactions; returns
    the syncs and the truth: source offset of each copied record -> its target offset."""
    rng = random.Random(seed)
    copied = [o for o in range(400) if rng.random() > 0.3]   # offsets that hold committed records
    progress, target_next, syncs, truth = 0, 0, [], {}
    while progress < 400:
        end = min(400, progress + rng.randint(0, 60))
        runs, count = RunBuilder(), 0
        base = target_next
        for o in copied:
            if progress <= o < end:
                runs.add(o)
                truth[o] = base + count
                count += 1
        syncs.append(OffsetSync("t", 0, "s", progress, end, base, runs.finish()))
        target_next = base + count + 1   # +1: the commit marker
        progress = end
    return syncs, truth


@pytest.mark.parametrize("seed", range(25))
def test_translate_is_exact_for_every_source_position(seed):
    syncs, truth = simulate(seed)
    history = PartitionSyncs(list(reversed(syncs)))   # read order must not matter
    copied = sorted(truth)
    for x in range(0, 401):
        target = history.translate(x)
        later = [o for o in copied if o >= x]
        if later:
            # a target consumer starting there reads exactly the copies of the records >= x
            assert target == truth[later[0]], x
        else:
            assert target > max(truth.values(), default=-1)


def test_translate_refuses_outside_the_mirrored_range():
    history = PartitionSyncs([OffsetSync("t", 0, "s", 10, 20, 0, ((10, 10),))])
    with pytest.raises(TranslationError, match="before the first mirrored offset"):
        history.translate(9)
    with pytest.raises(TranslationError, match="not copied yet"):
        history.translate(21)
    assert history.translate(20) == 10
    assert history.progress == 20 and history.mirrored_from == 10


def test_group_by_partition():
    a = OffsetSync("t", 0, "s", 0, 1, 0)
    b = OffsetSync("t", 1, "s", 0, 1, 0)
    assert set(group_by_partition([a, b])) == {("t", 0), ("t", 1)}
