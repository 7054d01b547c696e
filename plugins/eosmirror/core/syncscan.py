"""Reading only the offset syncs a question needs (pure half of ``kafka.syncstore``): each partition's newest
sync from the offset-sync snapshot, then a backward scan in doubling chunks that stops once every asked
partition's chain reaches the asked position (``Need.covered_by``). Such a chain is the same suffix the full
read holds, so translation stays exact. The whole design: docs/architecture.md, "Reading the offset syncs".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterator, Mapping

from eosmirror.core.offsetsync import OffsetSync, current_chain, last_cut

FIRST_CHUNK = 1_000
MAX_CHUNK = 256_000          # records per backward chunk at most (bounds the memory of one chunk)
SNAPSHOT_FORMAT = 1
MARKER_KEY = b"\0upto"       # the snapshot's marker record (a sync key is "<topic>\0<partition>")


class ChainError(ValueError):
    """A partition's syncs do not form one chain: translating through them would not be exact."""


def backward_chunks(low: int, high: int, first: int = FIRST_CHUNK, largest: int = MAX_CHUNK
                    ) -> Iterator[tuple[int, int]]:
    """Adjacent ranges [start, end) covering [low, high) from the end backwards, each twice the size
    of the previous one (up to ``largest``): a scan that stops after k chunks read < 2x what it needed."""
    end, size = high, max(1, first)
    while end > low:
        start = max(low, end - size)
        yield start, end
        end, size = start, min(largest, size * 2)


@dataclass(frozen=True)
class Need:
    """How far back a partition's chain must reach.

    ``source_offset`` (failover of a group at source offset C): a sync starting at or below C, since
    ``PartitionSyncs.translate`` looks at the last sync starting at or below C and those after it, and
    ``mirrored_from`` <= C then holds in the suffix as in the full chain.
    ``target_offset`` (failback from target offset T): a sync WITH copies whose target base is at or
    below T: ``groupfailover.failback`` looks at the last run starting at or below T and those after it.
    Neither: the newest sync only (progress recovery, fencing).
    """

    source_offset: int | None = None
    target_offset: int | None = None

    def covered_by(self, oldest_first: list[OffsetSync], cut: bool = False) -> bool:
        """``oldest_first``: the partition's chain as ``check_chain`` returns it; ``cut``: it starts at
        a migration/reset sync that moved progress backwards (``cuts``), so it is complete: nothing
        written before it is ever looked at. A boundary not known to cut (a forward move, or one whose
        predecessors are not read yet) is no reason to stop."""
        if not oldest_first:
            return False
        if cut and oldest_first[0].is_boundary:
            return True
        if self.source_offset is not None:
            return oldest_first[0].source_start <= self.source_offset
        if self.target_offset is not None:
            return any(s.count and s.target_base <= self.target_offset for s in oldest_first)
        return True

    def widen(self, other: "Need") -> "Need":
        """The need that satisfies both (several groups ask about one partition)."""
        return Need(_lowest(self.source_offset, other.source_offset), _lowest(self.target_offset,
                                                                              other.target_offset))


def _lowest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def merge_needs(needs: list[tuple[tuple[str, int], Need]]) -> dict[tuple[str, int], Need]:
    merged: dict[tuple[str, int], Need] = {}
    for tp, need in needs:
        merged[tp] = merged[tp].widen(need) if tp in merged else need
    return merged


def cuts(written_order: list[OffsetSync]) -> bool:
    """Whether these syncs (in write order) hold a migration/reset sync that cuts the chain: one that
    moved progress backwards (``offsetsync.last_cut``)."""
    return last_cut(written_order) is not None


def covered(written_order: list[OffsetSync], need: Need, where: str) -> bool:
    """Whether a partition's syncs read so far (in write order) reach back far enough for ``need``.
    Raises ChainError when they overlap."""
    return need.covered_by(check_chain(written_order, where), cut=cuts(written_order))


def check_chain(syncs: list[OffsetSync], where: str) -> list[OffsetSync]:
    """The partition's current chain in source order, without duplicates; raises ChainError if two
    of its syncs overlap.

    ``syncs`` must be in the order they were written (topic order): the chain starts at the last
    migration/reset sync that moved progress backwards (``offsetsync.current_chain``); syncs before
    it are superseded, so such a reset is no overlap. Within the chain an overlap stays an error.
    Gaps between syncs are allowed: a run with ``on_truncation: skip_to_log_start`` starts its next
    sync at the source's new log start, and a forward reset or migration skips to its position;
    nothing was copied in between. Of identical syncs (one read twice, or a run's empty first sync
    just after a migration/reset sync at the same place) the first written is kept, so the chain
    still starts with the boundary."""
    first: dict[tuple[int, int, int], OffsetSync] = {}
    for s in current_chain(syncs):
        first.setdefault((s.source_start, s.source_end, s.target_base), s)
    unique = sorted(first.values(), key=lambda s: (s.source_start, s.source_end))
    for before, after in zip(unique, unique[1:]):
        if after.source_start < before.source_end:
            raise ChainError(f"{where}: offset syncs overlap: source [{before.source_start}, {before.source_end}) "
                             f"and [{after.source_start}, {after.source_end}); only one mirror may write this "
                             f"mirror's offset-sync topic, and progress may be moved back only with `eosmirror reset` "
                             f"(whose sync starts a new chain), never by hand")
    return unique


def newer(a: OffsetSync | None, b: OffsetSync) -> OffsetSync:
    """The newer of two syncs of one partition, ``b`` written after ``a``: always ``b``.

    A partition's syncs commit one after the other (one slot owns it at a time, a migration or reset
    fences the slots first), so the last written is the newest. Comparing source ends instead is
    wrong after a reset that moved progress backwards: the older chain ends further up, and the
    reset sync (or the syncs after it) would lose to it."""
    del a
    return b


def encode_entry(sync: OffsetSync, upto: int) -> bytes:
    """A snapshot record: a partition's newest sync known when the sync topic was folded up to ``upto``."""
    return json.dumps({"v": SNAPSHOT_FORMAT, "upto": upto, "sync": sync.encode().decode()},
                      separators=(",", ":")).encode()


def encode_marker(upto: int) -> bytes:
    return json.dumps({"v": SNAPSHOT_FORMAT, "upto": upto}, separators=(",", ":")).encode()


@dataclass
class Snapshot:
    """The snapshot topic read to its end: newest sync per partition, and the marker's offset (None:
    no marker, so the entries cannot be trusted to be complete and the history is read in full)."""

    entries: dict[tuple[str, int], OffsetSync]
    upto: int | None = None

    @staticmethod
    def decode(records: list[tuple[bytes | None, bytes | None]]) -> "Snapshot":
        snapshot = Snapshot({})
        folded_upto: dict[tuple[str, int], int] = {}
        for key, value in records:
            if value is None:
                continue
            d = json.loads(value)
            if d.get("v") != SNAPSHOT_FORMAT:
                raise ValueError(f"unsupported offset-sync snapshot format {d.get('v')!r}")
            if key == MARKER_KEY:
                snapshot.upto = d["upto"]     # the last marker wins: markers only move forward
            else:
                # The entry folded furthest into the sync topic is the newest (ties: the later record).
                sync = OffsetSync.decode(d["sync"].encode())
                tp = (sync.target_topic, sync.partition)
                if d["upto"] >= folded_upto.get(tp, d["upto"]):
                    snapshot.entries[tp], folded_upto[tp] = sync, d["upto"]
        return snapshot


def changed_entries(before: Mapping[tuple[str, int], OffsetSync],
                    now: Mapping[tuple[str, int], OffsetSync]) -> list[OffsetSync]:
    """The newest syncs the snapshot lacks (only these are written again)."""
    return [sync for tp, sync in sorted(now.items()) if before.get(tp) != sync]
