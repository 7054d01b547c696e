"""Planning a run: per partition a bounded range [start, end), and the partitions of each slot.

Pure functions over plain values; the observations (offsets, committed progress, recovered
positions) are gathered by ``observe.py``. Invariants:

* ``start`` is where the mirror's progress says the next source record is. Without progress:
  - progress that merely expired is given back by the offset syncs (or planning fails);
  - a partition of a topic the mirror already copies (``PartitionObservation.topic_mirrored``) but
    has no progress or offset sync of its own appeared after the topic's first mirroring: it was
    created empty, so every record in it is new to the mirror and it starts at offset 0. Records
    deleted from it before the mirror copied them are a truncation like any other (``on_truncation``);
  - only a partition of a topic the mirror has never copied (its first mirroring, including a topic
    that starts matching ``topics`` later) starts at ``start_from``.
* ``end`` never exceeds the source's last stable offset, so every offset below it is decided
  (committed, aborted or a marker) and the copy can always finish.
* A partition's slot depends only on (target topic, partition, slot count): adding topics or
  partitions never moves a partition to another slot, so two transactional ids of one generation
  never copy the same partition.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from eosmirror.core import naming
from eosmirror.core.errors import DataLossError
from eosmirror.core.foreign import Accounting

ORIGIN_PROGRESS = "progress"
ORIGIN_RECOVERED = "recovered-from-offset-syncs"
ORIGIN_START_FROM = "start_from"
ORIGIN_TRUNCATED = "skipped-to-log-start"
ORIGIN_NEW_PARTITION = "new-partition"   # added to a mirrored topic after its first mirroring


@dataclass(frozen=True)
class PartitionObservation:
    """What the driver saw of one partition before planning."""

    source_topic: str
    target_topic: str
    partition: int
    log_start: int                 # source earliest offset
    last_stable: int               # source last stable offset (read_committed end)
    start_from_offset: int         # the mirror's start_from resolved for this partition
    progress: int | None = None    # committed progress on the target (next source offset)
    recovered: int | None = None   # exact position from offset syncs when progress is gone
    until_offset: int | None = None  # first offset at/after the run's `until` time, if any
    topic_mirrored: bool = False   # the mirror already copies this topic (see observe.mirrored_topics)
    accounting: Accounting | None = None   # what the progress accounts for on the target (core/foreign.py)


@dataclass(frozen=True)
class PartitionPlan:
    source_topic: str
    target_topic: str
    partition: int
    start: int
    end: int
    origin: str
    slot: int
    lost: int = 0   # records skipped on purpose (on_truncation: skip_to_log_start)
    available: int = -1   # the bound before max_records: what a run without a record cap would reach
    source_end: int = -1  # the source's last stable offset as observed for this plan (-1: not known)

    @property
    def pending(self) -> int:
        """Offsets to read (an upper bound on records: markers and aborted records occupy offsets)."""
        return max(0, self.end - self.start)


@dataclass(frozen=True)
class SlotPlan:
    slot: int
    transactional_id: str
    partitions: tuple[PartitionPlan, ...] = field(default_factory=tuple)

    @property
    def pending(self) -> int:
        return sum(p.pending for p in self.partitions)


def slot_for(target_topic: str, partition: int, slots: int) -> int:
    """Deterministic slot: a topic's partitions are spread round-robin from a per-topic offset."""
    if slots < 1:
        raise ValueError("slots must be at least 1")
    return (zlib.crc32(target_topic.encode()) + partition) % slots


def _first_offset(obs: PartitionObservation) -> tuple[int, str]:
    """Where the partition's range starts, and why (before the checks against the source's offsets)."""
    if obs.progress is not None:
        return obs.progress, ORIGIN_PROGRESS
    if obs.recovered is not None:
        return obs.recovered, ORIGIN_RECOVERED
    if obs.topic_mirrored:
        return 0, ORIGIN_NEW_PARTITION   # created empty after the topic's first mirroring: copy all of it
    return obs.start_from_offset, ORIGIN_START_FROM


def _truncation_error(obs: PartitionObservation, where: str, start: int, origin: str) -> DataLossError:
    lost = obs.log_start - start
    why = (f"partition {obs.partition} was added to {obs.source_topic} after the mirror began copying that topic, "
           f"so all of it is owed to the target, but offsets {start}..{obs.log_start - 1} were deleted on the "
           f"source (log start is now {obs.log_start})" if origin == ORIGIN_NEW_PARTITION else
           f"offsets {start}..{obs.log_start - 1} were deleted on the source (log start is now {obs.log_start})")
    return DataLossError(
        f"{where}: {why} before the mirror copied them: up to {lost} records are lost. Raise the source "
        f"topic's retention, then either restore the data or set `on_truncation: skip_to_log_start` to accept "
        f"the loss and continue.")


def plan_partition(obs: PartitionObservation, slots: int, max_records: int | None = None,
                   on_truncation: str = "fail") -> PartitionPlan:
    where = f"source {obs.source_topic}[{obs.partition}] (target {obs.target_topic}[{obs.partition}])"
    start, origin = _first_offset(obs)
    lost = 0
    if start > obs.last_stable:
        raise DataLossError(
            f"{where}: the mirror's progress {start} is beyond the source's end offset {obs.last_stable}. "
            f"The source topic was probably deleted and re-created, or lost data in an unclean leader "
            f"election. Check the topic; to start over, reset the mirror's progress for it.")
    if start < obs.log_start:
        if origin == ORIGIN_START_FROM:
            start = obs.log_start  # never mirrored: "earliest" is the log start, nothing was lost
        elif on_truncation != "skip_to_log_start":
            raise _truncation_error(obs, where, start, origin)
        elif origin == ORIGIN_NEW_PARTITION:
            # Keeps its origin: the slot must not expect committed progress for it.
            lost, start = obs.log_start - start, obs.log_start
        else:
            lost, start, origin = obs.log_start - start, obs.log_start, ORIGIN_TRUNCATED
    available = obs.last_stable
    if obs.until_offset is not None and obs.until_offset >= 0:
        available = min(available, obs.until_offset)
    available = max(available, start)  # an `until` before the progress means: nothing to do
    end = min(available, start + max_records) if max_records is not None else available
    return PartitionPlan(source_topic=obs.source_topic, target_topic=obs.target_topic, partition=obs.partition,
                         start=start, end=end, origin=origin, slot=slot_for(obs.target_topic, obs.partition, slots),
                         lost=lost, available=available, source_end=obs.last_stable)


def plan_run(observations: list[PartitionObservation], slots: int, prefix: str, mirror: str,
             max_records: int | None = None, on_truncation: str = "fail") -> list[SlotPlan]:
    """Every slot of the generation, including slots with no partition (they report "nothing to do")."""
    plans = [plan_partition(o, slots, max_records, on_truncation) for o in observations]
    by_slot: dict[int, list[PartitionPlan]] = {k: [] for k in range(slots)}
    for plan in plans:
        by_slot[plan.slot].append(plan)
    return [SlotPlan(slot=k, transactional_id=naming.slot_transactional_id(prefix, mirror, k),
                     partitions=tuple(sorted(by_slot[k], key=lambda p: (p.target_topic, p.partition))))
            for k in range(slots)]
