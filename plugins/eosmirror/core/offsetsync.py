"""Exact source->target offset translation from offset-sync records (docs/architecture.md "How a run works", slot step 4.5).

Each copy transaction writes, per partition whose progress it moves, one ``OffsetSync`` (more when
a heavily compacted range has very many runs) to the mirror's offset-sync topic on the target, in
the same transaction as the records and the progress. A sync says: the transaction advanced the
progress from ``source_start`` to ``source_end``; the source records it copied are ``runs``
(``(first source offset, length)``, ascending) and they received consecutive target offsets from
``target_base``. Offsets of [source_start, source_end) outside the runs were markers, aborted or
compacted away: they have no copy.

Because the syncs commit atomically with the data, the chain of syncs of a partition covers the
mirrored range without holes, and ``translate`` is exact for every committed source position
(MirrorMaker 2 keeps 64 sparse syncs per partition and translates conservatively).
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field

FORMAT_VERSION = 1
MAX_RUNS_PER_RECORD = 20_000   # ~200 KB of JSON: far below the 1 MB default record limit
BOUNDARY_SLOT = -1             # the slot of the empty sync a migration or reset writes (driver/migrate.py)


class TranslationError(ValueError):
    """The source offset lies outside what the mirror has copied."""


class BeforeFirstSync(TranslationError):
    """The source offset lies below the first offset the mirror copied (``first``): its records were
    never copied by this mirror -- or, after a migration, were copied by the copier it took over from."""

    def __init__(self, message: str, first: int):
        super().__init__(message)
        self.first = first


class BeforeBoundary(BeforeFirstSync):
    """The source offset lies below the position where the migration or reset that starts the
    partition's chain (the last one that moved progress back, or the first sync of all) set the
    mirror's progress (``first``; mapped to target offset ``target``). The offset map restarts there:
    what was copied below it (by another copier, or by this mirror before a reset) has no exact
    translation, so none is given. A forward reset or migration does not restart it (``last_cut``)."""

    def __init__(self, message: str, first: int, target: int):
        super().__init__(message, first)
        self.target = target


@dataclass(frozen=True)
class OffsetSync:
    target_topic: str
    partition: int
    source_topic: str
    source_start: int
    source_end: int
    target_base: int          # target offset of the first copied record (or the target end if none)
    runs: tuple[tuple[int, int], ...] = ()
    generation: int = 0
    slot: int = 0
    created_ms: int = 0
    source_topic_id: str = ""
    target_topic_id: str = ""
    # Migration/reset syncs only: the mirror's progress before the change (None: it had none, or the
    # sync predates this field). Tells whether the boundary moved progress backwards without reading
    # the syncs written before it (``last_cut``).
    moved_from: int | None = None

    @property
    def is_boundary(self) -> bool:
        """Written by a migration or reset (never by a copy): the partition's offset map restarts here."""
        return self.slot == BOUNDARY_SLOT

    @property
    def count(self) -> int:
        return sum(length for _, length in self.runs)

    @property
    def target_next(self) -> int:
        """Target offset just after this sync's records (for an empty sync: the target end it saw)."""
        return self.target_base + self.count

    def key(self) -> bytes:
        return f"{self.target_topic}\0{self.partition}".encode()

    def encode(self) -> bytes:
        flat: list[int] = []
        previous_end = self.source_start
        for start, length in self.runs:
            flat += [start - previous_end, length]
            previous_end = start + length
        d = {
            "v": FORMAT_VERSION, "tt": self.target_topic, "p": self.partition, "st": self.source_topic,
            "s": self.source_start, "e": self.source_end, "b": self.target_base, "r": flat,
            "g": self.generation, "k": self.slot, "ms": self.created_ms,
            "sid": self.source_topic_id, "tid": self.target_topic_id,
        }
        if self.moved_from is not None:   # optional: older readers ignore it, older syncs lack it
            d["o"] = self.moved_from
        return json.dumps(d, separators=(",", ":")).encode()

    @staticmethod
    def decode(raw: bytes) -> "OffsetSync":
        d = json.loads(raw)
        if d.get("v") != FORMAT_VERSION:
            raise ValueError(f"unsupported offset-sync format version {d.get('v')!r}")
        runs, position, flat = [], d["s"], d["r"]
        for i in range(0, len(flat), 2):
            start = position + flat[i]
            runs.append((start, flat[i + 1]))
            position = start + flat[i + 1]
        return OffsetSync(target_topic=d["tt"], partition=d["p"], source_topic=d["st"], source_start=d["s"],
                          source_end=d["e"], target_base=d["b"], runs=tuple(runs), generation=d.get("g", 0),
                          slot=d.get("k", 0), created_ms=d.get("ms", 0), source_topic_id=d.get("sid", ""),
                          target_topic_id=d.get("tid", ""), moved_from=d.get("o"))


class RunBuilder:
    """Collects the source offsets a transaction copies for one partition, as runs.

    The copy loop calls ``add`` once per record; consecutive offsets extend the current run.
    """

    __slots__ = ("runs", "_start", "_length")

    def __init__(self) -> None:
        self.runs: list[tuple[int, int]] = []
        self._start = -1
        self._length = 0

    def add(self, offset: int) -> None:
        if offset == self._start + self._length:
            self._length += 1
        else:
            if self._length:
                self.runs.append((self._start, self._length))
            self._start, self._length = offset, 1

    def finish(self) -> tuple[tuple[int, int], ...]:
        if self._length:
            self.runs.append((self._start, self._length))
            self._start, self._length = -1, 0
        return tuple(self.runs)


def split(sync: OffsetSync, max_runs: int = MAX_RUNS_PER_RECORD) -> list[OffsetSync]:
    """Split a sync with very many runs into a chain of syncs with the same meaning."""
    if len(sync.runs) <= max_runs:
        return [sync]
    parts, start, base = [], sync.source_start, sync.target_base
    for i in range(0, len(sync.runs), max_runs):
        chunk = sync.runs[i:i + max_runs]
        following = sync.runs[i + max_runs][0] if i + max_runs < len(sync.runs) else sync.source_end
        parts.append(OffsetSync(**{**sync.__dict__, "source_start": start, "source_end": following,
                                   "target_base": base, "runs": tuple(chunk)}))
        start, base = following, base + sum(n for _, n in chunk)
    return parts


def last_cut(written_order: list[OffsetSync]) -> int | None:
    """Index (in ``written_order``) of the partition's last CUTTING migration/reset sync, where its
    current chain starts; None when none cuts (the chain is all of them).

    A migration/reset sync cuts when it moves progress backwards: its source position lies below the
    end of the chain written before it (10 -> 4: the syncs the mirror writes after it cover source
    offsets the older syncs cover too, on other target offsets, so a position in between would have
    two answers). One at or beyond that end (a forward reset 10 -> 20, or a migration that does not
    overlap) is only a gap in the chain: positions below it keep their exact answers, and one inside
    the skipped range translates to the next copied record (the boundary's target base), as any gap.
    Only write order can tell which boundary is last (target and source offsets repeat across
    resets). The end before a boundary is that of the syncs before it in ``written_order``; for the
    first one, which a backward read may not have reached the predecessors of, the progress it
    recorded (``moved_from``; a boundary without it, first in the list, cuts nothing known)."""
    cut, end = None, None
    for i, sync in enumerate(written_order):
        before = sync.moved_from if end is None else end
        if sync.is_boundary and before is not None and sync.source_start < before:
            cut, end = i, sync.source_end
        else:
            end = sync.source_end if end is None else max(end, sync.source_end)
    return cut


def current_chain(written_order: list[OffsetSync]) -> list[OffsetSync]:
    """The syncs from the partition's last cutting migration/reset sync on (``last_cut``; all of
    them if none cuts), given in the order they were WRITTEN to the sync topic. The cutting boundary
    supersedes everything written before it: translation and failover/failback look only at the
    chain it starts."""
    return written_order[last_cut(written_order) or 0:]


@dataclass
class PartitionSyncs:
    """The syncs of one target partition's chain; answers translation queries.

    ``syncs`` is one chain (``current_chain`` of the written syncs, as ``syncscan.check_chain``
    returns it); when it starts with a migration/reset sync, positions below that are reported as
    ``BeforeBoundary``. A migration/reset sync inside the chain (one that moved progress forwards)
    is a gap like any other."""

    syncs: list[OffsetSync] = field(default_factory=list)
    # (len(syncs) it was computed for, syncs in source order, their starts, the progress): a group
    # plan asks each partition once per group, so this is computed once; syncs are only ever appended.
    _index: tuple[int, list[OffsetSync], list[int], int | None] = field(default=(-1, [], [], None), repr=False,
                                                                         compare=False)

    def add(self, sync: OffsetSync) -> None:
        self.syncs.append(sync)

    def _indexed(self) -> tuple[int, list[OffsetSync], list[int], int | None]:
        if self._index[0] != len(self.syncs):
            # A run re-reading a range after an abort never commits, so committed syncs form one chain;
            # sorting by start makes the order independent of how the topic interleaved slots.
            ordered = sorted(self.syncs, key=lambda s: (s.source_start, s.source_end))
            self._index = (len(self.syncs), ordered, [s.source_start for s in ordered],
                           max((s.source_end for s in ordered), default=None))
        return self._index

    def ordered(self) -> list[OffsetSync]:
        return self._indexed()[1]

    @property
    def mirrored_from(self) -> int | None:
        ordered = self.ordered()
        return ordered[0].source_start if ordered else None

    @property
    def progress(self) -> int | None:
        """The progress the last committed sync left: the exact next source offset to copy."""
        return self._indexed()[3]

    def mirrored_range(self) -> tuple[int, int] | None:
        """(``mirrored_from``, ``progress``): the source offsets the chain covers; None when it is empty."""
        start, progress = self.mirrored_from, self.progress
        return None if start is None or progress is None else (start, progress)

    def translate(self, source_offset: int) -> int:
        """The target offset from which a consumer reads exactly what a source consumer at
        ``source_offset`` would read (of the mirrored records)."""
        ordered = self.ordered()
        if not ordered:
            raise TranslationError("nothing was mirrored for this partition yet")
        if source_offset < ordered[0].source_start and ordered[0].is_boundary:
            first = ordered[0]
            raise BeforeBoundary(f"source offset {source_offset} lies before the migration or reset this partition's "
                                 f"offset map starts at (it set the mirror's progress to source offset "
                                 f"{first.source_start}, target offset {first.target_base}, moving it back or "
                                 f"setting it first): no exact target offset exists for it and none is given",
                                 first.source_start, first.target_base)
        if source_offset < ordered[0].source_start:
            raise BeforeFirstSync(f"source offset {source_offset} is before the first mirrored offset "
                                  f"{ordered[0].source_start}: those records were never copied",
                                  ordered[0].source_start)
        if source_offset > ordered[-1].source_end:
            raise TranslationError(f"source offset {source_offset} is beyond the mirror's progress "
                                   f"{ordered[-1].source_end}: not copied yet")
        starts = self._indexed()[2]
        index = max(0, bisect.bisect_right(starts, source_offset) - 1)
        for i in range(index, len(ordered)):   # no slice: a long chain is not copied per query
            sync, cumulative = ordered[i], 0
            for start, length in sync.runs:
                if start + length > source_offset:
                    return sync.target_base + cumulative + max(0, source_offset - start)
                cumulative += length
        return ordered[-1].target_next  # no copied record at or after it yet: where the next will land


def group_by_partition(syncs: list[OffsetSync]) -> dict[tuple[str, int], PartitionSyncs]:
    grouped: dict[tuple[str, int], PartitionSyncs] = {}
    for sync in syncs:
        grouped.setdefault((sync.target_topic, sync.partition), PartitionSyncs()).add(sync)
    return grouped
