"""Offset syncs of a mirrored log with gaps, built as the copier writes them."""

from __future__ import annotations

import random

from eosmirror.core.offsetsync import OffsetSync, PartitionSyncs, RunBuilder


def mirrored(seed: int, start: int = 0, length: int = 300, target_start: int = 0):
    """A source log [start, start+length) with gaps (markers, aborted, compacted) copied in random-sized
    transactions. Returns (syncs, copied source offsets in order, their target offsets)."""
    rng = random.Random(seed)
    copied = [o for o in range(start, start + length) if rng.random() > 0.3]
    progress, target_next, syncs = start, target_start, []
    while progress < start + length:
        end = min(start + length, progress + rng.randint(0, 50))
        runs = RunBuilder()
        for o in copied:
            if progress <= o < end:
                runs.add(o)
        sync = OffsetSync("t", 0, "t", progress, end, target_next, runs.finish())
        syncs.append(sync)
        target_next, progress = sync.target_next, end
    rng.shuffle(syncs)   # the sync topic interleaves slots and partitions
    return PartitionSyncs(syncs), copied, list(range(target_start, target_start + len(copied)))
