"""Consumer-group failover and failback with exact offsets: pure translation and decisions.

Failover moves a group's committed SOURCE offsets to the same group on the TARGET, failback the TARGET's back
to the SOURCE, through a partition's offset syncs (reading only the suffix ``sync_needs`` asks for). What each
committed offset becomes, and when a group is not written: docs/failover.md, "What each committed offset
becomes".
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from eosmirror.core.offsetsync import PartitionSyncs
from eosmirror.core.syncscan import Need, merge_needs

FAILOVER, FAILBACK = "failover", "failback"
DIRECTIONS = (FAILOVER, FAILBACK)

# Per partition outcomes.
EXACT = "exact"                    # translated; see the decision for write / unchanged / rewind
WAITING = "waiting"                # failover: the group is ahead of the mirror
BEFORE_RANGE = "before_range"      # the group's position precedes everything mirrored
BEYOND_MIRROR = "beyond_mirror"    # failback: the group read target records that are not copies
NOT_MIRRORED = "not_mirrored"      # no sync for the partition at all yet

WRITE, UNCHANGED, REWIND_REFUSED = "write", "unchanged", "rewind_refused"

# A group's committed offsets on one cluster, {(topic, partition): offset}; a group read for a move has two:
# (committed on the side read, current on the side written).
Offsets = dict[tuple[str, int], int]
GroupOffsets = tuple[Offsets, Offsets]

# Consumer-group states (confluent_kafka ConsumerGroupState names) in which a group has no member.
WRITABLE_STATES = ("EMPTY", "DEAD", "UNKNOWN_NOT_FOUND", "NONE")


@dataclass(frozen=True)
class Translation:
    outcome: str
    offset: int | None = None     # the translated offset when outcome is EXACT
    records: int = 0              # WAITING / BEFORE_RANGE / BEYOND_MIRROR: how many offsets it concerns
    via: str = ""                 # after a reverse: the offset map it went through (core/groupwayback.py)


def failover(committed_source: int, syncs: PartitionSyncs | None) -> Translation:
    """Where a group committed at source offset ``committed_source`` resumes on the target."""
    if syncs is None or not syncs.syncs:
        return Translation(NOT_MIRRORED)
    covered = syncs.mirrored_range()
    if covered is None:
        return Translation(NOT_MIRRORED)
    start, progress = covered
    if committed_source < start:
        return Translation(BEFORE_RANGE, records=start - committed_source)
    if committed_source > progress:
        return Translation(WAITING, records=committed_source - progress)
    return Translation(EXACT, offset=syncs.translate(committed_source))


def failover_after_way_back(committed_source: int, forward: PartitionSyncs | None,
                            reverse: PartitionSyncs | None) -> Translation:
    """Failover of a forward mirror whose source also holds its reverse mirror's copies (a way back
    ran: the old source A received the new primary B's records from the reverse mirror). A group at A
    offset Y moves through the map that holds the record it would receive NEXT on A: a reverse copy
    (the reverse mirror's syncs, kept on A: its target) goes back to that record's own B offset, exact;
    a forward copy goes by the forward map, as ``failover``. The forward map alone would send a group
    inside the reverse copies to the next forward copy on B, skipping B's own records it never read."""
    if reverse is None or not reverse.syncs:
        return failover(committed_source, forward)
    next_back = _next_copy_on_target(reverse, committed_source)
    next_forward = _next_copied_source(forward, committed_source)
    if next_back is not None and (next_forward is None or next_back < next_forward):
        return replace(failback(next_back, reverse), via="reverse")
    return replace(failover(committed_source, forward), via="forward")


def _next_copy_on_target(syncs: PartitionSyncs, offset: int) -> int | None:
    """The lowest target offset at or after ``offset`` that holds one of the mirror's copies."""
    found = [max(target, offset) for target, _, length in _copies(syncs)[1] if target + length > offset]
    return min(found) if found else None


def _next_copied_source(syncs: PartitionSyncs | None, offset: int) -> int | None:
    """The lowest source offset at or after ``offset`` that the mirror copied."""
    if syncs is None:
        return None
    found = [max(start, offset) for sync in syncs.ordered() for start, length in sync.runs if start + length > offset]
    return min(found) if found else None


@dataclass(frozen=True)
class LogRead:
    """A range of one partition read ``read_committed`` (``kafka.readers.data_offsets``): every offset
    in [``start``, ``reached``) was read, and ``data_offsets`` are those of the committed data records
    among them (ascending). Transaction markers and aborted records are not data: no consumer ever
    receives them, so two positions with only those between them are the same position."""

    start: int
    reached: int
    data_offsets: tuple[int, ...] = ()

    def records_between(self, low: int, high: int) -> int | None:
        """Committed data records in [low, high); None when the read did not cover that range."""
        if low < self.start or high > self.reached:
            return None
        return bisect.bisect_left(self.data_offsets, high) - bisect.bisect_left(self.data_offsets, low)


def copies_end(syncs: PartitionSyncs) -> int:
    """The target offset right after the mirror's last copy of the partition (the end of the mirrored
    target range; a transaction marker usually lies there)."""
    return _end(syncs, _copies(syncs)[1])


def _end(syncs: PartitionSyncs, runs: list[tuple[int, int, int]]) -> int:
    return runs[-1][0] + runs[-1][2] if runs else syncs.ordered()[-1].target_next


def _copies(syncs: PartitionSyncs) -> tuple[list[int], list[tuple[int, int, int]]]:
    """Every run of copies as (target offset of its first copy, source offset, length), target-ordered."""
    runs = []
    for sync in syncs.ordered():
        target = sync.target_base
        for start, length in sync.runs:
            runs.append((target, start, length))
            target += length
    runs.sort()
    return [r[0] for r in runs], runs


def failback(committed_target: int, syncs: PartitionSyncs | None, tail: LogRead | None = None) -> Translation:
    """Where a group committed at target offset ``committed_target`` resumes on the source. ``tail``:
    the target read after the last copy (needed only when ``committed_target`` lies past it)."""
    if syncs is None or not syncs.syncs:
        return Translation(NOT_MIRRORED)
    firsts, runs = _copies(syncs)
    target_end = _end(syncs, runs)
    if committed_target >= target_end:
        if committed_target == target_end:
            return Translation(EXACT, offset=syncs.progress)
        foreign = tail.records_between(target_end, committed_target) if tail is not None else None
        if foreign == 0:   # only markers or aborted records after the last copy: the group is caught up
            return Translation(EXACT, offset=syncs.progress)
        # unread (the log ends before the committed offset): the offsets, as no record count is known
        return Translation(BEYOND_MIRROR, records=committed_target - target_end if foreign is None else foreign)
    first_copy = runs[0][0] if runs else target_end
    if committed_target < first_copy:
        return Translation(BEFORE_RANGE, records=first_copy - committed_target)
    index = bisect.bisect_right(firsts, committed_target) - 1
    target, source, length = runs[index]
    if committed_target < target + length:
        return Translation(EXACT, offset=source + committed_target - target)
    # Between two runs on the target (records not written by this mirror): the next copy's source.
    return Translation(EXACT, offset=runs[index + 1][1])


@dataclass(frozen=True)
class PartitionPlan:
    """One partition of one group: read on one side, written (or not) on the other."""

    from_topic: str
    to_topic: str
    partition: int
    committed: int                  # the group's offset on the side it is moved from
    outcome: str                    # EXACT / WAITING / BEFORE_RANGE / BEYOND_MIRROR / NOT_MIRRORED
    decision: str = ""              # for EXACT: WRITE / UNCHANGED / REWIND_REFUSED
    new_offset: int | None = None
    current: int | None = None      # the group's offset on the side it is moved to (None: none)
    records: int = 0
    via: str = ""                   # after a reverse: "forward" or "reverse" (core/groupwayback.py)
    diverged: dict[str, Any] | None = None   # after a reverse: the old source's diverged records it passes over

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def decide(translation: Translation, current: int | None, allow_rewind: bool) -> str:
    """For an EXACT translation: write it, leave it (already there), or refuse to move backwards."""
    if current is not None and translation.offset == current:
        return UNCHANGED
    if current is not None and translation.offset is not None and translation.offset < current and not allow_rewind:
        return REWIND_REFUSED
    return WRITE


@dataclass
class GroupPlan:
    group: str
    state: str                      # the state of the group on the side written to
    skipped: bool = False           # active there: nothing is written
    partitions: list[PartitionPlan] = field(default_factory=list)

    def writes(self) -> dict[tuple[str, int], int]:
        if self.skipped:
            return {}
        return {(p.to_topic, p.partition): p.new_offset for p in self.partitions
                if p.decision == WRITE and p.new_offset is not None}

    def left(self) -> dict[str, int]:
        """Partitions not moved (neither written nor already there), by reason: the outcome, or
        REWIND_REFUSED. Empty for a skipped group (it is reported whole)."""
        reasons: dict[str, int] = {}
        if self.skipped:
            return reasons
        for p in self.partitions:
            reason = p.outcome if p.outcome != EXACT else p.decision if p.decision == REWIND_REFUSED else ""
            if reason:
                reasons[reason] = reasons.get(reason, 0) + 1
        return reasons

    def count(self, what: str) -> int:
        return sum(1 for p in self.partitions if what in (p.outcome, p.decision))

    def as_dict(self) -> dict[str, Any]:
        return {"group": self.group, "state": self.state, "skipped": self.skipped,
                "partitions": [p.as_dict() for p in self.partitions]}


def is_writable(state: str) -> bool:
    """A group may be written only while it has no member: empty, dead or not existing."""
    return state.upper() in WRITABLE_STATES


def plan_group(group: str, state: str, direction: str, committed: Mapping[tuple[str, int], int],
               current: Mapping[tuple[str, int], int], syncs: Mapping[tuple[str, int], PartitionSyncs],
               topic_map: Mapping[str, str], allow_rewind: bool,
               tails: Mapping[tuple[str, int], LogRead] | None = None,
               reverse_syncs: Mapping[tuple[str, int], PartitionSyncs] | None = None) -> GroupPlan:
    """The plan for one group.

    ``committed``: the group's offsets on the side it is moved FROM, keyed by that side's topic;
    ``current``: its offsets on the side it is moved TO; ``syncs``: keyed by (target topic, partition);
    ``topic_map``: from-side topic -> to-side topic (source -> target names for failover, the
    reverse for failback); ``tails``: failback only, the target read after the last copy, keyed
    by (target topic, partition) (``failback_tail_ranges`` says which ranges to read); ``reverse_syncs``:
    failover only, after a way back, the reverse mirror's syncs keyed by (source topic, partition)
    (``failover_after_way_back``).
    """
    plan = GroupPlan(group=group, state=state, skipped=not is_writable(state))
    tails = tails or {}
    for (from_topic, partition), offset in sorted(committed.items()):
        to_topic = topic_map[from_topic]
        if direction == FAILOVER and reverse_syncs:
            translation = failover_after_way_back(offset, syncs.get((to_topic, partition)),
                                                  reverse_syncs.get((from_topic, partition)))
        elif direction == FAILOVER:
            translation = failover(offset, syncs.get((to_topic, partition)))
        else:
            translation = failback(offset, syncs.get((from_topic, partition)), tails.get((from_topic, partition)))
        now = current.get((to_topic, partition))
        decision = decide(translation, now, allow_rewind) if translation.outcome == EXACT else ""
        plan.partitions.append(PartitionPlan(
            from_topic=from_topic, to_topic=to_topic, partition=partition, committed=offset,
            outcome=translation.outcome, decision=decision, new_offset=translation.offset, current=now,
            records=translation.records, via=translation.via))
    return plan


def backward_ranges(plans: Iterable[GroupPlan]) -> dict[tuple[str, int], tuple[int, int]]:
    """Ranges of the written side to read so that ``settle_equivalent`` can tell a real backward move
    from an equivalent position: per (to-side topic, partition), [lowest new offset, highest current)."""
    ranges: dict[tuple[str, int], tuple[int, int]] = {}
    for plan in plans:
        for p in plan.partitions:
            if p.outcome == EXACT and p.current is not None and p.new_offset is not None and p.new_offset < p.current:
                key = (p.to_topic, p.partition)
                low, high = ranges.get(key, (p.new_offset, p.current))
                ranges[key] = (min(low, p.new_offset), max(high, p.current))
    return ranges


def settle_equivalent(plans: Iterable[GroupPlan], reads: Mapping[tuple[str, int], LogRead]) -> None:
    """A backward move across no committed data record is no move: its decision becomes UNCHANGED."""
    for plan in plans:
        for i, p in enumerate(plan.partitions):
            read = reads.get((p.to_topic, p.partition))
            if (read is None or p.outcome != EXACT or p.current is None or p.new_offset is None
                    or p.new_offset >= p.current):
                continue
            if read.records_between(p.new_offset, p.current) == 0:
                plan.partitions[i] = replace(p, decision=UNCHANGED)


def failback_tail_ranges(committed: Iterable[Mapping[tuple[str, int], int]],
                         syncs: Mapping[tuple[str, int], PartitionSyncs]) -> dict[tuple[str, int], tuple[int, int]]:
    """The target ranges a failback must read: per target partition where some group committed past
    the mirror's last copy, [end of the last copy, the highest such committed offset)."""
    ranges: dict[tuple[str, int], tuple[int, int]] = {}
    for offsets in committed:
        for tp, offset in offsets.items():
            partition_syncs = syncs.get(tp)
            if partition_syncs is None or not partition_syncs.syncs:
                continue
            end = copies_end(partition_syncs)
            if offset > end:
                ranges[tp] = (end, max(offset, ranges.get(tp, (end, end))[1]))
    return ranges


def sync_needs(direction: str, committed: Iterable[Mapping[tuple[str, int], int]],
               topic_map: Mapping[str, str]) -> dict[tuple[str, int], Need]:
    """How far back each target partition's syncs must be read to plan these groups' offsets
    (``committed``: each group's offsets on the side it is moved from; keyed like ``plan_group``'s)."""
    needs = []
    for offsets in committed:
        for (from_topic, partition), offset in offsets.items():
            if direction == FAILOVER:
                needs.append(((topic_map[from_topic], partition), Need(source_offset=offset)))
            else:
                needs.append(((from_topic, partition), Need(target_offset=offset)))
    return merge_needs(needs)


def select_groups(groups: Iterable[str], include: Iterable[str], exclude: Iterable[str],
                  never: Iterable[str] = (), only: Iterable[str] = ()) -> list[str]:
    """Groups a sync moves: matching an include pattern and no exclude, never one of ``never`` (the
    mirror's own progress group); ``only`` (an operator's subset) narrows further."""
    include, exclude, never, only = list(include), list(exclude), set(never), set(only)
    chosen = []
    for group in sorted(set(groups)):
        if group in never or (only and group not in only):
            continue
        if any(re.fullmatch(p, group) for p in include) and not any(re.fullmatch(p, group) for p in exclude):
            chosen.append(group)
    return chosen
