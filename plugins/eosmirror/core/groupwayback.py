"""Group failback after a reverse, across BOTH offset maps: pure decisions (docs/failover.md, "Failback
of groups after a reverse").

After `eosmirror reverse m` (m ``reversed``), a partition of the new primary B holds two kinds of
records: below its promotion point P (``target_end`` of m's promotion record) the copies the forward
mirror m made of the old source A (m's offset syncs, kept on B); from P on, the records produced on B
after the promotion, which the reverse mirror m__reverse copies to A (its offset syncs, kept on A).
After `eosmirror resume m` (the switch back done) the forward mirror continues on B at b0 (B's end at
the resume, the target end of the resume's audit record), so B's records in [P, b0) stay in the
retired reverse mirror's map and everything from b0 on is the forward map's again. Each such stretch
is a :class:`Cycle`: [P, b0), or [P, no end) while m is ``reversed`` or ``resuming`` without its
progress moved yet; a second promotion and reverse add one more (the state record holds only the
newest cycle: the closed ones come from the audit records, ``cycles_from_audits``).

A group committed on B at X moves to A through the map that holds the record it would receive NEXT
on B. The cycle that governs X is the first whose end lies above X (none: rule 5):

  1. A partition without a promotion point while m is reversed (created on B after the promotion):
     all its records are B's own, a cycle from 0 on, so rule 2 for every X.
  2. X >= P: the reverse map, ``failover(X, m__reverse's syncs)``: the A offset where m__reverse put
     its copy of B's first record at or after X. X beyond what m__reverse copied: WAITING (run
     m__reverse first); nothing is written for that partition.
  3. X < P, but B holds no committed data record in [X, P) (only the forward mirror's commit markers or
     aborted records: a group that had read every copy): the same position as P, so rule 2 for P.
     Decided by READING B (``LogRead``), never by counting offsets: a marker and a record both take
     one offset.
  4. Otherwise the forward map below P, ``failback(X, m's syncs below P)``: the A offset of the record
     after the last one the group processed (the syncs from P on are another stretch's: a group past
     m's copies before P read records that are not copies, and is reported so).
  5. No cycle above X (every way back of the partition ended at or below X): the forward map,
     ``failback(X, m's syncs)``, the resume's sync and the copies after it.
  A cycle whose P is not recorded (a resume without the reverse audit record before it: the old
  source's state topic lost or unread) decides nothing: X on one of m's copies still moves by the
  forward map (its next record IS that copy), any other X below its end is UNRECORDED, not moved.

The old source's diverged records (A's committed records in [progress, old_source_end), which never
reached B) lie on A between the two maps. A partition moved by the reverse map while m is reversed
passes over those at or after the group's current A offset: the plan counts them from a read of A,
never from offsets (markers take offsets too), and says where they are (the side topic, when
`eosmirror reverse --divergence copy` copied them there).

``plan_group`` is the one decision of `eosmirror groups sync m --direction failback` (while m is
reversed, resuming, or mirroring after a resume) and of `eosmirror groups sync m__reverse` (its
failover while m is reversed or resuming, which the switch back's group step runs too).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Mapping

from eosmirror.core.groupfailover import (
    EXACT,
    GroupPlan,
    LogRead,
    PartitionPlan,
    Translation,
    copies_end,
    decide,
    failback,
    failover,
    is_writable,
)
from eosmirror.core.mirrorstate import PartitionPoint
from eosmirror.core.offsetsync import PartitionSyncs
from eosmirror.core.syncscan import Need, merge_needs

FORWARD_MAP, REVERSE_MAP = "forward", "reverse"
UNRECORDED = "unrecorded"     # outcome: inside a resumed way back whose promotion point is not recorded

TP = tuple[str, int]


@dataclass(frozen=True)
class Cycle:
    """One way back of a B partition: B's records in [point, end) went back to A by the reverse map.
    ``end`` None: not resumed yet (m reversed or resuming). ``point`` None: the resume's audit record
    says where it ended, but no reverse audit record before it says where it began (UNRECORDED)."""

    point: int | None
    end: int | None = None


@dataclass(frozen=True)
class PartitionMaps:
    """What one B partition's decision needs (keyed by the B topic and partition)."""

    point: PartitionPoint | None = None      # m's promotion point while reversed (None: the partition is B's own)
    forward: PartitionSyncs | None = None    # m's sync chain, on B (rules 4, 5, and where the reads of B start)
    reverse: PartitionSyncs | None = None    # m__reverse's sync chain, on A (rules 1-3)
    before_point: LogRead | None = None      # B read [end of m's copies, P) (rule 3) and after them (rule 5)
    diverged: LogRead | None = None          # A read [progress, old_source_end): the diverged records
    side: str | None = None                  # "<side topic>[k]" when the diverged records were copied there
    cycles: tuple[Cycle, ...] | None = None  # None: from ``point`` (m reversed: one cycle, from P or from 0)

    @property
    def way_backs(self) -> tuple[Cycle, ...]:
        if self.cycles is not None:
            return self.cycles
        return (Cycle(self.point.target_end if self.point is not None else 0),)             # 1


def governing(committed: int, cycles: Iterable[Cycle]) -> Cycle | None:
    """The cycle whose stretch of B holds X or lies next above it: the first whose end is above X."""
    return next((c for c in cycles if c.end is None or committed < c.end), None)


def forward_below(syncs: PartitionSyncs | None, point: int) -> PartitionSyncs | None:
    """m's syncs whose copies all lie below ``point`` on B (the stretch before that promotion)."""
    if syncs is None:
        return None
    return PartitionSyncs([s for s in syncs.ordered() if s.target_next <= point])


def on_copy(committed: int, syncs: PartitionSyncs | None) -> bool:
    """B offset X holds one of m's copies (its next record is a copy: the forward map is exact there)."""
    return syncs is not None and any(s.target_base <= committed < s.target_base + s.count for s in syncs.ordered())


def translate(committed: int, maps: PartitionMaps) -> Translation:
    """Rules 1-5 of the module doc; the translation names the map it went through (``via``)."""
    cycle = governing(committed, _ordered(maps.way_backs))
    read = maps.before_point
    if cycle is None:                                                                        # 5
        return replace(failback(committed, maps.forward, read), via=FORWARD_MAP)
    if cycle.point is None:
        if on_copy(committed, maps.forward):
            return replace(failback(committed, maps.forward), via=FORWARD_MAP)
        return Translation(UNRECORDED, records=(cycle.end - committed) if cycle.end is not None else 0)
    if committed >= cycle.point:                                                             # 1, 2
        return replace(failover(committed, maps.reverse), via=REVERSE_MAP)
    if read is not None and read.records_between(committed, cycle.point) == 0:               # 3
        return replace(failover(cycle.point, maps.reverse), via=REVERSE_MAP)
    return replace(failback(committed, forward_below(maps.forward, cycle.point), read), via=FORWARD_MAP)  # 4


def cycles_from_audits(resumes: Iterable[tuple[int, int]], reverses: Iterable[tuple[int, int]],
                       resuming: bool) -> tuple[Cycle, ...]:
    """One B partition's way backs after a resume, from the audit records (they are never compacted
    away, unlike the state record a later cycle overwrites): ``resumes`` (when, b0) from m's ``resume``
    records on B (the change's ``target_end``), ``reverses`` (when, P) from m__reverse's ``reverse``
    records on A (the change's ``new``: where its progress started). A resume closes the cycle of the
    last reverse before it (each cycle is promote, reverse, switch back, resume, in this order, so the
    times of one operator's commands order them; offsets alone cannot: a promotion right after a
    resume has P == the previous b0). ``resuming``: m's resume is under way; a reverse after the last
    resume is a cycle not closed yet."""
    revs = sorted(reverses)
    cycles: list[Cycle] = []
    last = None
    for at, end in sorted(resumes):
        began = [p for when, p in revs if when < at and (last is None or when > last)]
        cycles.append(Cycle(began[-1] if began and began[-1] <= end else None, end))
        last = at
    if resuming:
        began = [p for when, p in revs if last is None or when > last]
        if began:
            cycles.append(Cycle(began[-1]))
    return tuple(cycles)


def passed_over(translation: Translation, maps: PartitionMaps, current: int | None) -> dict | None:
    """The diverged records a reverse-map move passes over: those in [the group's current A offset (none:
    from the first), its new offset), counted in the read of A. None when it passes over none of the
    divergence (a forward-map move, a partition without a point or with nothing diverged)."""
    read = maps.diverged
    if (translation.via != REVERSE_MAP or translation.outcome != EXACT or translation.offset is None
            or maps.point is None or read is None):
        return None
    low = read.start if current is None else max(read.start, current)
    passed = [o for o in read.data_offsets if low <= o < translation.offset]
    if not passed and not read.data_offsets:
        return None
    return {"records": len(passed), "first_offset": passed[0] if passed else None,
            "last_offset": passed[-1] if passed else None, "diverged": len(read.data_offsets),
            "side_topic": maps.side}


def plan_group(group: str, state: str, committed: Mapping[TP, int], current: Mapping[TP, int],
               maps: Mapping[TP, PartitionMaps], topic_map: Mapping[str, str], allow_rewind: bool) -> GroupPlan:
    """The plan of one group read on B (``committed``, keyed by B topic) and written to A (``current``:
    its offsets there, keyed by A topic; ``topic_map``: B topic -> A topic). The rules of writing are
    the group failover's: only a group without members is written, and no partition moves backwards
    unless ``allow_rewind``."""
    plan = GroupPlan(group=group, state=state, skipped=not is_writable(state))
    for (from_topic, partition), offset in sorted(committed.items()):
        to_topic = topic_map[from_topic]
        partition_maps = maps.get((from_topic, partition), PartitionMaps())
        translation = translate(offset, partition_maps)
        now = current.get((to_topic, partition))
        decision = decide(translation, now, allow_rewind) if translation.outcome == EXACT else ""
        plan.partitions.append(PartitionPlan(
            from_topic=from_topic, to_topic=to_topic, partition=partition, committed=offset,
            outcome=translation.outcome, decision=decision, new_offset=translation.offset, current=now,
            records=translation.records, via=translation.via,
            diverged=passed_over(translation, partition_maps, now)))
    return plan


def reversed_cycles(committed: Iterable[Mapping[TP, int]], points: Mapping[TP, PartitionPoint]
                    ) -> dict[TP, tuple[Cycle, ...]]:
    """While m is reversed: per B partition a group committed on, its one open cycle (rule 1 or 2)."""
    return {tp: PartitionMaps(point=points.get(tp)).way_backs for offsets in committed for tp in offsets}


def _ordered(cycles: Iterable[Cycle]) -> list[Cycle]:
    return sorted(cycles, key=lambda c: (c.end is None, c.end or 0))


def sync_needs(committed: Iterable[Mapping[TP, int]], cycles: Mapping[TP, tuple[Cycle, ...]]
               ) -> tuple[dict[TP, Need], dict[TP, Need]]:
    """(forward needs on B, reverse needs on A): how far back each map's chains must be read. A group
    below a cycle's point may need either map (rule 3 or 4 decides after the read of B), so both; one
    in no cycle (rule 5) or in an unrecorded one, the forward map only."""
    forward, reverse = [], []
    for offsets in committed:
        for tp, offset in offsets.items():
            cycle = governing(offset, _ordered(cycles.get(tp, ())))
            if cycle is None or cycle.point is None or offset < cycle.point:
                forward.append((tp, Need(target_offset=offset)))
            if cycle is not None and cycle.point is not None:
                reverse.append((tp, Need(source_offset=max(offset, cycle.point))))
    return merge_needs(forward), merge_needs(reverse)


def before_point_ranges(committed: Iterable[Mapping[TP, int]], cycles: Mapping[TP, tuple[Cycle, ...]],
                        forward: Mapping[TP, PartitionSyncs]) -> dict[TP, tuple[int, int]]:
    """The B ranges rules 3-5 read: [end of m's copies below P, P) where a group committed in it (rules
    3, 4), [end of m's copies, X) where a group committed past them in no cycle (rule 5). One range per
    partition: groups in different stretches of one partition make it their union (rare: it reads the
    records between too)."""
    ranges: dict[TP, tuple[int, int]] = {}
    for offsets in committed:
        for tp, offset in offsets.items():
            cycle = governing(offset, _ordered(cycles.get(tp, ())))
            if cycle is not None and cycle.point is None:
                continue
            syncs = forward.get(tp) if cycle is None else forward_below(forward.get(tp), cycle.point)
            if syncs is None or not syncs.syncs:
                continue
            end = copies_end(syncs)
            if cycle is None and offset > end:
                wanted = (end, offset)
            elif cycle is not None and end <= offset < cycle.point:
                wanted = (end, cycle.point)
            else:
                continue
            low, high = ranges.get(tp, wanted)
            ranges[tp] = (min(low, wanted[0]), max(high, wanted[1]))
    return ranges


def diverged_ranges(committed: Iterable[Mapping[TP, int]], points: Mapping[TP, PartitionPoint],
                    log_starts: Mapping[TP, int]) -> dict[TP, tuple[int, int]]:
    """The A ranges holding the diverged records of the partitions groups committed on, keyed by the
    B partition: [progress (or A's log start when retention removed some since), old_source_end)."""
    wanted = {tp for offsets in committed for tp in offsets}
    ranges = {}
    for tp in sorted(wanted):
        point = points.get(tp)
        if point is None or point.progress is None or point.old_source_end is None:
            continue
        start = max(point.progress, log_starts.get((point.source_topic, point.partition), 0))
        ranges[tp] = (min(start, point.old_source_end), point.old_source_end)
    return ranges
