"""Planned switchover with proven zero loss (`eosmirror switchover`).

The producers were stopped by the operator; this proves that the target holds every record the
source committed, then records the switch. Steps (each shown as it passes; the outcome names the
step and the partitions that stopped it):

  1. Quiet: the source's stable ends of the mirror's partitions stop moving for ``quiet_s``
     (bounded by ``wait_s``): no producer writes any more.
  2. Final run: copies everything up to those ends (``run_once``, the caller's launcher).
  3. Record ``switching-over`` (before the fence: a run or slot that starts after it refuses).
  4. Fence the mirror: nothing more is copied; no transaction of it stays open.
  5. Record lag 0: every partition's committed progress equals the source's stable end, read after
     the fence (a producer that was not stopped shows here, named by its partitions).
  6. Group sync, failover direction (when the mirror has ``groups``), and its table.
  7. Verify record by record (``driver/verify.py``).
  8. Record ``switched-over`` with the points; "zero loss: safe to switch" and the time from the
     trigger to it (the recovery time, measured).
Every step before 8 is safe to repeat: a failed switchover is triggered again and continues.
"""

from __future__ import annotations

import getpass
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from eosmirror.core import mirrorstate
from eosmirror.core.config import MirrorConfig
from eosmirror.core.errors import EXIT_FAILED, EXIT_OK, ConfigError
from eosmirror.core.mirrorstate import MirrorState, PartitionPoint, Phase
from eosmirror.driver import fencing, groups, topics, verify
from eosmirror.kafka import offsets, progress, state
from eosmirror.kafka.cluster import Cluster

log = logging.getLogger(__name__)
SAFE = "zero loss: safe to switch"


@dataclass(frozen=True)
class SwitchoverOptions:
    wait_s: float = 300.0      # how long step 1 may wait for the source to be quiet
    quiet_s: float = 10.0      # how long no new committed record may arrive on the source

    def check(self, mirror: str) -> None:
        if not 0 < self.quiet_s <= 3600 or not 0 < self.wait_s <= 86_400:
            raise ConfigError(f"switchover {mirror}: quiet seconds must be in (0, 3600] and wait seconds in "
                              f"(0, 86400] (given {self.quiet_s:g} and {self.wait_s:g})")
        if self.quiet_s >= self.wait_s:
            raise ConfigError(f"switchover {mirror}: the wait ({self.wait_s:g} s) must be longer than the quiet "
                              f"time ({self.quiet_s:g} s), else the source can never be seen quiet")


@dataclass
class SwitchoverOutcome:
    mirror: str
    safe: bool
    stopped_at: str | None = None             # the step that stopped it
    blocking: list[str] = field(default_factory=list)   # the partitions (or checks) that stop it
    steps: dict[str, float] = field(default_factory=dict)
    recovery_seconds: float | None = None     # trigger to "safe"
    groups: dict[str, Any] | None = None
    verify_summary: str = ""
    already: bool = False
    points: list[PartitionPoint] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.safe else EXIT_FAILED

    def as_dict(self) -> dict[str, Any]:
        return {"mirror": self.mirror, "kind": "switchover", "safe": self.safe, "verdict": self.verdict(),
                "stopped_at": self.stopped_at, "blocking": self.blocking, "steps": self.steps,
                "recovery_seconds": self.recovery_seconds, "groups": self.groups, "verify": self.verify_summary,
                "already_switched_over": self.already,
                "partitions": [{"source_topic": p.source_topic, "target_topic": p.target_topic,
                                "partition": p.partition, "target_end": p.target_end, "progress": p.progress,
                                "source_end": p.observed_end} for p in self.points]}

    def verdict(self) -> str:
        if self.safe:
            return SAFE
        return (f"NOT safe to switch: stopped at {self.stopped_at}"
                + (f" by {', '.join(self.blocking[:10])}" + (" ..." if len(self.blocking) > 10 else "")
                   if self.blocking else ""))


def source_ends(source: Cluster, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    from confluent_kafka.admin import OffsetSpec

    return offsets.list_offsets_of(source, {tp: OffsetSpec.latest() for tp in tps}, read_committed=True)


def wait_quiet(read_ends: Callable[[], dict[tuple[str, int], int]], options: SwitchoverOptions,
               say: Callable[[str], None], clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> tuple[dict[tuple[str, int], int] | None, list[str]]:
    """Step 1: (ends once quiet, []) or (None, the partitions still moving when ``wait_s`` ran out)."""
    started = clock()
    last = read_ends()
    quiet_since, moving = started, []
    while clock() - quiet_since < options.quiet_s:
        if clock() - started >= options.wait_s:
            return None, moving
        sleep(min(1.0, options.quiet_s / 5))
        now = read_ends()
        changed = sorted(f"{t}[{p}] {last.get((t, p))} -> {end}" for (t, p), end in now.items() if end != last.get((t, p)))
        if changed:
            quiet_since, moving = clock(), changed
            say(f"source still written: {len(changed)} partition(s) moved (e.g. {', '.join(changed[:3])})")
        last = now
    return last, []


class _Steps:
    """The switchover's bookkeeping: each step timed and shown, and the stop that names the blockers."""

    def __init__(self, mirror: str, out: SwitchoverOutcome, say: Callable[[str], None]):
        self.mirror, self.out, self.say = mirror, out, say

    def timed(self, name: str, fn: Callable[[], Any]) -> Any:
        started = time.monotonic()
        self.say(f"switchover {self.mirror}: {name} ...")
        try:
            return fn()
        finally:
            self.out.steps[name] = round(time.monotonic() - started, 3)
            self.say(f"switchover {self.mirror}: {name} done ({self.out.steps[name]:.2f} s)")

    def stop(self, step: str, blocking: list[str]) -> SwitchoverOutcome:
        self.out.stopped_at, self.out.blocking = step, blocking
        self.say(f"switchover {self.mirror}: {self.out.verdict()}")
        return self.out


def switchover(mirror: MirrorConfig, run_once: Callable[[], dict[str, Any]], options: SwitchoverOptions | None = None,
               by: str | None = None, say: Callable[[str], None] = log.info) -> SwitchoverOutcome:
    """Steps 1-8 of the module doc. Refuses (exit 2) a promoted mirror; a switched-over one is done."""
    options = options or SwitchoverOptions()
    options.check(mirror.name)
    trigger = time.monotonic()
    by = by or f"cli:{getpass.getuser()}"
    out = SwitchoverOutcome(mirror.name, safe=False)
    steps = _Steps(mirror.name, out, say)
    source = Cluster.resolve("source", mirror.source, mirror.name)
    target = Cluster.resolve("target", mirror.target, mirror.name)
    current = state.read_mirror_state(target, mirror.name, mirror.progress_group)
    if not mirrorstate.check_may_switch_over(current, mirror.name):
        say(f"switchover {mirror.name}: already {current.describe()}")
        out.safe, out.already, out.points = True, True, list(current.points)
        return out
    pairs = topics.resolve(mirror, source)
    source_tps = [(p.source, k) for p in pairs for k in range(p.partitions)]
    if current.phase is Phase.MIRRORING:
        stopped = _quiet_then_final_run(mirror, source, source_tps, run_once, options, steps)      # 1, 2
        if stopped is not None:
            return stopped
        steps.timed("record switching-over", lambda: state.write_mirror_state(                     # 3
            target, mirror.name, mirror.transactional_id_prefix,
            MirrorState(Phase.SWITCHING_OVER, int(time.time() * 1000), by)))
    stopped = _prove(mirror, source, target, source_tps, {p.source: p.target for p in pairs}, steps)   # 4-7
    if stopped is not None:
        return stopped
    steps.timed("record switched-over", lambda: state.write_mirror_state(                          # 8
        target, mirror.name, mirror.transactional_id_prefix,
        MirrorState(Phase.SWITCHED_OVER, int(time.time() * 1000), by, tuple(out.points), SAFE)))
    out.safe, out.recovery_seconds = True, round(time.monotonic() - trigger, 2)
    say(f"switchover {mirror.name}: {SAFE} ({out.recovery_seconds:.1f} s from the trigger)")
    return out


def _quiet_then_final_run(mirror: MirrorConfig, source: Cluster, source_tps: list[tuple[str, int]],
                          run_once: Callable[[], dict[str, Any]], options: SwitchoverOptions,
                          steps: _Steps) -> SwitchoverOutcome | None:
    """Steps 1 and 2; the outcome when one stopped the switchover, else None."""
    ends, moving = steps.timed("wait for a quiet source", lambda: wait_quiet(
        lambda: source_ends(source, source_tps), options, steps.say))
    if ends is None:
        return steps.stop("wait for a quiet source", moving or [f"the source did not stay quiet {options.quiet_s:g} s"])
    report = steps.timed("final run", run_once)
    if report.get("status") != "ok":
        return steps.stop("final run", [str(e) for e in report.get("errors", [])] or ["the final run failed"])
    return None


def _prove(mirror: MirrorConfig, source: Cluster, target: Cluster, source_tps: list[tuple[str, int]],
           target_of: dict[str, str], steps: _Steps) -> SwitchoverOutcome | None:
    """Steps 4-7: fence, record lag 0, group sync, verify; the outcome when one stopped it, else None."""
    fenced = steps.timed("fence", lambda: fencing.fence_mirror(mirror, settle_seconds=60.0))
    if not fenced["unblocked"]:
        return steps.stop("fence", sorted(fenced["blocked"]))
    points = steps.timed("record lag", lambda: _points(source, target, mirror, source_tps, target_of))
    steps.out.points = points
    behind = [f"{p.label}: progress {p.progress}, source end {p.observed_end}" for p in points
              if (p.progress or 0) != p.observed_end and p.observed_end]
    if behind:
        return steps.stop("record lag 0 after the fence (a producer still writes, or the final run was cut short; "
                          "run the mirror, then switch over again)", behind)
    if mirror.groups is not None:
        steps.out.groups = steps.timed("group sync", lambda: groups.move_groups(mirror, groups.GroupMoveOptions()))
    else:
        steps.say(f"switchover {mirror.name}: the mirror has no `groups` section: consumer groups were not moved")
    checks = steps.timed("verify", lambda: verify.verify(mirror))
    steps.out.verify_summary = f"{len(checks)} partition(s) checked, {sum(c.records for c in checks)} record(s) compared"
    if verify.exit_code(checks) != 0:
        bad = [f"{c.source_topic}[{c.partition}]" for c in checks if not (c.ok and c.complete)]
        return steps.stop("verify", bad or ["verify found a difference"])
    return None


def _points(source: Cluster, target: Cluster, mirror: MirrorConfig, source_tps: list[tuple[str, int]],
            target_of: dict[str, str]) -> list[PartitionPoint]:
    from confluent_kafka.admin import OffsetSpec

    ends = source_ends(source, source_tps)
    target_tps = [(target_of[t], p) for t, p in source_tps]
    committed = progress.read(target, target_tps, mirror.progress_group, stable=True)
    target_ends = offsets.list_offsets_of(target, {tp: OffsetSpec.latest() for tp in target_tps}, read_committed=True)
    now_ms = int(time.time() * 1000)
    return [PartitionPoint(source_topic=t, target_topic=target_of[t], partition=p,
                           target_end=target_ends[(target_of[t], p)],
                           progress=committed[(target_of[t], p)].offset if (target_of[t], p) in committed else None,
                           observed_end=ends[(t, p)], observed_ms=now_ms) for t, p in source_tps]
