"""Unplanned promotion: the target takes over while the source may be gone (`eosmirror promote`).

No step waits on the source longer than ``source_budget_s``: everything the promotion records is
read from the target (the offset syncs name the mirrored partitions, the progress group holds what
was copied, the lag topic holds the last source ends the mirror observed). Steps, run by the one
transition runner (driver/transition.py), each idempotent, so a promotion that failed half-way is
re-triggered and continues:

  1. Record ``promoting`` (before the fence: a run or slot that starts after it refuses).
  2. Fence every transactional id of the mirror and wait until no partition is held by an open
     transaction: from here on nothing more is copied, so what the target holds is final.
  3. Ask the source once whether it answers (half the source budget, at most 5 s), measuring its round
     trip, then the final group sync (failover direction, when the mirror has ``groups``), within three
     source budgets or the round trips its groups need on a long link (core/budgets.py). Optional by
     design (the source may be gone): when it cannot run, the outcome lists it as failed and the exit
     code says so (6, or 5 when records may be lost as well).
  2b. Foreign records (optional by design): every target partition is judged against what the mirror's
     progress accounts for (driver/foreigncheck.py): records another producer wrote there are listed
     beside the loss report, with the producers DescribeProducers names. They are on the promoted
     target and its consumers read them; only the operator knows whether they belong there.
  4. Per target partition: its end, the source progress copied, the last observed source end (a fresh
     read of the source's stable ends when it answers within the budget, at least its round trips).
  5. Write rights (with ``sync_topic_acls``; core/writerights.py): grant on the target the source's write
     grants of the mirrored topics, read from the source when it answered, else the grants the latest
     recorded readiness report staged when it is recent enough (core/stagedrights.py, saying so and its
     age). Optional by design: without either, or the right to change the target's ACLs, the outcome names
     the ACLs to add by hand and says "producers cannot write yet" (exit 6).
  6. Record ``promoted`` with those points and grants: the promotion record the way back starts from.
"""

from __future__ import annotations

import getpass
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

from eosmirror.core import budgets, naming, stagedrights
from eosmirror.core import writerights as rules
from eosmirror.core.config import MirrorConfig
from eosmirror.core.errors import EXIT_MAY_HAVE_LOST, EXIT_OK, ClusterUnreachableError, EosMirrorError
from eosmirror.core.foreign import Check
from eosmirror.core.mirrorstate import LossReport, MirrorState, PartitionPoint, Phase
from eosmirror.core.transitions import Command, Mode
from eosmirror.driver import fencing, foreigncheck, groups, topics
from eosmirror.driver.transition import Transition, within
from eosmirror.driver.writerights import Rights
from eosmirror.kafka import calls, lagstore, offsets, progress, roundtrip, state
from eosmirror.kafka import groups as kafka_groups
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
    run: Transition
    already: bool = False
    recovery_seconds: float | None = None
    rights: Rights | None = None
    foreign: Check | None = None       # step 2b; None: it did not run (the steps say why)
    source_round_trip_ms: float | None = None   # measured when the source answered (its waits' budgets)

    @property
    def exit_code(self) -> int:
        """0 only when nothing known is missing and every step ran: "promoted, up to N records may be
        lost" (5) and "the final group sync did not run" (6) are no success to hide."""
        lost = EXIT_MAY_HAVE_LOST if self.loss.total or self.loss.unobserved else EXIT_OK
        return self.run.exit_code(lost)

    def verdict(self) -> str:
        said = f"mirror {self.mirror}: promoted" + (f", up to {self.loss.total} record(s) may be lost"
                                                   if self.loss.total or self.loss.unobserved else
                                                   ", nothing known is lost")
        if self.foreign is not None and self.foreign.foreign:
            said += (f"; {sum(len(r.offsets) for r in self.foreign.foreign)} record(s) on the target were not "
                     f"written by the mirror (foreign)")
        said += "".join(f"; {s.name} DID NOT RUN ({s.why})" for s in self.run.not_run)
        return said + (f" ({self.recovery_seconds:.1f} s from the command's start)" if self.recovery_seconds else "")

    def as_dict(self) -> dict[str, Any]:
        return {"mirror": self.mirror, "kind": "promotion", "state": self.state.phase.value,
                "since_ms": self.state.since_ms, "by": self.state.by, "already_promoted": self.already,
                "source_answered": self.source_answered, "may_be_lost": self.loss.total,
                "unobserved_partitions": [p.label for p in self.loss.unobserved],
                "partitions": [{"source_topic": p.source_topic, "target_topic": p.target_topic,
                                "partition": p.partition, "target_end": p.target_end, "progress": p.progress,
                                "observed_end": p.observed_end, "observed_ms": p.observed_ms,
                                "may_be_lost": p.known_missing} for p in self.loss.points],
                "groups": self.groups, "steps": self.run.as_list(), "not_run": [s.name for s in self.run.not_run],
                "write_rights": self.rights.as_dict() if self.rights else None,
                "recovery_seconds": self.recovery_seconds, "source_round_trip_ms": self.source_round_trip_ms,
                "exit_code": self.exit_code,
                "verdict": self.verdict(), "loss_report": self.loss.lines(),
                "foreign_records": self.foreign.as_dict() if self.foreign is not None else None,
                "foreign_report": self.foreign_lines()}

    def foreign_lines(self) -> list[str]:
        """Beside the loss report: the target records the mirror did not write (step 2b)."""
        if self.foreign is None:
            return ["foreign records: not checked (see the step's reason); `eosmirror verify` counts them"]
        if not self.foreign.foreign:
            return [f"foreign records: none ({self.foreign.summary()})"]
        lines = [f"  {r.line()}" for r in self.foreign.foreign]
        if self.foreign.producers_note:
            lines.append(f"  (producer ids: {self.foreign.producers_note})")
        return lines + [f"{sum(len(r.offsets) for r in self.foreign.foreign)} record(s) on "
                        f"{len(self.foreign.foreign)} target partition(s) were not written by the mirror: they are "
                        f"on the promoted target and its consumers read them (docs/failing-loudly.md)"]


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
    return offsets.list_offsets_of(source, {tp: OffsetSpec.latest() for tp in source_tps}, read_committed=True)


def source_silence(mirror: MirrorConfig, budget_s: float) -> tuple[str | None, float | None]:
    """Asked once, up front: (None, the measured round trip in seconds) when the source answers a metadata
    request within ``budget_s``, else (why not, None). A source that does not answer is not asked again (its
    group sync and fresh read would each wait out their own budget for nothing); one that answers gives the
    later steps their budgets in round trips (core/budgets.py)."""
    try:
        rtt = within(lambda: roundtrip.measure(Cluster.resolve("source", mirror.source, mirror.name), None, budget_s),
                     budget_s + 1, f"the source of {mirror.name}")
    except Exception as exc:  # noqa: BLE001 - the source is allowed to be gone: the outcome says it did not answer
        return calls.error_text(exc), None
    return None, rtt


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
            say: Callable[[str], None] = log.info, started: float | None = None) -> PromotionOutcome:
    """Steps 1-5 of the module doc. Refuses (exit 2) a mirror already promoted or switched over.
    ``started``: when the command was given (monotonic), for the recovery time."""
    by = by or f"cli:{getpass.getuser()}"
    target = Cluster.resolve("target", mirror.target, mirror.name)
    run = Transition(Command.PROMOTE, mirror.name, say, started=started, by=by,   # the source may be gone: unchecked
                     record_to=state.recorder(target, mirror.name, mirror.transactional_id_prefix), clusters=(target,))
    current = state.read_mirror_state(target, mirror.name, mirror.progress_group)
    if run.check(current) is Mode.BEGIN:                                                        # 1
        # A mirror that never ran has no state topic yet to record in (a run's preflight creates it).
        run.step("internal topics", lambda: topics.ensure_internal_topics(mirror, target, topics.describe(
            target, list(topics.internal_topics(mirror)))))
        run.record(Phase.PROMOTING)
    else:
        run.skip("record promoting", "recorded by the unfinished promotion this one continues")
    fenced = run.step("fence", lambda: fencing.fence_mirror(mirror, settle_seconds=60.0)) or {}      # 2
    if not fenced.get("unblocked"):
        blocked = fencing.blocked_lines(fenced)
        raise EosMirrorError(f"promote {mirror.name}: after fencing, {len(blocked)} target partition(s) are still "
                             f"held by an open transaction of another producer; nothing was recorded as promoted. "
                             f"Clear each, then promote again:\n" + "\n".join(f"  {line}" for line in blocked))
    checked = run.step("foreign records", lambda: foreign_records(mirror, target),                   # 2b
                       optional="the promotion goes on without it; `eosmirror verify` counts foreign records")
    silent, rtt = run.step("source answers", lambda: source_silence(                                 # 3
        mirror, min(5.0, source_budget_s / 2))) or (None, None)
    if rtt is not None:
        say(f"promote {mirror.name}: the source answers, {rtt * 1000:.1f} ms round trip: its waits get at least "
            f"{budgets.SLACK} x their round trips (core/budgets.py)")
    moved = None
    if mirror.groups is None:
        run.skip("final group sync", "the mirror has no `groups` section: consumer groups are not moved")
    else:
        moved = run.step("final group sync", lambda: _final_group_sync(mirror, silent, source_budget_s, rtt),
            optional="the promotion goes on without it: the groups stay where the last group sync left them "
                     "on the target; run `eosmirror groups <mirror> --direction failover` if the source answers again")
    now_ms = int(time.time() * 1000)
    points, answered = run.step("promotion points", lambda: promotion_points(                  # 4
        mirror, target, lambda tps: None if silent else _source_ends_or_none(
            mirror, tps, budgets.stretched(source_budget_s, rtt, budgets.source_ends_round_trips()), say),
        now_ms)) or ([], False)
    note = ("source answered: its ends were read at the promotion" if answered else
            "source did not answer: the ends are the last ones the mirror observed")
    rights = Rights(audit_to=state.auditor(target, mirror.name, mirror.transactional_id_prefix, rules.AUDIT_ACTION,
                                           "promote", by))
    if not mirror.sync_topic_acls:                                                              # 5
        run.skip(rules.GRANT_STEP, rules.SYNC_OFF)
    else:
        run.step(rules.GRANT_STEP, lambda: _grant(mirror, target, points, silent, source_budget_s, rights),
                 optional=f"the promotion goes on without it: {rules.CANNOT_WRITE_YET}")
    promoted = run.record(Phase.PROMOTED, points, note, rights.changes)                         # 6
    return PromotionOutcome(mirror.name, promoted, LossReport(promoted.points, promoted.since_ms), answered, moved,
                            run, recovery_seconds=run.elapsed(), rights=rights, foreign=checked,
                            source_round_trip_ms=None if rtt is None else round(rtt * 1000, 1))


def _grant(mirror: MirrorConfig, target: Cluster, points: list[PartitionPoint], silent: str | None, budget_s: float,
           rights: Rights) -> None:
    """Step 5: the source's write grants of the promoted topics, on the target (bounded: the source may be gone)."""
    target_of = {p.source_topic: p.target_topic for p in points}
    if silent:
        now_ms = lagstore.now_ms()
        found = stagedrights.staged(lagstore.latest_report(target, mirror.name, now_ms, mirror.progress_group),
                                    target_of.values(), now_ms)
        if found.why_not:
            raise ClusterUnreachableError(
                f"the source did not answer ({silent}), so its write ACLs are unknown, and {found.why_not}: "
                f"{rules.CANNOT_WRITE_YET}. Grant each producer principal ALLOW WRITE (host *, pattern LITERAL) on "
                f"the target topics {', '.join(sorted(set(target_of.values())))}")
        within(lambda: rights.grant_staged(target, found), budget_s * 3, f"the write rights of {mirror.name}")
        return
    source = Cluster.resolve("source", mirror.source, mirror.name)
    within(lambda: rights.grant_on_target(source, target, target_of, mirror.mirror_principals), budget_s * 3,
           f"the write rights of {mirror.name}")


def foreign_records(mirror: MirrorConfig, target: Cluster) -> Check:
    """Step 2b: after the fence no transaction of the mirror is open, so the stable progress is final."""
    partitions = fencing.mirrored_partitions(target, mirror)
    outcome = foreigncheck.check(target, mirror.progress_group, partitions,
                                 client_id=f"eosmirror-{mirror.name}-promote-target-check")
    return foreigncheck.named(target, mirror, outcome)


def _final_group_sync(mirror: MirrorConfig, silent: str | None, budget_s: float, rtt_s: float | None) -> dict[str, Any]:
    """Step 3's group sync (failover direction), bounded by three source budgets or, on a long link, by the
    round trips reading the source's groups takes (``budgets.group_sync_round_trips``: the groups are
    counted first); it cannot run when the source did not answer (raised: the runner lists the optional
    step as not run)."""
    if silent:
        raise ClusterUnreachableError(f"the source did not answer ({silent})")
    bound = budget_s * 3
    if rtt_s is not None:
        source = Cluster.resolve("source", mirror.source, mirror.name)
        count = len(within(lambda: kafka_groups.list_groups(source), budgets.stretched(budget_s, rtt_s, budgets.ASK),
                           f"the source's groups of {mirror.name}"))
        bound = budgets.stretched(bound, rtt_s, budgets.group_sync_round_trips(count, groups.READ_PARALLELISM))
    return within(lambda: groups.move_groups(mirror, groups.GroupMoveOptions()), bound,
                  f"the final group sync of {mirror.name}")


def _source_ends_or_none(mirror: MirrorConfig, tps: list[tuple[str, int]], budget_s: float,
                         say: Callable[[str], None]) -> dict[tuple[str, int], int] | None:
    """The source's stable ends now, or None when it does not answer within the budget: then the loss
    report uses the last ends the mirror observed, and says so (``source_answered``)."""
    try:
        return within(lambda: _source_ends(mirror, tps), budget_s, f"the source of {mirror.name}")
    except Exception as exc:  # noqa: BLE001 - the source is allowed to be gone; the report says it did not answer
        say(f"promote {mirror.name}: the source did not answer ({calls.error_text(exc)}): the loss report uses the "
            f"last source ends the mirror observed")
        return None
