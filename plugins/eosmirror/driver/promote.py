"""Unplanned promotion: the target takes over while the source may be gone (`eosmirror promote`).

No step waits on the source longer than ``source_budget_s``: everything the promotion records is
read from the target (the offset syncs name the mirrored partitions, the progress group holds what
was copied, the lag topic holds the last source ends the mirror observed). Steps, each idempotent,
so a promotion that failed half-way is re-triggered and continues:

  1. Record ``promoting`` (before the fence: a run or slot that starts after it refuses).
  2. Fence every transactional id of the mirror and wait until no partition is held by an open
     transaction: from here on nothing more is copied, so what the target holds is final.
  3. If the source answers within the budget: a final group sync (failover direction, when the
     mirror has ``groups``) and a fresh read of the source's stable ends (the best observation).
  4. Per target partition: its end, the source progress copied, the last observed source end.
  5. Record ``promoted`` with those points: the promotion record the way back starts from.
"""

from __future__ import annotations

import getpass
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any, Callable

from eosmirror.core import mirrorstate, naming
from eosmirror.core.config import MirrorConfig
from eosmirror.core.errors import EXIT_MAY_HAVE_LOST, EXIT_OK, EosMirrorError
from eosmirror.core.mirrorstate import LossReport, MirrorState, PartitionPoint, Phase
from eosmirror.core.steptimes import said_steps
from eosmirror.driver import fencing, groups
from eosmirror.kafka import lagstore, offsets, progress, state
from eosmirror.kafka.cluster import Cluster

log = logging.getLogger(__name__)
SOURCE_BUDGET_S = 10.0        # the longest any step waits on the source


@dataclass
class PromotionOutcome:
    mirror: str
    state: MirrorState
    loss: LossReport
    source_answered: bool
    groups: dict[str, Any] | None
    steps: dict[str, float] = field(default_factory=dict)
    already: bool = False

    @property
    def exit_code(self) -> int:
        """0 only when nothing known is missing: "promoted, up to N records may be lost" is not hidden."""
        return EXIT_OK if self.loss.total == 0 and not self.loss.unobserved else EXIT_MAY_HAVE_LOST

    def as_dict(self) -> dict[str, Any]:
        return {"mirror": self.mirror, "kind": "promotion", "state": self.state.phase.value,
                "since_ms": self.state.since_ms, "by": self.state.by, "already_promoted": self.already,
                "source_answered": self.source_answered, "may_be_lost": self.loss.total,
                "unobserved_partitions": [p.label for p in self.loss.unobserved],
                "partitions": [{"source_topic": p.source_topic, "target_topic": p.target_topic,
                                "partition": p.partition, "target_end": p.target_end, "progress": p.progress,
                                "observed_end": p.observed_end, "observed_ms": p.observed_ms,
                                "may_be_lost": p.known_missing} for p in self.loss.points],
                "groups": self.groups, "steps": self.steps, "loss_report": self.loss.lines()}


def _bounded(fn: Callable[[], Any], budget_s: float, what: str) -> Any:
    """``fn()`` or None when it raised or outlasted ``budget_s`` (its thread is abandoned, not joined)."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="eosmirror-source")
    try:
        return pool.submit(fn).result(timeout=budget_s)
    except FutureTimeout:
        log.warning("%s: no answer within %.0f s; the promotion goes on without it", what, budget_s)
    except Exception as exc:  # noqa: BLE001 - the source is allowed to be gone
        log.warning("%s failed (%s); the promotion goes on without it", what, exc)
    finally:
        pool.shutdown(wait=False)
    return None


def _last_observed(target: Cluster, mirror: MirrorConfig, now_ms: int) -> dict[tuple[str, int], tuple[int, int]]:
    """{(source topic, partition): (last stable end, when)}: the newest of each partition among the
    runs' own observations (every run records what it planned against) and the lag samples."""
    seen: dict[tuple[str, int], tuple[int, int]] = {}

    def offer(tp: tuple[str, int], end: int, at: int) -> None:
        if tp not in seen or at >= seen[tp][1]:
            seen[tp] = (end, at)

    samples, observations = lagstore.newest_observations(target, mirror.name, now_ms, mirror.progress_group)
    for observed in observations:
        for topic, partition, end in observed.ends:
            offer((topic, partition), end, observed.time_ms)
    for sample in samples:
        for p in sample.partitions:
            offer((p.source_topic, p.partition), p.last_stable, sample.time_ms)
    return seen


def _source_ends(mirror: MirrorConfig, source_tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    from confluent_kafka.admin import OffsetSpec

    source = Cluster.resolve("source", mirror.source, mirror.name)
    source.admin.list_topics(timeout=SOURCE_BUDGET_S / 2)   # answers at all, or fails fast
    return offsets.list_offsets_of(source, {tp: OffsetSpec.latest() for tp in source_tps}, read_committed=True)


def promotion_points(mirror: MirrorConfig, target: Cluster, fresh: Callable[[list[tuple[str, int]]], Any],
                     now_ms: int) -> tuple[list[PartitionPoint], bool]:
    """Step 4 (and the fresh read of step 3): the points and whether the source answered."""
    from confluent_kafka.admin import OffsetSpec

    partitions = fencing.mirrored_partitions(target, mirror)
    committed = progress.read(target, partitions, mirror.progress_group, stable=True)
    ends = offsets.list_offsets_of(target, {tp: OffsetSpec.latest() for tp in partitions}, read_committed=True)
    policy = naming.policy_of(mirror)
    source_of = {tp: (committed[tp].source_topic if tp in committed and committed[tp].source_topic
                      else policy.source_topic(tp[0])) for tp in partitions}
    source_tps = sorted({(source_of[tp], tp[1]) for tp in partitions})
    observed_now = fresh(source_tps)
    observed = _last_observed(target, mirror, now_ms)
    if observed_now:
        observed.update({tp: (end, now_ms) for tp, end in observed_now.items()})
    points = []
    for tp in partitions:
        src = (source_of[tp], tp[1])
        end, at = observed.get(src, (None, None))
        points.append(PartitionPoint(source_topic=src[0], target_topic=tp[0], partition=tp[1], target_end=ends[tp],
                                     progress=committed[tp].offset if tp in committed else None,
                                     observed_end=end, observed_ms=at))
    return points, bool(observed_now)


def promote(mirror: MirrorConfig, by: str | None = None, source_budget_s: float = SOURCE_BUDGET_S,
            say: Callable[[str], None] = log.info) -> PromotionOutcome:
    """Steps 1-5 of the module doc. Refuses (exit 2) a mirror already promoted or switched over."""
    by = by or f"cli:{getpass.getuser()}"
    steps: dict[str, float] = {}
    target = Cluster.resolve("target", mirror.target, mirror.name)
    current = state.read_mirror_state(target, mirror.name, mirror.progress_group)
    mirrorstate.check_may_promote(current, mirror.name)
    prefix = mirror.transactional_id_prefix

    timed = said_steps(steps, f"promote {mirror.name}", say)
    if current.phase is not Phase.PROMOTING:                                               # 1
        timed("record promoting", lambda: state.write_mirror_state(
            target, mirror.name, prefix, MirrorState(Phase.PROMOTING, int(time.time() * 1000), by)))
    fenced = timed("fence", lambda: fencing.fence_mirror(mirror, settle_seconds=60.0))     # 2
    if not fenced["unblocked"]:
        raise EosMirrorError(f"promote {mirror.name}: after fencing, target partitions are still held by an open "
                             f"transaction ({', '.join(list(fenced['blocked'])[:5])}): another producer writes to "
                             f"them. Nothing was recorded as promoted; find that producer, then promote again")
    moved = None
    if mirror.groups is not None:                                                           # 3
        moved = timed("final group sync", lambda: _bounded(
            lambda: groups.move_groups(mirror, groups.GroupMoveOptions()), source_budget_s * 3,
            f"the final group sync of {mirror.name}"))
    now_ms = int(time.time() * 1000)
    points, answered = timed("promotion points", lambda: promotion_points(                 # 4
        mirror, target, lambda tps: _bounded(lambda: _source_ends(mirror, tps), source_budget_s,
                                             f"the source of {mirror.name}"), now_ms))
    note = ("source answered: its ends were read at the promotion" if answered else
            "source did not answer: the ends are the last ones the mirror observed")
    promoted = mirrorstate.promoted_state(points, now_ms, by, note)
    timed("record promoted", lambda: state.write_mirror_state(target, mirror.name, prefix, promoted))   # 5
    return PromotionOutcome(mirror.name, promoted, LossReport(promoted.points, now_ms), answered, moved, steps)
