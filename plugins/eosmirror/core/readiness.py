"""The readiness report (`eosmirror readiness`, issue #51 item 4): could the target take over now? Pure.

A report is a list of checks, each ``ok``, ``warn`` or ``not ready`` with a reason and its figures; the
report is READY when no check is ``not ready`` (warnings are listed, they do not block). The I/O that
gathers the figures is driver/readiness.py; the definitions: docs/disaster-recovery.md, "Readiness".
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping

from eosmirror.core import groupfailover, lag
from eosmirror.core.aclcopy import TopicAcl
from eosmirror.core.writerights import acl_dict, shown

OK, WARN, NOT_READY = "ok", "warn", "not ready"
READY_VERDICT, NOT_READY_VERDICT = "READY", "NOT READY"
REPORT_KEY = b"readiness"     # its records' key on the mirror's lag topic (kafka/lagstore.py)
STAGED_FIGURE = "staged_write_grants"   # the drift check's grants as ACL fields: a promotion whose source is gone
#                                         grants them (core/stagedrights.py)
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Check:
    name: str
    verdict: str                      # OK, WARN or NOT_READY
    reason: str
    figures: Mapping[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        return f"{self.name:<16} {self.verdict.upper():<9} {self.reason}"


@dataclass(frozen=True)
class Report:
    mirror: str
    time_ms: int
    checks: tuple[Check, ...]

    @property
    def ready(self) -> bool:
        return all(c.verdict != NOT_READY for c in self.checks)

    @property
    def verdict(self) -> str:
        return READY_VERDICT if self.ready else NOT_READY_VERDICT

    def reasons(self) -> list[str]:
        """Why it is not ready: one line per blocking check."""
        return [f"{c.name}: {c.reason}" for c in self.checks if c.verdict == NOT_READY]

    def as_dict(self) -> dict[str, Any]:
        return {"v": FORMAT_VERSION, "mirror": self.mirror, "time_ms": self.time_ms, "verdict": self.verdict,
                "checks": [{**asdict(c), "figures": dict(c.figures)} for c in self.checks]}

    def encode(self) -> bytes:
        return json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> "Report":
        data = json.loads(raw)
        return cls(mirror=str(data["mirror"]), time_ms=int(data["time_ms"]),
                   checks=tuple(Check(str(c["name"]), str(c["verdict"]), str(c["reason"]), dict(c.get("figures", {})))
                                for c in data.get("checks", ())))

    def text(self) -> str:
        lines = [f"mirror {self.mirror}: {self.verdict}"] + ["  " + c.line() for c in self.checks]
        return "\n".join(lines)


# --- the verdicts, one per check ----------------------------------------------------------------------

def lag_check(status: lag.MirrorStatus) -> Check:
    """Record and time lag now. A mirror that does not copy (switched over, promoted ...) or whose lag status
    alerts (STALLED, STOPPED, ERROR), or whose time lag is over its SLO, is not ready; LAGGING warns; records
    still to copy within the SLO are what a switchover's final run copies (ok)."""
    figures = {"status": status.status, "record_lag": status.record_lag,
               "time_lag_seconds": round(status.time_lag_seconds, 3), "max_lag_seconds": status.max_lag_seconds}
    said = f"{status.status}: {status.record_lag} record(s), {status.time_lag_seconds:.1f} s behind"
    if status.status not in lag.SEVERITY:
        return Check("lag", NOT_READY, f"{status.status}: {status.reason}", figures)
    if status.alerting:
        return Check("lag", NOT_READY, f"{said}: {status.reason}", figures)
    slo = status.max_lag_seconds
    if slo is not None and status.time_lag_seconds > slo:
        return Check("lag", NOT_READY, f"{said}, over the SLO of {slo:g} s", figures)
    if status.status != lag.OK:
        return Check("lag", WARN, f"{said}: {status.reason}", figures)
    return Check("lag", OK, said, figures)


def foreign_check(lines: list[str], summary: str) -> Check:
    """Records on the target the mirror did not write (core/foreign.py): runs refuse (exit 8) until an
    operator decides, and after a switch the producers' new home would hold them."""
    if lines:
        return Check("foreign", NOT_READY, f"target partitions hold records the mirror did not write: {summary}",
                     {"partitions": lines})
    return Check("foreign", OK, summary)


def writers_check(writers: list[str], everyone: list[str], unknown: str, super_users: Iterable[str] = (),
                  super_unknown: str = "") -> Check:
    """Who but the mirror can write its target topics (driver/writerights.target_writers). A named grant to
    another principal is a split brain waiting to happen: not ready. Brokers without an authorizer (or
    ``allow.everyone.if.no.acl.found``) let anyone write, and nothing grants it: a warning, as is a listing
    that could not be read. Super users (``super.users``) can write whatever the ACLs say: a warning naming
    them (operators hold them; they are listed so that nobody takes the ACLs for the whole answer)."""
    supers = list(super_users)
    figures = {"writers": writers, "everyone": everyone, "unknown": unknown, "super_users": supers,
               "super_users_unknown": super_unknown}
    others = supers + ([f"super users not listed: {super_unknown}"] if super_unknown else [])
    if writers:
        return Check("writers", NOT_READY, f"{len(writers)} grant(s) let others write the mirrored target topics: "
                     + "; ".join(writers + others), figures)
    if everyone or unknown or others:
        return Check("writers", WARN, "; ".join(everyone + ([f"cannot tell: {unknown}"] if unknown else []) + others),
                     figures)
    return Check("writers", OK, "only the mirror can write the mirrored target topics", figures)


@dataclass(frozen=True)
class TopicDrift:
    """One mirrored topic on both clusters."""

    source: str
    target: str
    source_partitions: int
    target_partitions: int | None              # None: the target topic does not exist
    configs: Mapping[str, tuple[str | None, str | None]] = field(default_factory=dict)   # name -> (source, target)


def drift_check(topics: Iterable[TopicDrift], missing_read_acls: Iterable[TopicAcl] = (),
                staged_writes: Iterable[TopicAcl] | None = None, acl_note: str = "") -> Check:
    """Configuration drift between source and target: a target topic missing or with fewer partitions, a
    synced config that differs, a READ (or other non-WRITE) ACL the topic ACL sync would copy that the target
    lacks: not ready (the producers or consumers that move would find another topic). More target partitions
    than source ones warn (they stay unused). The WRITE grants the switch will make are listed (figures; as
    ACL fields too, ``STAGED_FIGURE``, when the source's ACLs were read: None = not read)."""
    problems: list[str] = []
    notes: list[str] = []
    figures: dict[str, Any] = {"topics": 0, "partitions": {}, "configs": {}}
    for t in topics:
        figures["topics"] += 1
        if t.target_partitions is None:
            problems.append(f"{t.target} does not exist on the target")
            figures["partitions"][t.target] = [t.source_partitions, None]
            continue
        if t.target_partitions != t.source_partitions:
            figures["partitions"][t.target] = [t.source_partitions, t.target_partitions]
            said = f"{t.source} has {t.source_partitions} partition(s), {t.target} {t.target_partitions}"
            (problems if t.target_partitions < t.source_partitions else notes).append(said)
        if t.configs:
            figures["configs"][t.target] = {k: list(v) for k, v in sorted(t.configs.items())}
            problems.append(f"{t.target}: " + ", ".join(f"{k} {s} on the source, {d} on the target"
                                                        for k, (s, d) in sorted(t.configs.items())))
    missing = [shown(a) for a in missing_read_acls]
    staged = [shown(a) for a in staged_writes or ()]
    figures["missing_acls"], figures["staged_write_acls"] = missing, staged
    if staged_writes is not None:
        figures[STAGED_FIGURE] = [acl_dict(a) for a in staged_writes]
    if missing:
        problems.append(f"{len(missing)} ACL(s) of the source missing on the target: " + "; ".join(missing))
    if acl_note:
        notes.append(acl_note)
    grants = ([f"the switch will grant {len(staged)} WRITE ACL(s) on the target: " + "; ".join(staged)]
              if staged else [])
    if problems:
        return Check("drift", NOT_READY, "; ".join(problems + notes + grants), figures)
    if notes:
        return Check("drift", WARN, "; ".join(notes + grants), figures)
    return Check("drift", OK, "; ".join([f"{figures['topics']} topic(s): partitions and synced configs equal"]
                                        + grants), figures)


def config_differences(source: Mapping[str, str], target: Mapping[str, str], synced: Iterable[str]
                       ) -> dict[str, tuple[str | None, str | None]]:
    """The synced configs whose values differ: ``source`` holds the source's non-default values (what topic
    sync copies), ``target`` every value of the target topic (as driver/topics.py compares them)."""
    return {k: (source.get(k), target.get(k)) for k in sorted(synced)
            if k in source and target.get(k) != source[k]}


def groups_check(source_groups: Iterable[str], covered: Iterable[str], own: Iterable[str], has_groups: bool) -> Check:
    """Consumer groups on the source that the group sync does not move: they would restart on the target from
    their ``auto.offset.reset``. A warning (a group may read other topics only), naming them."""
    mine, moved = set(own), set(covered)
    left = sorted(g for g in source_groups if g not in mine and g not in moved)
    figures = {"covered": sorted(moved), "uncovered": left}
    if not has_groups and left:
        return Check("groups", WARN, f"the mirror has no `groups` section: {len(left)} source group(s) would not "
                     f"move: {', '.join(left[:10])}", figures)
    if left:
        return Check("groups", WARN, f"{len(left)} source group(s) outside the group sync's include/exclude: "
                     f"{', '.join(left[:10])}", figures)
    return Check("groups", OK, f"{len(moved)} source group(s), all covered by the group sync", figures)


def groups_behind(planned: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """From the group sync's plan (dry run, failover direction: ``driver/groups.move_groups``), per covered group
    whose target commit is behind what its source commit translates to through the offset map: the partitions
    behind, by how many target offsets (records and transaction markers), and the partitions with no commit on
    the target at all. A group active on the target, a commit ahead (rewind) or one that cannot be translated
    exactly is not counted here (the dry run's ``left`` names those)."""
    out: dict[str, dict[str, int]] = {}
    for g in planned:
        if g.get("skipped"):
            continue
        behind = offsets = missing = 0
        for p in g.get("partitions", ()):
            if p.get("outcome") != groupfailover.EXACT or p.get("decision") != groupfailover.WRITE:
                continue
            if p.get("current") is None:
                missing += 1
            elif p["new_offset"] > p["current"]:
                behind, offsets = behind + 1, offsets + p["new_offset"] - p["current"]
        if behind or missing:
            out[str(g["group"])] = {"partitions": behind, "offsets": offsets, "no_target_commit": missing}
    return out


def group_sync_check(behind: Mapping[str, Mapping[str, int]], planned: int) -> Check:
    """Covered groups the group sync has not moved since they last committed on the source: after a switch they
    would re-read from their older target commit (duplicates to the application) or, with none, start from their
    ``auto.offset.reset``. A warning (the next group sync, and the switchover's own, moves them), naming each."""
    figures = {"groups_planned": planned, "behind": {g: dict(v) for g, v in sorted(behind.items())}}
    if not behind:
        return Check("group sync", OK, f"{planned} covered group(s): each target commit is where its source commit "
                     f"translates to", figures)
    said = [f"{g} ({v['offsets']} offset(s) behind on {v['partitions']} partition(s)"
            + (f", no target commit on {v['no_target_commit']}" if v["no_target_commit"] else "") + ")"
            for g, v in sorted(behind.items())]
    return Check("group sync", WARN, f"{len(behind)} covered group(s) behind their source commits (the group sync has "
                 f"not moved them since): " + "; ".join(said[:10]), figures)


def verify_check(done: bool, partitions: int = 0, records: int = 0, bad: Iterable[str] = (),
                 incomplete: Iterable[str] = ()) -> Check:
    """The record-by-record verify (run by the report with ``--verify``, else the last one recorded:
    last_verify_check). Not run: a warning. A difference or foreign record: not ready; ranges no longer
    checkable: warn."""
    bad, incomplete = list(bad), list(incomplete)
    figures = {"ran": done, "partitions": partitions, "records": records, "bad": bad, "incomplete": incomplete}
    if not done:
        return Check("verify", WARN, "not run (eosmirror records no verify result; `--verify` runs one now)", figures)
    if bad:
        return Check("verify", NOT_READY, f"{len(bad)} partition(s) differ or hold foreign records: "
                     + ", ".join(bad[:10]), figures)
    if incomplete:
        return Check("verify", WARN, f"{len(incomplete)} partition(s) could not be checked whole: "
                     + ", ".join(incomplete[:10]), figures)
    return Check("verify", OK, f"{partitions} partition(s), {records} record(s) compared: equal", figures)


VERIFY_KEY = b"verify"         # the last verify's result on the mirror's lag topic (kafka/lagstore.py)
VERIFY_MAX_AGE_DAYS = 7       # an older verify is a warning: the target has changed since


@dataclass(frozen=True)
class VerifyResult:
    """What one `eosmirror verify` found, kept on the lag topic so the readiness report can say how the
    last one ended and when (``verify`` is read only on the mirrored topics; recording it writes only there)."""

    time_ms: int
    partitions: int
    records: int
    bad: tuple[str, ...] = ()
    incomplete: tuple[str, ...] = ()

    def encode(self) -> bytes:
        return json.dumps({**asdict(self), "bad": list(self.bad), "incomplete": list(self.incomplete)},
                          sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> "VerifyResult":
        data = json.loads(raw)
        return cls(int(data["time_ms"]), int(data["partitions"]), int(data["records"]),
                   tuple(map(str, data.get("bad", ()))), tuple(map(str, data.get("incomplete", ()))))


def last_verify_check(last: VerifyResult | None, now_ms: int) -> Check:
    """The last recorded verify: none or older than VERIFY_MAX_AGE_DAYS is a warning, a difference not ready."""
    if last is None:
        return Check("verify", WARN, f"no verify recorded in the last {VERIFY_MAX_AGE_DAYS} days (`eosmirror verify "
                     f"<mirror>` records one; `readiness --verify` runs one now)", {"ran": False})
    hours = max(0.0, (now_ms - last.time_ms) / 3_600_000)
    check = verify_check(True, last.partitions, last.records, last.bad, last.incomplete)
    figures = {**check.figures, "time_ms": last.time_ms, "hours_ago": round(hours, 1)}
    reason = f"last verify {hours:.1f} h ago: {check.reason}"
    if check.verdict == OK and hours > VERIFY_MAX_AGE_DAYS * 24:
        return Check("verify", WARN, reason + f" (older than {VERIFY_MAX_AGE_DAYS} days)", figures)
    return Check("verify", check.verdict, reason, figures)


@dataclass(frozen=True)
class DryRun:
    """The switchover's checks without fencing, recording or writing (driver/readiness.dry_run)."""

    refused: str = ""                         # the transition table's refusal ("" when it may start)
    state: str = "mirroring"
    to_copy: int = 0                          # records the final run would copy (source stable end - progress)
    never_copied: tuple[str, ...] = ()        # partitions with source records and no progress
    group_problems: tuple[str, ...] = ()      # the group sync's plan: groups it would leave partly unmoved
    groups_planned: int = 0
    groups_behind: Mapping[str, Mapping[str, int]] | None = None   # groups_behind of that plan (None: no plan)
    rights_note: str = ""                     # why the write rights step would not run ("" when it would)
    open_transactions: tuple[str, ...] = ()   # target partitions an open transaction holds (the fence waits)
    step_seconds: Mapping[str, float] = field(default_factory=dict)   # the measured read-only steps
    last_run_seconds: float | None = None     # the last recorded run (the final run's likely cost)
    quiet_seconds: float = 10.0               # the switchover's quiet wait


def expected_recovery_seconds(dry: DryRun) -> float:
    """The quiet wait, a final run as long as the last one (with records to copy) and the measured steps."""
    final = (dry.last_run_seconds or 0.0) if dry.to_copy or dry.last_run_seconds else 0.0
    return round(dry.quiet_seconds + final + sum(dry.step_seconds.values()), 3)


def dry_run_check(dry: DryRun) -> Check:
    figures = {"state": dry.state, "records_to_copy": dry.to_copy, "never_copied": list(dry.never_copied),
               "groups_planned": dry.groups_planned, "open_transactions": list(dry.open_transactions), "group_problems": list(dry.group_problems),
               "step_seconds": {k: round(v, 3) for k, v in dry.step_seconds.items()},
               "last_run_seconds": dry.last_run_seconds, "expected_recovery_seconds": expected_recovery_seconds(dry)}
    expect = f"expected recovery time {figures['expected_recovery_seconds']:.1f} s"
    if dry.refused:
        return Check("switchover", NOT_READY, f"the switchover would be refused: {dry.refused}", figures)
    said = f"would pass ({dry.to_copy} record(s) for the final run); {expect}"
    warns = ([f"{len(dry.never_copied)} partition(s) hold records the mirror never copied: "
              f"{', '.join(dry.never_copied[:10])}"] if dry.never_copied else []) + (
        [dry.rights_note] if dry.rights_note else []) + (
        [f"{len(dry.open_transactions)} target partition(s) held by an open transaction (a run copying now, or a "
         f"producer the fence must abort): {', '.join(dry.open_transactions[:10])}"] if dry.open_transactions else []) + (
        [f"the group sync would leave {len(dry.group_problems)} group(s) partly unmoved: "
         + "; ".join(dry.group_problems[:10])] if dry.group_problems else [])
    if warns:
        return Check("switchover", WARN, f"{said}; " + "; ".join(warns), figures)
    return Check("switchover", OK, said, figures)


def unreadable(name: str, error: str) -> Check:
    """A check whose figures could not be read: not ready (readiness cannot be shown), naming why."""
    return Check(name, NOT_READY, f"could not be checked: {error}", {"error": error})
