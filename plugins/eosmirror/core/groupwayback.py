"""Group failback after a reverse, across BOTH offset maps: pure decisions (docs/failover.md, "Failback
of groups after a reverse").

After `eosmirror reverse m` (m ``reversed``), a partition of the new primary B holds two kinds of
records: below its promotion point (``target_end`` of m's promotion record) the copies the forward
mirror m made of the old source A (m's offset syncs, kept on B); from the promotion point on, the
records produced on B after the promotion, which the reverse mirror m__reverse copies to A (its
offset syncs, kept on A). A group committed on B at X moves to A through the map that holds the
record it would receive NEXT on B:

  1. No promotion point (a topic or partition created on B after the promotion): all its records
     are B's own: the reverse map.
  2. X >= target_end: the reverse map, ``failover(X, m__reverse's syncs)``: the A offset where
     m__reverse put its copy of B's first record at or after X. X beyond what m__reverse copied:
     WAITING (run m__reverse first); nothing is written for that partition.
  3. X < target_end, but B holds no committed data record in [X, target_end) (only the forward
     mirror's commit markers or aborted records: a group that had read every copy): the same
     position as target_end, so rule 2 for target_end. Decided by READING B (``LogRead``), never by
     counting offsets: a marker and a record both take one offset.
  4. Otherwise the forward map, ``failback(X, m's syncs)``: the A offset of the record after the last
     one the group processed.

The old source's diverged records (A's committed records in [progress, old_source_end), which never
reached B) lie on A between the two maps. A partition moved by the reverse map passes over those at
or after the group's current A offset: the plan counts them from a read of A, never from offsets
(markers take offsets too), and says where they are (the side topic, when `eosmirror reverse
--divergence copy` copied them there).

``plan_group`` is the one decision of both `eosmirror groups sync m --direction failback` and
`eosmirror groups sync m__reverse` (its failover, which the switch back's group step runs too).
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

TP = tuple[str, int]


@dataclass(frozen=True)
class PartitionMaps:
    """What one B partition's decision needs (keyed by the B topic and partition)."""

    point: PartitionPoint | None = None      # m's promotion point (None: the partition is B's own)
    forward: PartitionSyncs | None = None    # m's sync chain, on B (rule 4, and where the read of rule 3 starts)
    reverse: PartitionSyncs | None = None    # m__reverse's sync chain, on A (rules 1-3)
    before_point: LogRead | None = None      # B read [end of m's copies, target_end) (rule 3)
    diverged: LogRead | None = None          # A read [progress, old_source_end): the diverged records
    side: str | None = None                  # "<side topic>[k]" when the diverged records were copied there


def translate(committed: int, maps: PartitionMaps) -> Translation:
    """Rules 1-4 of the module doc; the translation names the map it went through (``via``)."""
    point = maps.point
    if point is None or committed >= point.target_end:                                       # 1, 2
        return replace(failover(committed, maps.reverse), via=REVERSE_MAP)
    read = maps.before_point
    if read is not None and read.records_between(committed, point.target_end) == 0:          # 3
        return replace(failover(point.target_end, maps.reverse), via=REVERSE_MAP)
    return replace(failback(committed, maps.forward, read), via=FORWARD_MAP)                # 4


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


def sync_needs(committed: Iterable[Mapping[TP, int]], points: Mapping[TP, PartitionPoint]
               ) -> tuple[dict[TP, Need], dict[TP, Need]]:
    """(forward needs on B, reverse needs on A): how far back each map's chains must be read. A group
    below the promotion point may need either map (rule 3 or 4 decides after the read of B), so both."""
    forward, reverse = [], []
    for offsets in committed:
        for tp, offset in offsets.items():
            point = points.get(tp)
            if point is not None and offset < point.target_end:
                forward.append((tp, Need(target_offset=offset)))
            reverse.append((tp, Need(source_offset=offset if point is None else max(offset, point.target_end))))
    return merge_needs(forward), merge_needs(reverse)


def before_point_ranges(committed: Iterable[Mapping[TP, int]], points: Mapping[TP, PartitionPoint],
                        forward: Mapping[TP, PartitionSyncs]) -> dict[TP, tuple[int, int]]:
    """The B ranges rule 3 reads: [end of m's copies, target_end) where a group committed in it."""
    ranges: dict[TP, tuple[int, int]] = {}
    for offsets in committed:
        for tp, offset in offsets.items():
            point, syncs = points.get(tp), forward.get(tp)
            if point is None or syncs is None or not syncs.syncs:
                continue
            end = copies_end(syncs)
            if end <= offset < point.target_end:
                ranges[tp] = (end, point.target_end)
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
