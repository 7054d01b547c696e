"""Write rights for a promotion whose source does not answer: the grants the latest readiness report staged.
Pure; the reads and the grants are driver/promote.py's and driver/writerights.py's.

The promotion's "grant write rights on the target" step reads the source's WRITE ACLs of the mirrored topics
(core/writerights.grants). When the source is gone it cannot; the readiness report (core/readiness.py), run
daily and before any switchover, computed the same grants while the source answered ("the WRITE grants the
switch will make", its ``drift`` check) and is recorded on the mirror's lag topic on the target. A report no
older than ``STAGED_MAX_AGE_HOURS`` is taken as what the source held; an older one, or none, is not (a producer
principal added or removed since would be missed or wrongly granted), and the step fails as before, naming
the ACLs to add by hand (docs/disaster-recovery.md, "Write rights during the switch").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from eosmirror.core.aclcopy import TopicAcl
from eosmirror.core.readiness import STAGED_FIGURE, Report

STAGED_MAX_AGE_HOURS = 48.0      # two daily reports: one missed report still leaves a usable one


@dataclass(frozen=True)
class Staged:
    """What a promotion with a silent source grants: ``acls`` (on the promoted target topics) from the report of
    ``age_s`` seconds ago; ``why_not`` says why no report can stand in for the source ("" when one can)."""

    acls: tuple[TopicAcl, ...] = ()
    age_s: float = 0.0
    report_ms: int = 0
    left_out: tuple[TopicAcl, ...] = ()     # staged for topics this promotion does not hold (dropped since)
    why_not: str = ""

    def said(self) -> str:
        """The step's first line: where the grants come from."""
        return (f"the source did not answer: granting the {len(self.acls)} WRITE ACL(s) the readiness report of "
                f"{age_text(self.age_s)} ago staged (its source's write grants then; a producer principal changed "
                f"on the source since is not known)"
                + (f"; {len(self.left_out)} staged grant(s) on topics this promotion does not hold left out"
                   if self.left_out else ""))


def age_text(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def staged(report: Report | None, target_topics: Iterable[str], now_ms: int,
           max_age_hours: float = STAGED_MAX_AGE_HOURS) -> Staged:
    """The grants of ``report`` (the latest recorded readiness report) for the promoted ``target_topics``, or why
    it cannot stand in for the source: none recorded, older than the bound, or its drift check did not list the
    grants (ACL sync off then, no authorizer, or the check could not read the ACLs)."""
    if report is None:
        return Staged(why_not="no readiness report was recorded in the last week (`eosmirror readiness <mirror> "
                              "--record`, or the readiness DAG, stages the grants while the source answers)")
    age_s = max(0.0, (now_ms - report.time_ms) / 1000)
    if age_s > max_age_hours * 3600:
        return Staged(age_s=age_s, report_ms=report.time_ms, why_not=(
            f"the latest readiness report is {age_text(age_s)} old, older than the {max_age_hours:g} h bound: the "
            f"source's write grants may have changed since"))
    drift = next((c for c in report.checks if c.name == "drift"), None)
    raw = None if drift is None else drift.figures.get(STAGED_FIGURE)
    try:
        acls = [_acl(item) for item in raw] if isinstance(raw, list) else None
    except (KeyError, TypeError):
        acls = None
    if acls is None:
        why = ("it has no drift check (no mirrored topic then)" if drift is None else
               f"its drift check did not read the source's write ACLs ({drift.reason})")
        return Staged(age_s=age_s, report_ms=report.time_ms,
                      why_not=f"the latest readiness report ({age_text(age_s)} ago) staged no write grants: {why}")
    wanted = set(target_topics)
    return Staged(acls=tuple(a for a in acls if a.topic in wanted), age_s=age_s, report_ms=report.time_ms,
                  left_out=tuple(a for a in acls if a.topic not in wanted))


def _acl(item: Any) -> TopicAcl:
    return TopicAcl(topic=str(item["topic"]), pattern=str(item["pattern"]), principal=str(item["principal"]),
                    host=str(item["host"]), operation=str(item["operation"]), permission=str(item["permission"]))
