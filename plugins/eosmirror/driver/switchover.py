"""Planned switchover with proven zero loss (`eosmirror switchover`), and its cancel.

The producers were stopped by the operator; this proves that the target holds every record the
source committed, then records the switch. Steps, run by the one transition runner
(driver/transition.py), each shown as it passes and listed in the outcome; the outcome names the
step and every partition that stopped it:

  1. Quiet: the source's stable ends of the mirror's partitions stop moving for ``quiet_s``
     (bounded by ``wait_s``): no producer writes any more. Read-only: a switchover that stops here
     leaves a ``mirroring`` mirror mirroring.
  2. Record ``switching-over``: from here on every run but this switchover's final run is refused,
     so no DAG needs pausing on the way to "safe".
  3. Final run: copies everything up to those ends (``run_once``: the launcher every run takes, in
     this process; it copies while switching-over, as the only run that may).
  4. Fence the mirror: nothing more is copied; no transaction of it stays open.
  5. Record lag 0: every partition's committed progress equals the source's stable end, read after
     the fence (a producer that was not stopped shows here, named by its partitions).
  6. Group sync, failover direction (when the mirror has ``groups``), and its table.
  7. Verify record by record (``driver/verify.py``).
  8. Write rights (with ``sync_topic_acls``; core/writerights.py): a forward mirror grants on the target
     the source's write grants of the mirrored topics; the switch back (a reverse mirror's switchover)
     gives back on the old source what `reverse` took away (from the forward mirror's state record).
     Optional by design: without the right to change ACLs the switch is recorded all the same, the verdict
     says "producers cannot write yet" with every ACL to change by hand, and the exit code is 6. A
     switchover done before runs this step again (its grants are recorded): it grants what is missing.
  9. Record ``switched-over`` with the points and the grants; "zero loss: safe to switch" and the time
     from the command's start (the recovery time, measured).
No dead end: a switchover stopped after step 2 is continued (the same command: steps 1 and 3-8 again)
or cancelled (``cancel``: back to ``mirroring``, the next runs continue from the committed progress).
A completed switchover's way back is `eosmirror reverse` (from the switchover point), as a promotion's.
"""

from __future__ import annotations

import getpass
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from eosmirror.core import writerights as rules
from eosmirror.core.config import MirrorConfig, ReverseMirrorConfig
from eosmirror.core.errors import EXIT_FAILED, EXIT_OK, ClusterUnreachableError, ConfigError
from eosmirror.core.mirrorstate import MirrorState, PartitionPoint, Phase
from eosmirror.core.runreport import RunFailure, RunReport, RunStatus
from eosmirror.core.transitions import Command, Mode
from eosmirror.driver import fencing, groups, topics, verify
from eosmirror.driver.transition import Transition
from eosmirror.driver.writerights import Rights
from eosmirror.kafka import offsets, progress, roundtrip, state
from eosmirror.kafka.cluster import Cluster

log = logging.getLogger(__name__)
SAFE = "zero loss: safe to switch"
RIGHTS_OPTIONAL = ("the switch is recorded without it; once the mirror may change ACLs, `eosmirror switchover "
                   "<mirror>` again makes the changes still missing")
MEASURE_BUDGET_S = 10.0    # the round trip's first answer (a source that does not answer is step 1's to report)


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
    run: Transition
    stopped_at: str | None = None             # the step that stopped it
    blocking: list[str] = field(default_factory=list)   # every partition (or check) that stops it
    recovery_seconds: float | None = None     # the command's start to "safe"
    groups: dict[str, Any] | None = None
    verify_summary: str = ""
    already: bool = False
    points: list[PartitionPoint] = field(default_factory=list)
    final_run: RunReport | RunFailure | None = None
    state: str = Phase.MIRRORING.value        # the mirror's phase when the command ended
    rights: Rights = field(default_factory=Rights)
    source_round_trip_ms: float | None = None   # measured before step 1 (what distance adds to each source read)

    @property
    def exit_code(self) -> int:
        """0 only when every step ran: a write-rights step that did not run is 6 ("producers cannot write yet")."""
        return self.run.exit_code(EXIT_OK if self.safe else EXIT_FAILED)

    def as_dict(self) -> dict[str, Any]:
        return {"mirror": self.mirror, "kind": "switchover", "safe": self.safe, "verdict": self.verdict(),
                "state": self.state, "stopped_at": self.stopped_at, "blocking": self.blocking,
                "steps": self.run.as_list(), "recovery_seconds": self.recovery_seconds,
                "source_round_trip_ms": self.source_round_trip_ms, "groups": self.groups,
                "verify": self.verify_summary, "already_switched_over": self.already,
                "final_run": self.final_run.to_dict() if self.final_run else None,
                "write_rights": self.rights.as_dict(), "not_run": [x.name for x in self.run.not_run],
                "partitions": [{"source_topic": p.source_topic, "target_topic": p.target_topic,
                                "partition": p.partition, "target_end": p.target_end, "progress": p.progress,
                                "source_end": p.observed_end} for p in self.points]}

    def verdict(self) -> str:
        if self.safe and self.run.not_run:
            return f"zero loss, but {rules.CANNOT_WRITE_YET}: " + "; ".join(
                f"{s.name} DID NOT RUN ({s.why})" for s in self.run.not_run)
        if self.safe:
            return SAFE
        said = f"NOT safe to switch: stopped at {self.stopped_at}" + (
            f" by {len(self.blocking)}: {'; '.join(self.blocking)}" if self.blocking else "")
        if self.state == Phase.SWITCHING_OVER.value:
            said += (f". The mirror stays switching-over (its runs are refused): `eosmirror switchover {self.mirror}` "
                     f"continues (quiet wait and final run again), `eosmirror switchover {self.mirror} --cancel` "
                     f"returns it to mirroring")
        return said


def source_ends(source: Cluster, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    from confluent_kafka.admin import OffsetSpec

    return offsets.list_offsets_of(source, {tp: OffsetSpec.latest() for tp in tps}, read_committed=True)


def wait_quiet(read_ends: Callable[[], dict[tuple[str, int], int]], options: SwitchoverOptions,
               say: Callable[[str], None], clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> tuple[dict[tuple[str, int], int] | None, list[str]]:
    """Step 1: (ends once quiet, []) or (None, the partitions still moving when ``wait_s`` ran out)."""
    started = clock()
    last = read_ends()
    quiet_since, moving = started, list[str]()
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


def switchover(mirror: MirrorConfig, run_once: Callable[[], RunReport | RunFailure],
               options: SwitchoverOptions | None = None, by: str | None = None,
               say: Callable[[str], None] = log.info, started: float | None = None) -> SwitchoverOutcome:
    """Steps 1-8 of the module doc. Refuses (exit 2) a promoted mirror; a switched-over one is done.
    ``started``: when the command was given (monotonic), for the recovery time."""
    options = options or SwitchoverOptions()
    options.check(mirror.name)
    by = by or f"cli:{getpass.getuser()}"
    source = Cluster.resolve("source", mirror.source, mirror.name)
    target = Cluster.resolve("target", mirror.target, mirror.name)
    run = Transition(Command.SWITCHOVER, mirror.name, say, started=started, by=by,
                     record_to=state.recorder(target, mirror.name, mirror.transactional_id_prefix),
                     clusters=(source, target))
    out = SwitchoverOutcome(mirror.name, safe=False, run=run)
    out.rights.audit_to = state.auditor(target, mirror.name, mirror.transactional_id_prefix, rules.AUDIT_ACTION,
                                        "switch back" if isinstance(mirror, ReverseMirrorConfig) else "switchover", by)
    current = state.read_mirror_state(target, mirror.name, mirror.progress_group)
    out.state = current.phase.value
    if run.check(current) is Mode.DONE:
        out.safe, out.already, out.points = True, True, list(current.points)
        _move_rights(mirror, source, target, out, current.rights)
        return out
    pairs = topics.resolve(mirror, source)
    source_tps = [(p.source, k) for p in pairs for k in range(p.partitions)]
    out.source_round_trip_ms = _round_trip_ms(source, pairs[0].source if pairs else None, say, mirror.name)
    ends, moving = run.step("wait for a quiet source", lambda: wait_quiet(                       # 1
        lambda: source_ends(source, source_tps), options, say)) or (None, [])
    if ends is None:
        return _stop(out, "wait for a quiet source", moving or [f"the source did not stay quiet {options.quiet_s:g} s"])
    if run.mode is Mode.BEGIN:                                                                   # 2
        # A mirror that never ran has no state topic yet to record in (a run's preflight creates it).
        run.step("internal topics", lambda: topics.ensure_internal_topics(mirror, target, topics.describe(
            target, list(topics.internal_topics(mirror)))))
        run.record(Phase.SWITCHING_OVER)
        out.state = Phase.SWITCHING_OVER.value
    else:
        run.skip("record switching-over", "recorded by the stopped switchover this one continues")
    out.final_run = run.step("final run", run_once)                                             # 3
    if out.final_run is None or out.final_run.status is not RunStatus.OK:
        errors = (out.final_run.errors if isinstance(out.final_run, RunReport) else
                  [out.final_run.error] if isinstance(out.final_run, RunFailure) else [])
        return _stop(out, "final run", errors or ["the final run failed"])
    stopped = _prove(mirror, source, target, source_tps, {p.source: p.target for p in pairs}, out)   # 4-7
    if stopped is not None:
        return stopped
    _move_rights(mirror, source, target, out, None, {p.source: p.target for p in pairs})         # 8
    run.record(Phase.SWITCHED_OVER, out.points, SAFE, out.rights.changes)                        # 9
    out.safe, out.state, out.recovery_seconds = True, Phase.SWITCHED_OVER.value, run.elapsed()
    say(f"switchover {mirror.name}: {out.verdict()} ({out.recovery_seconds:.1f} s from the command's start)")
    return out


def _move_rights(mirror: MirrorConfig, source: Cluster, target: Cluster, out: SwitchoverOutcome,
                 recorded: tuple[rules.RightsChange, ...] | None, target_of: dict[str, str] | None = None) -> None:
    """Step 8: a forward mirror grants on the target (again from ``recorded`` when done before); the switch
    back gives back on the old source what `reverse` of the forward mirror took away."""
    run, rights = out.run, out.rights
    forward = mirror.forward if isinstance(mirror, ReverseMirrorConfig) else None
    name = rules.GIVE_BACK_STEP if forward is not None else rules.GRANT_STEP
    optional = RIGHTS_OPTIONAL.replace("<mirror>", mirror.name)
    if not mirror.sync_topic_acls:
        run.skip(name, rules.SYNC_OFF)
    elif forward is not None:
        # The forward mirror's state record (on its target: this mirror's source) holds what reverse took away.
        run.step(name, lambda: rights.give_back(target, state.read_mirror_state(
            source, forward.name, forward.progress_group).rights, rules.OLD_SOURCE), optional=optional)
    elif recorded is not None:
        run.step(name, lambda: rights.regrant(target, recorded), optional=optional)
    else:
        run.step(name, lambda: rights.grant_on_target(source, target, target_of or {}, mirror.mirror_principals),
                 optional=optional)


def _round_trip_ms(source: Cluster, topic: str | None, say: Callable[[str], None], name: str) -> float | None:
    """The source's round trip in ms (kafka/roundtrip.py), said and published in the outcome; None when it does
    not answer in time (step 1 then says what is wrong). Every source read of the steps costs some of these."""
    try:
        rtt = roundtrip.measure(source, topic, MEASURE_BUDGET_S)
    except ClusterUnreachableError as exc:
        say(f"switchover {name}: the source's round trip could not be measured ({exc})")
        return None
    say(f"switchover {name}: the source is {rtt * 1000:.1f} ms away (round trip)")
    return round(rtt * 1000, 1)


CANCELLED = "switchover cancelled: mirroring again"


@dataclass
class CancelOutcome:
    mirror: str
    state: MirrorState
    run: Transition
    already: bool = False
    exit_code = EXIT_OK

    def verdict(self) -> str:
        return (f"mirror {self.mirror}: {'already ' if self.already else ''}{self.state.describe()}: {CANCELLED}; "
                f"its next run continues from the committed progress")

    def as_dict(self) -> dict[str, Any]:
        return {"mirror": self.mirror, "kind": "switchover-cancel", "state": self.state.phase.value,
                "since_ms": self.state.since_ms, "by": self.state.by, "already_cancelled": self.already,
                "steps": self.run.as_list(), "verdict": self.verdict()}


def cancel(mirror: MirrorConfig, by: str | None = None, say: Callable[[str], None] = log.info) -> CancelOutcome:
    """A switchover stopped after ``switching-over`` given up: record ``mirroring`` (the only step; the
    fence a continued switchover may have done is harmless: the next run's slots initialise again).
    Idempotent: a mirror this cancel already returned to mirroring is reported, not written again;
    any other state is refused (exit 2), naming it and the next command."""
    by = by or f"cli:{getpass.getuser()}"
    target = Cluster.resolve("target", mirror.target, mirror.name)
    run = Transition(Command.CANCEL, mirror.name, say, by=by,
                     record_to=state.recorder(target, mirror.name, mirror.transactional_id_prefix), clusters=(target,))
    current = state.read_mirror_state(target, mirror.name, mirror.progress_group)
    if current.phase is Phase.MIRRORING and current.note == CANCELLED:
        run.skip("record mirroring", f"cancelled already ({current.describe()})")
        return CancelOutcome(mirror.name, current, run, already=True)
    run.check(current)
    return CancelOutcome(mirror.name, run.record(Phase.MIRRORING, note=CANCELLED), run)


def _stop(out: SwitchoverOutcome, step: str, blocking: list[str]) -> SwitchoverOutcome:
    out.stopped_at, out.blocking = step, blocking
    out.run.say(f"switchover {out.mirror}: {out.verdict()}")
    return out


def _prove(mirror: MirrorConfig, source: Cluster, target: Cluster, source_tps: list[tuple[str, int]],
           target_of: dict[str, str], out: SwitchoverOutcome) -> SwitchoverOutcome | None:
    """Steps 4-7: fence, record lag 0, group sync, verify; the outcome when one stopped it, else None."""
    run = out.run
    fenced = run.step("fence", lambda: fencing.fence_mirror(mirror, settle_seconds=60.0)) or {}
    if not fenced.get("unblocked"):
        return _stop(out, "fence (another producer holds these target partitions)", fencing.blocked_lines(fenced))
    out.points = run.step("record lag", lambda: _points(source, target, mirror, source_tps, target_of)) or []
    behind = [f"{p.label}: progress {p.progress}, source end {p.observed_end}" for p in out.points
              if (p.progress or 0) != p.observed_end and p.observed_end]
    if behind:
        return _stop(out, "record lag 0 after the fence (a producer still writes, or the final run was cut short)",
                     behind)
    if mirror.groups is not None:
        out.groups = run.step("group sync", lambda: groups.move_groups(mirror, groups.GroupMoveOptions()))
    else:
        run.skip("group sync", "the mirror has no `groups` section: consumer groups are not moved")
    checks = run.step("verify", lambda: verify.verify(mirror)) or []
    out.verify_summary = f"{len(checks)} partition(s) checked, {sum(c.records for c in checks)} record(s) compared"
    if verify.exit_code(checks) != 0:
        bad = [f"{c.source_topic}[{c.partition}]" for c in checks if not (c.ok and c.complete)]
        return _stop(out, "verify", bad or ["verify found a difference"])
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
