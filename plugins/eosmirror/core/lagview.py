"""Views of lag statuses: the JSON document (CLI, page, metrics all read it) and terminal tables."""

from __future__ import annotations

import datetime as dt
from typing import Any

from eosmirror.core.lag import MirrorStatus
from eosmirror.core.texttable import table


def iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def ago(ms: int | None, now_ms: int) -> str:
    if ms is None:
        return "-"
    seconds = max(0, now_ms - ms) / 1000
    return f"{seconds:.0f} s ago" if seconds < 120 else (f"{seconds / 60:.0f} min ago" if seconds < 7200
                                                         else f"{seconds / 3600:.1f} h ago")


def document(statuses: list[MirrorStatus], now_ms: int) -> dict[str, Any]:
    """`eosmirror lag --json`: the figures of every mirror at ``now_ms``."""
    return {"time": iso(now_ms), "time_ms": now_ms, "mirrors": [s.to_json() for s in statuses],
            "alerting": [s.mirror for s in statuses if s.alerting]}


def slo_text(status: MirrorStatus) -> str:
    if status.max_lag_seconds is None:
        return "-"
    return f"{'BREACHED' if status.breached else 'ok'} ({status.max_lag_seconds:g} s)"


def last_run_text(status: MirrorStatus, now_ms: int) -> str:
    run = status.last_run
    return "-" if run is None else f"{run.status} {ago(run.finished_ms, now_ms)}"


def mirrors_table(statuses: list[MirrorStatus], now_ms: int) -> str:
    rows = [[s.mirror, s.status, s.record_lag, f"{s.time_lag_seconds:.1f} s", last_run_text(s, now_ms),
             ago(s.last_commit_ms, now_ms), slo_text(s)] for s in statuses]
    text = table(["mirror", "status", "record lag", "time lag", "last run", "last commit", "SLO"], rows)
    notes = [f"  {s.mirror}: {s.reason}" for s in statuses if s.reason and s.status != "OK"]
    notes += [f"  {a}" for s in statuses for a in s.alerts() if "SLO" in a]
    notes += [f"  {s.mirror}: {cap_text(s)}" for s in statuses if s.cap is not None]
    return text + ("\n" + "\n".join(notes) if notes else "")


def cap_text(status: MirrorStatus) -> str:
    """The bandwidth cap's line (``CapStatus.text``), or "" for a mirror without one."""
    return "" if status.cap is None else ("CAP-LIMITED: " if status.cap.limiting else "cap: ") + status.cap.text


def partitions_table(status: MirrorStatus, now_ms: int) -> str:
    rows = [[p.label, p.status, p.high_watermark, p.last_stable, "-" if p.progress is None else p.progress,
             p.record_lag, f"{p.time_lag_seconds:.1f} s" + (" !" if p.breach else ""), ago(p.last_commit_ms, now_ms)]
            for p in status.partitions]
    return table(["partition", "status", "high watermark", "last stable", "progress", "record lag", "time lag",
                   "last commit"], rows)


def last_run_detail(status: MirrorStatus, now_ms: int) -> str:
    """The last run with its records and transaction times (a mirror's own page and table)."""
    run = status.last_run
    if run is None:
        return "-"
    txns = (f", {run.transactions} transaction(s): mean {run.mean_transaction_seconds:.2f} s, "
            f"max {run.max_transaction_seconds:.2f} s" if run.transactions else "")
    return f"{last_run_text(status, now_ms)}: {run.records} records in {run.seconds:.1f} s{txns}"


def groups_table(status: MirrorStatus) -> str:
    """The consumer groups on the target and their lag; empty when the mirror has no groups section."""
    if status.groups_error:
        return f"consumer groups on the target: {status.groups_error}"
    if not status.groups:
        return ""
    rows = [[g.group, g.state, g.partitions, g.record_lag] for g in status.groups]
    return "consumer groups on the target:\n" + table(["group", "state", "partitions", "record lag"], rows)

