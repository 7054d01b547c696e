"""Group failback after a reverse (and after the resume): the reads its decisions need (decisions:
``core/groupwayback.py``; docs/failover.md, "Failback of groups after a reverse").

A mirror m that is ``reversed`` has two exact offset maps: its own (copies of the old source A on the
new primary B, its offset syncs on B) and its reverse mirror's (B's records produced after the
promotion, copied to A, m__reverse's offset syncs on A). Both `eosmirror groups sync m --direction
failback` and `eosmirror groups sync m__reverse` (failover) read B's groups and write them to A
through ``plan``: the same reads, the same decision function, the same writer (m's group writer id and
m's failback checkpoints topic on A), so either command gives the same outcome.

After a resume (m ``mirroring``, promoted or reversed again) and while it is ``resuming``, B's records
of each earlier way back stay in m__reverse's map: those cycles come from the audit records (m's
``resume`` on B, m__reverse's ``reverse`` on A), since the state record holds only the newest cycle.
m__reverse's failover takes the way back only while m is reversed or resuming; m's failback always.

Reads, in order (each only where a group's position needs it):
  1. m's state on B: the promotion points (``target_end``, ``progress``, ``old_source_end``) while
     reversed; m's audit records on B and, when one is a ``resume`` (or m is resuming), m__reverse's on A;
  2. the sync chains: m's on B for positions below a promotion point, m__reverse's on A for the rest
     (and for the promotion point itself);
  3. B read_committed over [end of m's copies, P) where a group committed in it (rules 3, 4), and
     after m's copies where a group committed past them after every way back (rule 5);
  4. A read_committed over [progress, old_source_end): the diverged records (counted, not offsets);
  5. the side topics on B: the diverged records are said to be there only when the side partition holds
     exactly as many committed records.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from eosmirror.core import groupfailover, naming
from eosmirror.core import groupwayback as rules
from eosmirror.core.checkpoints import checkpoints_topic
from eosmirror.core.config import MirrorConfig, ReverseMirrorConfig
from eosmirror.core.mirrorstate import MirrorState, PartitionPoint, Phase
from eosmirror.driver import topics
from eosmirror.kafka import offsets, readers, state, syncstore
from eosmirror.kafka.cluster import Cluster

log = logging.getLogger(__name__)

TP = tuple[str, int]


@dataclass
class WayBack:
    forward: MirrorConfig        # m: its groups section, progress group and group writer apply
    reverse: MirrorConfig        # m__reverse
    state: MirrorState           # m's state record (``reversed``), with the promotion points
    new: Cluster                 # B, the new primary: the groups are read here
    old: Cluster                 # A, the old source: the groups are written here
    topic_map: dict[str, str]    # B topic -> A topic (the reverse mirror's resolution on B)
    partitions: dict[str, int]   # B topic -> partition count
    cycles: dict[TP, tuple[rules.Cycle, ...]] = field(default_factory=dict)   # from the audit records

    @property
    def points(self) -> dict[TP, PartitionPoint]:
        """The promotion points of the cycle under way (only while reversed: the resume's record holds others)."""
        if self.state.phase is not Phase.REVERSED:
            return {}
        return {(p.target_topic, p.partition): p for p in self.state.points}

    def cycles_of(self, committed_all: list[groupfailover.Offsets]) -> dict[TP, tuple[rules.Cycle, ...]]:
        """Per B partition a group committed on: the way backs resumes closed, then, while reversed, the
        one under way (from the promotion point, or from 0 on a partition created on B after it)."""
        under_way = rules.reversed_cycles(committed_all, self.points) if self.state.phase is Phase.REVERSED else {}
        return {tp: self.cycles.get(tp, ()) + under_way.get(tp, ()) for offsets_ in committed_all for tp in offsets_}

    @property
    def checkpoints_topic(self) -> str:
        """m's failback checkpoints topic on A (``<target alias>.checkpoints.internal``), whichever command."""
        return checkpoints_topic(naming.cluster_alias(self.forward.target_alias, "target"))

    def as_dict(self) -> dict[str, Any]:
        return {"forward": self.forward.name, "reverse": self.reverse.name, "state": self.state.describe(),
                "promotion": self.state.note.split(";")[0] if self.state.phase is Phase.REVERSED else
                f"{sum(len(c) for c in self.cycles.values())} way back(s) recorded"}


def find(mirror: MirrorConfig, direction: str) -> WayBack | None:
    """The way back, when it applies: a failback of an identity mirror that is ``reversed`` or
    ``resuming`` or was resumed before (a ``resume`` audit record), or a failover of its reverse mirror
    while it is reversed or resuming. None: the move uses the mirror's own map alone. The way backs that
    resumes closed come from the audit records in every state (reversed a second time too)."""
    if direction == groupfailover.FAILOVER and isinstance(mirror, ReverseMirrorConfig) and mirror.forward:
        forward = mirror.forward
    elif (direction == groupfailover.FAILBACK and mirror.replication_policy == "identity"
          and not naming.forward_mirror_name(mirror.name)):
        forward = mirror
    else:
        return None
    new = Cluster.resolve("target", forward.target, forward.name)
    current = state.read_mirror_state(new, forward.name, forward.progress_group)
    if current.phase is not Phase.REVERSED and (
            current.phase is not Phase.RESUMING and direction == groupfailover.FAILOVER):
        return None
    old = Cluster.resolve("source", forward.source, forward.name)
    back = forward.reverse()
    # The way backs a resume closed (also while reversed again: a second cycle keeps the first's stretch).
    resumes = [r for r in state.read_audit(new, forward.name, forward.progress_group) if r.action == "resume"]
    if not resumes and current.phase not in (Phase.REVERSED, Phase.RESUMING):
        return None                         # never resumed: no way back left anything on B
    reverses = ([r for r in state.read_audit(old, back.name, back.progress_group) if r.action == "reverse"]
                if resumes or current.phase is Phase.RESUMING else [])
    pairs = topics.resolve(back, new)
    return WayBack(forward, back, current, new, old, {p.source: p.target for p in pairs},
                   {p.source: p.partitions for p in pairs}, _cycles(resumes, reverses, current.phase is Phase.RESUMING))


def _cycles(resumes: list[Any], reverses: list[Any], resuming: bool) -> dict[TP, tuple[rules.Cycle, ...]]:
    """Per B partition its way backs (``rules.cycles_from_audits``): the resume's change is keyed by its
    target (B) partition, the reverse's by its source (B) partition."""
    ends: dict[TP, list[tuple[int, int]]] = {}
    starts: dict[TP, list[tuple[int, int]]] = {}
    for record in resumes:
        for c in record.partitions:
            ends.setdefault((c.target_topic, c.partition), []).append((record.at_ms, c.target_end))
    for record in reverses:
        for c in record.partitions:
            starts.setdefault((c.source_topic, c.partition), []).append((record.at_ms, c.new))
    return {tp: rules.cycles_from_audits(ends.get(tp, []), starts.get(tp, []), resuming)
            for tp in set(ends) | set(starts)}


def settle(way: WayBack, stuck_seconds: float, bound_seconds: float) -> None:
    """Right after a run of m__reverse its commit markers may still be landing on A (issue #44): wait
    while they do, on A's partitions and m__reverse's sync topic, before reading them read_committed.
    B needs no wait while m is fenced (reversed or resuming: what the decisions read of B lies below the
    promotion point); once m copies again (after the resume) its markers may be landing on B: wait there too."""
    on_old = [(way.topic_map[t], k) for t, n in way.partitions.items() for k in range(n)]
    offsets.settle_ends(way.old, on_old + [(naming.offset_sync_topic(way.reverse.name), 0)], stuck_seconds,
                        bound_seconds, "the old source's end")
    if way.state.phase not in (Phase.REVERSED, Phase.RESUMING):
        on_new = [(t, k) for t, n in way.partitions.items() for k in range(n)]
        offsets.settle_ends(way.new, on_new + [(naming.offset_sync_topic(way.forward.name), 0)], stuck_seconds,
                            bound_seconds, "the target's end")


def plan(way: WayBack, group_offsets: dict[str, groupfailover.GroupOffsets], states: dict[str, str],
         allow_rewind: bool) -> list[groupfailover.GroupPlan]:
    """The plans of the groups whose offsets were read: {group: (committed on B, current on A)}."""
    committed_all = [committed for committed, _ in group_offsets.values() if committed]
    points = way.points
    cycles = way.cycles_of(committed_all)
    forward_needs, reverse_needs = rules.sync_needs(committed_all, cycles)                          # 2
    forward = (syncstore.load_needed(way.new, way.forward.name, way.forward.progress_group, forward_needs)
               if forward_needs else {})
    on_old = {(way.topic_map[t], k): need for (t, k), need in reverse_needs.items()}
    reverse = (syncstore.load_needed(way.old, way.reverse.name, way.reverse.progress_group, on_old)
               if on_old else {})
    before = _data(way.new, rules.before_point_ranges(committed_all, cycles, forward),                 # 3
                   way.forward.progress_group)
    diverged = _diverged(way, committed_all, points)                                                 # 4
    sides = _sides_copied(way, diverged)                                                             # 5
    maps = {tp: rules.PartitionMaps(point=points.get(tp), forward=forward.get(tp),
                                    reverse=reverse.get((way.topic_map[tp[0]], tp[1])),
                                    before_point=before.get(tp), diverged=diverged.get(tp), side=sides.get(tp),
                                    cycles=cycles.get(tp, ()))
            for offsets_ in committed_all for tp in offsets_}
    return [rules.plan_group(group, states.get(group, "DEAD"), committed, current, maps, way.topic_map, allow_rewind)
            for group, (committed, current) in group_offsets.items() if committed]


def _data(cluster: Cluster, ranges: dict[TP, tuple[int, int]], group: str) -> dict[TP, groupfailover.LogRead]:
    return readers.log_reads(cluster, ranges, "eosmirror-groups-way-back", group)


def _diverged(way: WayBack, committed_all: list[groupfailover.Offsets], points: dict[TP, PartitionPoint]
              ) -> dict[TP, groupfailover.LogRead]:
    """Step 4, keyed by the B partition: the committed records of A in [progress, old_source_end)."""
    from confluent_kafka.admin import OffsetSpec

    wanted = [points[tp] for tp in {tp for c in committed_all for tp in c} if tp in points]
    if not wanted:
        return {}
    starts = offsets.list_offsets_of(way.old, {(p.source_topic, p.partition): OffsetSpec.earliest() for p in wanted})
    ranges = rules.diverged_ranges(committed_all, points, starts)
    on_old = {(points[tp].source_topic, tp[1]): rng for tp, rng in ranges.items()}
    read = _data(way.old, on_old, way.reverse.progress_group)
    return {tp: read[(points[tp].source_topic, tp[1])] for tp in ranges}


def _sides_copied(way: WayBack, diverged: dict[TP, groupfailover.LogRead]) -> dict[TP, str]:
    """Step 5: ``<side topic>[k]`` per B partition whose diverged records were copied there (the side
    partition holds exactly as many committed records; the copy is one transaction: all or none)."""
    from confluent_kafka.admin import OffsetSpec

    with_records = {tp: read for tp, read in diverged.items() if read.data_offsets}
    if not with_records:
        return {}
    existing = set(topics.list_topic_names(way.new))
    side_of = {tp: (naming.diverged_topic(way.points[tp].source_topic, way.forward.name), tp[1])
               for tp in with_records}
    side_of = {tp: side for tp, side in side_of.items() if side[0] in existing}
    if not side_of:
        return {}
    low = offsets.list_offsets_of(way.new, {s: OffsetSpec.earliest() for s in side_of.values()})
    high = offsets.list_offsets_of(way.new, {s: OffsetSpec.latest() for s in side_of.values()})
    held = _data(way.new, {s: (low[s], high[s]) for s in side_of.values()}, way.forward.progress_group)
    return {tp: f"{side[0]}[{side[1]}]" for tp, side in side_of.items()
            if side in held and len(held[side].data_offsets) == len(with_records[tp].data_offsets)}
