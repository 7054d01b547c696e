"""One partition's verdict over records already read: the mirrored source records against their copies,
at the target offsets the offset syncs give them, and every target record no sync accounts for.
Pure: reading is the caller's (``verify``, ``verifybatch``)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, Callable

from eosmirror.core.migration import WayBackGaps
from eosmirror.core.offsetsync import PartitionSyncs
from eosmirror.kafka import readers

MAX_LISTED = 20        # foreign offsets named per partition (the count is always exact)


@dataclass
class PartitionCheck:
    source_topic: str
    target_topic: str
    partition: int
    source_range: tuple[int, int]   # mirrored source offsets [first, end) per the offset syncs; (0, 0): none
    records: int = 0                # source records compared with their copies
    differences: list[str] = field(default_factory=list)
    foreign: int = 0                # committed target records that no offset sync accounts for
    unchecked: list[str] = field(default_factory=list)   # mirrored ranges no longer readable, and why
    source_gone: int = 0            # mirrored source offsets deleted on the source since they were copied
    target_gone: int = 0            # mirrored target offsets deleted on the target since
    before_take_over: int = 0       # target records copied by the copier eosmirror took over from (migrate)
    way_back_own: int = 0           # target records that are the target cluster's own (the way back's gaps)
    way_back_skipped: int = 0       # source records the way back left out on purpose (from the other side)

    @property
    def ok(self) -> bool:
        return not self.differences

    @property
    def complete(self) -> bool:
        return not self.unchecked


def _describe(rec: readers.Record | None) -> str:
    if rec is None:
        return "missing"
    value = rec.value if rec.value is None or len(rec.value) <= 40 else rec.value[:40] + b"..."
    return f"offset {rec.offset} key={rec.key!r} value={value!r} headers={list(rec.headers)} ts={rec.timestamp}"


def settled(syncs: PartitionSyncs | None, target_end: int) -> PartitionSyncs:
    """The syncs whose copies lie wholly below ``target_end`` (a chain prefix, in source order):
    what was committed when the target's end was read. A later sync belongs to a run that committed
    after it; its records are beyond the part of the target that is read."""
    kept = []
    for sync in (syncs.ordered() if syncs is not None else []):
        if sync.target_next > target_end:
            break
        kept.append(sync)
    return PartitionSyncs(kept)


def split_foreign(target: list[readers.Record], syncs: PartitionSyncs,
                  ) -> tuple[list[readers.Record], list[readers.Record]]:
    """(records inside a range some offset sync accounts for, every other record: foreign)."""
    spans = sorted((s.target_base, s.target_next) for s in syncs.syncs if s.count)
    bases = [b for b, _ in spans]
    mirrored: list[readers.Record] = []
    foreign: list[readers.Record] = []
    for rec in target:
        i = bisect.bisect_right(bases, rec.offset) - 1
        (mirrored if i >= 0 and rec.offset < spans[i][1] else foreign).append(rec)
    return mirrored, foreign


def foreign_summary(foreign: list[readers.Record], syncs: PartitionSyncs, target_end: int) -> str:
    """One line: how many foreign records, where they lie relative to the mirrored range, which offsets."""
    spans = sorted((s.target_base, s.target_next) for s in syncs.syncs if s.count)
    listed = ", ".join(str(r.offset) for r in foreign[:MAX_LISTED])
    if len(foreign) > MAX_LISTED:
        listed += f", ... ({len(foreign) - MAX_LISTED} more)"
    if not spans:
        where = "the mirror has copied no record into this partition"
    else:
        first, last = spans[0][0], spans[-1][1]
        before = sum(1 for r in foreign if r.offset < first)
        after = sum(1 for r in foreign if r.offset >= last)
        where = (f"{before} before the first mirrored record (target offset {first}), "
                 f"{len(foreign) - before - after} between mirrored records, {after} after the last one "
                 f"(the mirrored records end at {last}, the target at {target_end})")
    return (f"{len(foreign)} record(s) on the target that no offset sync of the mirror accounts for: {where}; "
            f"target offsets {listed}. eosmirror must be the only writer of its target topics")


def _gone_on_target(check: PartitionCheck, syncs: PartitionSyncs, target_low: int) -> None:
    """Mirrored target offsets below the target's log start: deleted there (target retention)."""
    spans = sorted((s.target_base, s.target_next) for s in syncs.syncs if s.count)
    gone = sum(min(end, target_low) - base for base, end in spans if base < target_low)
    if gone:
        check.target_gone = gone
        check.unchecked.append(
            f"target offsets {spans[0][0]}..{target_low - 1} are no longer on the target (retention or "
            f"delete-records on {check.target_topic}): {gone} mirrored offsets cannot be compared")


def judge(source_topic: str, target_topic: str, partition: int, chain: PartitionSyncs, target_end: int,
          target_low: int, target: list[readers.Record],
          read_source: Callable[[int, int], tuple[int, list[readers.Record]]], max_differences: int = 10,
          compacted: bool = False, taken_over_below: int = 0, gaps: WayBackGaps = WayBackGaps()
          ) -> PartitionCheck | None:
    """The checks of one partition over records already read: ``target`` holds the target's committed
    records from ``target_low`` (its log start) to ``target_end``; ``read_source(start, end)`` gives
    (first offset of [start, end) the source still holds, its committed records from there).
    ``gaps``: the way back's ranges (``migration.way_back_gaps``): the target's own records there are
    counted, not foreign; the source records skipped there are counted, not compared."""
    mirrored, foreign = split_foreign(target, chain)
    earlier = [r for r in foreign if r.offset < taken_over_below]
    own = [r for r in foreign if r.offset >= taken_over_below and gaps.own_holds(r.offset)]
    foreign = [r for r in foreign if r.offset >= taken_over_below and not gaps.own_holds(r.offset)]
    if not chain.syncs and not foreign:
        return None
    start, end = chain.mirrored_range() or (0, 0)
    check = PartitionCheck(source_topic, target_topic, partition, (start, end), foreign=len(foreign),
                           before_take_over=len(earlier), way_back_own=len(own))

    def differ(text: str) -> None:
        if len(check.differences) < max_differences:
            check.differences.append(text)

    if foreign:
        check.differences.append(foreign_summary(foreign, chain, target_end))
        for rec in foreign[:3]:
            differ(f"foreign record {_describe(rec)}")
    if not chain.syncs:
        return check
    held, source = read_source(start, end)
    check.way_back_skipped = sum(1 for s in source if gaps.skips(s.offset))
    source = [s for s in source if not gaps.skips(s.offset)]
    if held > start:
        check.source_gone = held - start
        check.unchecked.append(
            f"source offsets {start}..{held - 1} are no longer on the source (retention or delete-records on "
            f"{source_topic}): {held - start} mirrored offsets cannot be compared")
    _gone_on_target(check, chain, target_low)
    cut = chain.translate(held)      # copies of records the source no longer holds lie below it
    mirrored = [t for t in mirrored if t.offset >= cut]
    if check.target_gone:
        source = [s for s in source if chain.translate(s.offset) >= target_low]
    check.records = len(source)
    compare = _compare_compacted if compacted else _compare_in_order
    compare(source, mirrored, chain, differ)
    return check


def _compare_in_order(source: list[readers.Record], target: list[readers.Record], syncs: Any,
                      differ: Callable[[str], None]) -> None:
    if len(source) != len(target):
        span = (f"[{source[0].offset}, {source[-1].offset}]" if source else "(none)",
                f"[{target[0].offset}, {target[-1].offset}]" if target else "(none)")
        differ(f"{len(source)} committed source records at offsets {span[0]} but {len(target)} mirrored target "
               f"records at offsets {span[1]}")
    for i in range(max(len(source), len(target))):
        s = source[i] if i < len(source) else None
        t = target[i] if i < len(target) else None
        if s is None or t is None or not s.same_content(t):
            differ(f"record #{i}: source {_describe(s)} vs target {_describe(t)}")
            continue
        expected = syncs.translate(s.offset)
        if expected != t.offset:
            differ(f"translate({s.offset}) = {expected}, but its copy is at target offset {t.offset}")


def _superseded(records: list[readers.Record], index: int) -> bool:
    """A later record with the same key exists: log compaction may legitimately drop this one."""
    key = records[index].key
    return key is not None and any(r.key == key for r in records[index + 1:])


def _compare_compacted(source: list[readers.Record], target: list[readers.Record], syncs: Any, differ: Any) -> None:
    """Both logs are compacted on their own schedules. Every record present on both sides must be
    identical at its translated offset; a record present on one side only must be superseded (a later
    record with the same key) on the other, or it was lost or duplicated."""
    by_offset = {t.offset: (i, t) for i, t in enumerate(target)}
    matched = set()
    for i, s in enumerate(source):
        hit = by_offset.get(syncs.translate(s.offset))
        if hit is not None and hit[1].same_content(s):
            matched.add(hit[1].offset)
        elif hit is not None:
            differ(f"source {_describe(s)} vs target {_describe(hit[1])}")
        elif not _superseded(source, i):
            differ(f"source {_describe(s)} has no copy on the target (and no later record with its key)")
    for j, t in enumerate(target):
        if t.offset not in matched and not _superseded(target, j):
            differ(f"target {_describe(t)} matches no source record (and no later record with its key)")
