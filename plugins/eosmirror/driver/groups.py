"""Consumer-group failover and failback for one mirror: plan, then write (``eosmirror groups``, the
``eosmirror_groups__<mirror>`` DAG).

failover  source groups -> target groups: committed source offsets, translated through the mirror's
          offset syncs, written to the same group ids on the target
failback  target groups -> source groups: the inverse, after consumers ran on the target

The decisions are ``core.groupfailover`` (pure); this module reads the inputs and writes the outcome:
per group ONE transaction on the written cluster carrying the group's new offsets and the MirrorMaker 2
checkpoint records of exactly those offsets (``<alias>.checkpoints.internal``). A dry run writes nothing.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

from eosmirror.core import groupfailover, naming
from eosmirror.core.checkpoints import Checkpoint, checkpoints_topic
from eosmirror.core.config import GroupSettings, MirrorConfig, own_groups
from eosmirror.core.errors import EXIT_FAILED, EXIT_GROUPS_LEFT, EXIT_OK, ConfigError, EosMirrorError
from eosmirror.core.groupfailover import GroupOffsets
from eosmirror.core.offsetsync import PartitionSyncs
from eosmirror.core.syncscan import Need
from eosmirror.driver import acls, groupwayback, minimums, topics
from eosmirror.driver.observe import progress_settle_seconds, settle_bound_seconds
from eosmirror.kafka import groups as kafka_groups
from eosmirror.kafka import offsets as kafka_offsets
from eosmirror.kafka import readers, syncstore
from eosmirror.kafka.cluster import Cluster

log = logging.getLogger(__name__)

READ_PARALLELISM = 8

# Reads the syncs the given needs ask for (``syncstore.load_needed`` on the mirror's target).
SyncLoader = Callable[[dict[tuple[str, int], Need]], dict[tuple[str, int], PartitionSyncs]]
# Reads ranges of one side read_committed (``readers.data_offsets``): the target after the mirror's
# last copies (failback), the written side between a new offset and a group's higher current one.
LogReader = Callable[[dict[tuple[str, int], tuple[int, int]]], dict[tuple[str, int], groupfailover.LogRead]]


@dataclass(frozen=True)
class GroupMoveOptions:
    direction: str = groupfailover.FAILOVER
    dry_run: bool = False
    allow_rewind: bool | None = None      # None: the mirror's `groups.allow_rewind`
    groups: tuple[str, ...] = ()          # only these groups (still filtered by include/exclude)

    def check(self, mirror: MirrorConfig) -> None:
        if self.direction not in groupfailover.DIRECTIONS:
            raise ConfigError(f"mirror {mirror.name!r}: direction {self.direction!r} is not allowed; expected "
                              f"{' or '.join(groupfailover.DIRECTIONS)}")


@dataclass
class _Sides:
    """Which cluster a direction reads groups from and writes them to, and the topic names on each."""

    read: Cluster
    write: Cluster
    topic_map: dict[str, str]                   # read-side topic -> write-side topic
    partitions: dict[str, int]                  # read-side topic -> partition count
    checkpoints_topic: str


def _sides(mirror: MirrorConfig, direction: str, source: Cluster, target: Cluster) -> _Sides:
    pairs = topics.resolve(mirror, source)
    if direction == groupfailover.FAILOVER:
        return _Sides(source, target, {p.source: p.target for p in pairs}, {p.source: p.partitions for p in pairs},
                      checkpoints_topic(naming.cluster_alias(mirror.source_alias, "source")))
    return _Sides(target, source, {p.target: p.source for p in pairs}, {p.target: p.partitions for p in pairs},
                  checkpoints_topic(naming.cluster_alias(mirror.target_alias, "target")))


def _checkpoints(plan: groupfailover.GroupPlan) -> list[Checkpoint]:
    """MM2 checkpoints of the written partitions (``plan.writes()``): downstream = the written side's topic and
    offset."""
    return [Checkpoint(plan.group, p.to_topic, p.partition, upstream_offset=p.committed,
                       downstream_offset=p.new_offset, metadata="")
            for p in plan.partitions if p.decision == groupfailover.WRITE and p.new_offset is not None]


# Plans groups whose offsets were read: ({group: (committed on the read side, current on the written
# side)}, {group: state on the written side}) -> plans.
Planner = Callable[[dict[str, GroupOffsets], dict[str, str]], list[groupfailover.GroupPlan]]


def plan_groups(owner: MirrorConfig, options: GroupMoveOptions, sides: _Sides, planner: Planner,
                never: tuple[str, ...]) -> tuple[list[groupfailover.GroupPlan], list[str]]:
    """One plan per selected group with committed offsets on a mirrored topic; and the asked-for
    groups (``options.groups``) that are not there. ``owner``: the mirror whose `groups` section
    selects (the forward mirror on the way back); ``never``: the mirrors' own progress groups.
    The groups' offsets are read first, so that the planner reads only the syncs their positions need
    (``groupfailover.sync_needs``)."""
    settings = owner.groups or GroupSettings()
    existing = kafka_groups.list_groups(sides.read)
    selected = groupfailover.select_groups(existing, settings.include, settings.exclude,
                                       never=never, only=options.groups)
    missing = sorted(set(options.groups) - set(selected))
    read_partitions = [(t, p) for t, n in sides.partitions.items() for p in range(n)]
    states = kafka_groups.group_states(sides.write, selected, to_write=not options.dry_run)

    def offsets_of(group: str) -> GroupOffsets:
        committed = kafka_groups.committed(sides.read, group, read_partitions)
        # a group that reads no mirrored topic has nothing to move: its other side is not asked; else
        # only for the partitions it committed (an OffsetFetch costs by the partitions it names), the only
        # ones its plan compares
        written = [(sides.topic_map[t], p) for t, p in committed]
        return committed, (kafka_groups.committed(sides.write, group, written) if committed else {})

    # Each read is a consumer of that group (group.id is fixed per client), so most of the time is
    # coordinator round trips: a few groups are read at once.
    with concurrent.futures.ThreadPoolExecutor(max_workers=READ_PARALLELISM) as pool:
        offsets = dict(zip(selected, pool.map(offsets_of, selected)))
    return planner(offsets, states), missing


def plan_offsets(offsets: dict[str, GroupOffsets], states: dict[str, str], direction: str,
                 topic_map: dict[str, str], load_syncs: SyncLoader, allow_rewind: bool,
                 read_sides: tuple[LogReader, LogReader] | None = None,
                 load_reverse_syncs: SyncLoader | None = None) -> list[groupfailover.GroupPlan]:
    """The plans of groups whose offsets were read: {group: (committed on the from side, current on the to side)}.
    The benchmark times this step (the part whose cost could grow with the sync history).

    ``read_sides``: readers of the (from, to) sides. Failback reads the target after the mirror's last
    copy wherever a group committed past it (one read per partition up to the furthest group): a group
    that read to the end committed past the last transaction marker, and only reading tells a marker
    from a record. Then the written side is read wherever a new offset lies below a group's current
    one, so that a move across markers only is no move (``groupfailover.settle_equivalent``)."""
    committed_all = [committed for committed, _ in offsets.values()]
    needs = groupfailover.sync_needs(direction, committed_all, topic_map)
    syncs = load_syncs(needs) if needs else {}
    read_from, read_to = read_sides if read_sides is not None else (None, None)
    tails = {}
    if direction == groupfailover.FAILBACK and read_from is not None:
        ranges = groupfailover.failback_tail_ranges(committed_all, syncs)
        tails = read_from(ranges) if ranges else {}
    # After a way back the source also holds the reverse mirror's copies: a failover reads its syncs
    # too (keyed by the source topic: the reverse mirror's target), for the groups positioned there.
    back = (load_reverse_syncs(groupfailover.sync_needs(groupfailover.FAILBACK, committed_all,
                                                        {t: t for t in topic_map}))
            if direction == groupfailover.FAILOVER and load_reverse_syncs is not None and committed_all else None)
    plans = [groupfailover.plan_group(group, states.get(group, "DEAD"), direction, committed, current,
                                  syncs, topic_map, allow_rewind, tails, back)
             for group, (committed, current) in offsets.items() if committed]
    return settle_backward(plans, read_to)


def settle_backward(plans: list[groupfailover.GroupPlan], read_to: LogReader | None) -> list[groupfailover.GroupPlan]:
    """The written side read wherever a new offset lies below a group's current one: a move across
    markers only is no move (``groupfailover.settle_equivalent``)."""
    backward = groupfailover.backward_ranges(plans)
    if backward and read_to is not None:
        groupfailover.settle_equivalent(plans, read_to(backward))
    return plans


def move_groups(mirror: MirrorConfig, options: GroupMoveOptions) -> dict[str, Any]:
    """Plan every selected group and (unless a dry run) write the writable ones. Returns the report.
    After a reverse, a failback of the forward mirror and a failover of its reverse mirror are the same
    move through both offset maps (``driver/groupwayback.py``)."""
    options.check(mirror)
    started = time.monotonic()
    way = groupwayback.find(mirror, options.direction)
    owner = way.forward if way is not None else mirror
    allow_rewind = options.allow_rewind if options.allow_rewind is not None else bool(
        owner.groups and owner.groups.allow_rewind)
    if way is None:
        sides, planner = _own_map(mirror, options.direction, allow_rewind)
        never = own_groups(mirror)
    else:
        sides = _Sides(way.new, way.old, way.topic_map, way.partitions, way.checkpoints_topic)
        groupwayback.settle(way, progress_settle_seconds(), settle_bound_seconds(way.reverse))

        def planner(offsets: dict[str, GroupOffsets], states: dict[str, str]) -> list[groupfailover.GroupPlan]:
            return settle_backward(groupwayback.plan(way, offsets, states, allow_rewind),
                                   _log_reader(way.old, way.reverse.progress_group, owner.name))
        never = own_groups(way.reverse)             # m's and m__reverse's: both are kept on both clusters
    minimums.require("groups", (sides.write,))      # before a group offset is written, on the side written
    plans, missing = plan_groups(owner, options, sides, planner, never)
    listing = partial_listing(sides.read)
    if listing:
        log.warning("mirror %s: %s", mirror.name, listing)
    errors = {} if options.dry_run else _write(owner, sides, plans)
    return {
        "mirror": mirror.name, "direction": options.direction, "dry_run": options.dry_run,
        "allow_rewind": allow_rewind, "read_from": sides.read.label, "written_to": sides.write.label,
        "checkpoints_topic": sides.checkpoints_topic, "groups_not_found": missing, "listing": listing,
        "way_back": way.as_dict() if way is not None else None,
        "groups": [{**plan.as_dict(), "written": not options.dry_run and bool(plan.writes()) and
                    plan.group not in errors, "error": errors.get(plan.group), "left": plan.left()}
                   for plan in plans],
        "seconds": round(time.monotonic() - started, 3),
    }


def partial_listing(side: Cluster) -> str:
    """"" when the brokers list every group of ``side`` to this principal; else why a group may be missing:
    ListGroups answers only the groups the principal may Describe unless it may Describe the cluster (measured on
    Kafka 4.3 with StandardAuthorizer: tests/integration/test_command_acls.py)."""
    if acls.may(side, "DESCRIBE"):
        return ""
    return (f"{acls.principal(side)} lacks Describe on the {side.role} cluster (resource CLUSTER kafka-cluster) at "
            f"{side.label}: its brokers list only the groups it may Describe, so a group without Describe on group "
            f"<name> for it is not seen and not moved; grant Describe on the groups to move (a PREFIXED ACL "
            f"works) or on the cluster")


def _own_map(mirror: MirrorConfig, direction: str, allow_rewind: bool) -> tuple[_Sides, Planner]:
    """The sides and planner of a move through the mirror's own offset map alone."""
    source = Cluster.resolve("source", mirror.source, mirror.name)
    target = Cluster.resolve("target", mirror.target, mirror.name)
    sides = _sides(mirror, direction, source, target)
    # Right after a run the broker may still be writing its commit markers (issue #44): the syncs and
    # target records read next are read_committed, so wait while those land, as the planner does.
    on_target = ([(sides.topic_map[t], p) for t, n in sides.partitions.items() for p in range(n)]
                 if sides.write is target else [(t, p) for t, n in sides.partitions.items() for p in range(n)])
    kafka_offsets.settle_ends(target, on_target + [(naming.offset_sync_topic(mirror.name), 0)], progress_settle_seconds(),
                        settle_bound_seconds(mirror), "the target's end")

    def load_syncs(needs: dict[tuple[str, int], Need]) -> dict[tuple[str, int], PartitionSyncs]:
        return syncstore.load_needed(target, mirror.name, mirror.progress_group, needs)

    read_sides = (_log_reader(sides.read, mirror.progress_group, mirror.name),
                  _log_reader(sides.write, mirror.progress_group, mirror.name))

    load_reverse = _reverse_syncs_loader(mirror, source) if direction == groupfailover.FAILOVER else None

    def planner(offsets: dict[str, GroupOffsets], states: dict[str, str]) -> list[groupfailover.GroupPlan]:
        return plan_offsets(offsets, states, direction, sides.topic_map, load_syncs, allow_rewind, read_sides,
                            load_reverse)
    return sides, planner


def _reverse_syncs_loader(mirror: MirrorConfig, source: Cluster) -> SyncLoader | None:
    """After a way back (an identity mirror whose reverse mirror copied onto the source): a loader of the
    reverse mirror's syncs, kept on the source (its target). None when no reverse mirror ever wrote any."""
    if mirror.replication_policy != "identity" or naming.forward_mirror_name(mirror.name):
        return None
    back = mirror.reverse()
    if naming.offset_sync_topic(back.name) not in source.admin.list_topics(timeout=30).topics:
        return None

    def load(needs: dict[tuple[str, int], Need]) -> dict[tuple[str, int], PartitionSyncs]:
        return syncstore.load_needed(source, back.name, back.progress_group, needs) if needs else {}
    return load


def _log_reader(side: Cluster, group: str, mirror_name: str) -> LogReader:
    def read(ranges: dict[tuple[str, int], tuple[int, int]]) -> dict[tuple[str, int], groupfailover.LogRead]:
        return readers.log_reads(side, ranges, f"eosmirror-{mirror_name}-groups", group)
    return read


def _write(mirror: MirrorConfig, sides: _Sides, plans: list[groupfailover.GroupPlan]) -> dict[str, str]:
    """Write each writable group in its own transaction; returns {group: error} of the failed ones."""
    writable = [plan for plan in plans if plan.writes()]
    if not writable:
        return {}
    kafka_groups.ensure_topic(sides.write, sides.checkpoints_topic, mirror.target_replication_factor)
    overrides = mirror.target_producer if sides.write.role == "target" else {}
    writer = kafka_groups.GroupWriter(
        sides.write, naming.group_writer_transactional_id(mirror.transactional_id_prefix, mirror.name), overrides)
    errors = {}
    try:
        for plan in writable:
            # Asked again right before the write: a consumer may have joined since the plan, and the
            # coordinator of a classic group accepts a member-less transactional offset commit even
            # while the group has members (KIP-848 consumer groups refuse it): this check is the guard.
            plan.state = kafka_groups.group_states(sides.write, [plan.group], to_write=True).get(plan.group, "DEAD")
            if not groupfailover.is_writable(plan.state):
                plan.skipped = True
                log.warning("group %s became active (%s) on the %s: skipped", plan.group, plan.state,
                            sides.write.label)
                continue
            try:
                writer.write(plan.group, plan.writes(), sides.checkpoints_topic, _checkpoints(plan))
                log.debug("group %s: wrote %s", plan.group, plan.writes())
            except EosMirrorError as exc:
                errors[plan.group] = str(exc)
                log.error("%s", exc)
    finally:
        writer.close()
    return errors


def exit_code(report: dict[str, Any]) -> int:
    """1 when a write failed. A failback (an operator's one-time act) that left any partition of a
    group unmoved exits EXIT_GROUPS_LEFT (4), its plan too; a failover's waiting, refused or skipped
    partitions are reported only (normal on a schedule: 0)."""
    if any(g["error"] for g in report["groups"]):
        return EXIT_FAILED
    if report["direction"] == groupfailover.FAILBACK and any(g["left"] for g in report["groups"]):
        return EXIT_GROUPS_LEFT
    return EXIT_OK
