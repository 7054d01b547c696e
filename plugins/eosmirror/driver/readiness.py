"""The readiness report's I/O (`eosmirror readiness`, the readiness DAG): read each check's figures from the
brokers, judge them with core/readiness.py, and (``record``) append the report to the mirror's lag topic.

Reads only, apart from that record: the switchover dry run checks the transition table, reads the ends, the
progress, the group sync's plan and the source's write grants, but never fences, records a phase, writes
a group offset or changes an ACL (docs/disaster-recovery.md, "Readiness").
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from eosmirror.core import groupfailover, transitions
from eosmirror.core import readiness as rules
from eosmirror.core import writerights as rights_rules
from eosmirror.core.aclcopy import TopicAcl, to_target
from eosmirror.core.config import DEFAULT_GROUP_EXCLUDES, MirrorConfig, own_groups
from eosmirror.core.errors import EosMirrorError
from eosmirror.core.mirrorstate import Phase
from eosmirror.core.transitions import Command
from eosmirror.driver import acls, fencing, foreigncheck, groups, topics, verify, writerights
from eosmirror.driver import lag as lag_driver
from eosmirror.driver.lag import Clusters
from eosmirror.driver.switchover import SwitchoverOptions, source_ends
from eosmirror.kafka import groups as kafka_groups
from eosmirror.kafka import lagstore, progress, state
from eosmirror.kafka.cluster import Cluster

log = logging.getLogger(__name__)


def report(mirror: MirrorConfig, clusters: Clusters | None = None, now_ms: int | None = None,
           run_verify: bool = False, record: bool = False) -> rules.Report:
    """Every check of the report; a check whose figures cannot be read is ``not ready``, naming why."""
    now_ms = now_ms if now_ms is not None else lagstore.now_ms()
    clusters = clusters or Clusters.of(mirror)
    source, target = clusters.source, clusters.target
    pairs: list[Any] = []

    def guarded(name: str, fn: Callable[[], rules.Check]) -> rules.Check:
        try:
            return fn()
        except EosMirrorError as exc:
            log.warning("mirror %s: readiness check %s: %s", mirror.name, name, exc)
            return rules.unreadable(name, str(exc))

    def resolve() -> rules.Check:
        pairs.extend(topics.resolve(mirror, source))
        return rules.Check("topics", rules.OK if pairs else rules.WARN,
                           f"{len(pairs)} mirrored topic(s)" if pairs else "no source topic matches the mirror",
                           {"topics": sorted(p.source for p in pairs)})

    checks = [guarded("topics", resolve),
              guarded("lag", lambda: rules.lag_check(lag_driver.report(mirror, now_ms, clusters=clusters)))]
    if pairs:
        checks += [guarded("foreign", lambda: _foreign(mirror, target)),
                   guarded("writers", lambda: _writers(mirror, target, [p.target for p in pairs])),
                   guarded("drift", lambda: drift(mirror, source, target, pairs))]
    dry: list[rules.DryRun] = []

    def switchover() -> rules.Check:
        dry.append(dry_run(mirror, source, target, pairs))
        return rules.dry_run_check(dry[0])

    checks += [guarded("groups", lambda: _groups(mirror, source)),
               guarded("verify", lambda: _verify(mirror) if run_verify else _last_verify(mirror, target, now_ms)),
               guarded("switchover", switchover)]
    if dry and dry[0].groups_behind is not None:      # the dry run planned the group sync: how far behind it is
        checks.append(rules.group_sync_check(dry[0].groups_behind, dry[0].groups_planned))
    result = rules.Report(mirror.name, now_ms, tuple(checks))
    if record:
        lagstore.ensure_topic(target, mirror.name, mirror.lag.history_days, mirror.target_replication_factor)
        lagstore.append(target, mirror.name, rules.REPORT_KEY, [result.encode()])
    return result


def _foreign(mirror: MirrorConfig, target: Cluster) -> rules.Check:
    """The runs' foreign-write check (driver/foreigncheck.py), read only: one batched ListOffsets when clean."""
    found = foreigncheck.check(target, mirror.progress_group, fencing.mirrored_partitions(target, mirror),
                               client_id=f"eosmirror-{mirror.name}-readiness-target-check")
    return rules.foreign_check([r.line() for r in found.foreign], found.summary())


def _writers(mirror: MirrorConfig, target: Cluster, target_topics: list[str]) -> rules.Check:
    found = writerights.target_writers(target, target_topics, mirror.mirror_principals)
    return rules.writers_check([w.line() for w in found.writers], found.everyone, found.unknown, found.super_users,
                               found.super_unknown)


def drift(mirror: MirrorConfig, source: Cluster, target: Cluster, pairs: list[Any]) -> rules.Check:
    """Partitions and synced configs of each mirrored topic on both sides; with topic ACL sync, the ACLs it
    copies that the target lacks and the WRITE grants the switch will make."""
    existing = topics.describe(target, [p.target for p in pairs])
    source_configs = topics.configs_of(source, [p.source for p in pairs], non_default_only=True)
    target_configs = topics.configs_of(target, [p.target for p in pairs if p.target in existing], non_default_only=False)
    found = [rules.TopicDrift(p.source, p.target, p.partitions,
                              existing[p.target].partitions if p.target in existing else None,
                              rules.config_differences(source_configs.get(p.source, {}),
                                                       target_configs.get(p.target, {}), mirror.sync_topic_configs)
                              if p.target in existing else {})
             for p in pairs]
    missing: list[TopicAcl] = []
    staged: list[TopicAcl] | None = None
    note = ""
    if mirror.sync_topic_acls:
        try:
            source_acls = acls.list_topic_acls(source)
            target_acls = set(acls.list_topic_acls(target))
            target_of = {p.source: p.target for p in pairs}
            wanted, _ = to_target(source_acls, target_of)
            missing = [a for a in wanted if a not in target_acls]
            own = rights_rules.own_principals(mirror.mirror_principals, source.settings, target.settings)
            staged = rights_rules.grants(source_acls, target_of, own)
        except acls.NoAuthorizerError as exc:
            note = f"topic ACLs not compared: {exc}"
    return rules.drift_check(found, missing, staged, note)


def _groups(mirror: MirrorConfig, source: Cluster) -> rules.Check:
    # Groups no sync ever moves (console consumers, Connect, eosmirror's own readers) are not counted.
    present = groupfailover.select_groups(kafka_groups.list_groups(source), (".*",), DEFAULT_GROUP_EXCLUDES,
                                          never=own_groups(mirror))
    covered = (groupfailover.select_groups(present, mirror.groups.include, mirror.groups.exclude,
                                           never=own_groups(mirror)) if mirror.groups is not None else [])
    found = rules.groups_check(present, covered, own_groups(mirror), mirror.groups is not None)
    listing = groups.partial_listing(source)     # without Describe on the cluster, "all covered" says nothing
    if not listing:
        return found
    return rules.Check("groups", rules.WARN, f"cannot tell which source groups the group sync leaves out: {listing} "
                       f"({len(present)} seen). {found.reason}", found.figures)


def _last_verify(mirror: MirrorConfig, target: Cluster, now_ms: int) -> rules.Check:
    return rules.last_verify_check(lagstore.latest_verify(target, mirror.name, now_ms, mirror.progress_group), now_ms)


def _verify(mirror: MirrorConfig) -> rules.Check:
    checks = verify.verify(mirror)
    verify.record(mirror, checks, lagstore.now_ms())
    return rules.verify_check(True, len(checks), sum(c.records for c in checks),
                              [f"{c.source_topic}[{c.partition}]" for c in checks if not c.ok],
                              [f"{c.source_topic}[{c.partition}]" for c in checks if c.ok and not c.complete])


def dry_run(mirror: MirrorConfig, source: Cluster, target: Cluster, pairs: list[Any],
            options: SwitchoverOptions | None = None) -> rules.DryRun:
    """The switchover's checks (driver/switchover.py) that need no write, each timed: the transition table,
    the source's stable ends against the committed progress (what the final run copies), the group sync's
    plan, the write grants' preconditions. Never fences, records, moves a group or changes an ACL."""
    options = options or SwitchoverOptions()
    timed: dict[str, float] = {}

    def step(name: str, fn: Callable[[], Any]) -> Any:
        began = time.monotonic()
        try:
            return fn()
        finally:
            timed[name] = time.monotonic() - began

    current = step("read state", lambda: state.read_mirror_state(target, mirror.name, mirror.progress_group))
    try:
        mode = transitions.start(Command.SWITCHOVER, current, mirror.name)
        refused = "" if mode is not transitions.Mode.DONE else f"switched over already ({current.describe()})"
    except EosMirrorError as exc:
        refused = str(exc)
    if current.phase is not Phase.MIRRORING and not refused:
        refused = f"the mirror is {current.describe()}"
    tps = [(p.source, k) for p in pairs for k in range(p.partitions)]
    target_of = {p.source: p.target for p in pairs}
    ends = step("source ends", lambda: source_ends(source, tps)) if tps else {}
    committed = step("record lag", lambda: progress.read(target, [(target_of[t], k) for t, k in tps],
                                                         mirror.progress_group, stable=True)) if tps else {}
    held = step("open transactions", lambda: fencing.open_transactions(target, [(target_of[t], k) for t, k in tps])) \
        if tps else {}
    to_copy, never = 0, []
    for t, k in tps:
        done = committed.get((target_of[t], k))
        if done is None:
            if ends[(t, k)] > 0:
                never.append(f"{t}[{k}]")
            continue
        to_copy += max(0, ends[(t, k)] - done.offset)
    problems: list[str] = []
    planned, behind = 0, None
    if mirror.groups is not None:
        plan = step("group sync (plan)", lambda: groups.move_groups(mirror, groups.GroupMoveOptions(dry_run=True)))
        planned, behind = len(plan["groups"]), rules.groups_behind(plan["groups"])
        problems = [f"{g['group']}: {len(g['left'])} partition(s)" for g in plan["groups"] if g.get("left")]
    rights_note = ""
    if mirror.sync_topic_acls and pairs:
        rights_note = step("write rights (plan)", lambda: _rights_note(target))
    return rules.DryRun(refused=refused, state=current.phase.value, to_copy=to_copy, never_copied=tuple(never),
                        group_problems=tuple(problems), open_transactions=tuple(f"{t}[{k}]" for t, k in sorted(held)),
                        groups_planned=planned, groups_behind=behind, rights_note=rights_note,
                        step_seconds=timed, last_run_seconds=_last_run_seconds(mirror, target),
                        quiet_seconds=options.quiet_s)


def _rights_note(target: Cluster) -> str:
    """Why the switch's write-rights step would not run (it is optional by design: exit 6), "" when it would."""
    try:
        acls.list_topic_acls(target)
    except acls.NoAuthorizerError:
        return ""     # no authorizer on the target: every principal can write; nothing to grant
    if not acls.may(target, "ALTER"):
        return (f"{acls.principal(target)} lacks Alter on the target cluster: the switch could not grant the "
                f"producers WRITE ({rights_rules.CANNOT_WRITE_YET})")
    return ""


def _last_run_seconds(mirror: MirrorConfig, target: Cluster) -> float | None:
    """The last recorded run's duration (the lag topic's run outcomes of the last day)."""
    _, runs = lagstore.read_since(target, mirror.name, lagstore.now_ms() - 86_400_000, mirror.progress_group)
    done = [r for r in runs if r.status == "ok"]
    return done[-1].seconds if done else None


def history(mirror: MirrorConfig, since_ms: int, clusters: Clusters | None = None) -> list[rules.Report]:
    """The recorded reports since ``since_ms``, oldest first (the page's chart)."""
    clusters = clusters or Clusters.of(mirror)
    return lagstore.read_reports(clusters.target, mirror.name, since_ms, mirror.progress_group)


def latest(mirror: MirrorConfig, now_ms: int, clusters: Clusters | None = None) -> rules.Report | None:
    """The newest recorded report (of the last week); None when none was recorded or it cannot be read (the lag
    page shows "no report", the metrics leave the mirror out)."""
    try:
        clusters = clusters or Clusters.of(mirror)
        return lagstore.latest_report(clusters.target, mirror.name, now_ms, mirror.progress_group)
    except EosMirrorError as exc:
        log.warning("mirror %s: the latest readiness report could not be read: %s", mirror.name, exc)
        return None


def latest_of(mirrors: list[MirrorConfig], now_ms: int) -> dict[str, rules.Report | None]:
    """:func:`latest` of each mirror, read in parallel (each waits on its target)."""
    if not mirrors:
        return {}
    with ThreadPoolExecutor(max_workers=min(8, len(mirrors))) as pool:
        return dict(zip((m.name for m in mirrors), pool.map(lambda m: latest(m, now_ms), mirrors)))
