"""HTML, SVG and Prometheus text of the "Mirror lag" page and the "Readiness" page. Pure: statuses, samples and
readiness reports in, text out.

The chart is drawn here, server-side, as inline SVG: the browser fetches nothing, from nowhere.
"""

from __future__ import annotations

from html import escape
from typing import Any, Mapping

from eosmirror.core import lagview, recoverypoint
from eosmirror.core import readiness as rules
from eosmirror.core.lag import SEVERITY, MirrorSample, MirrorStatus

COLOURS = {"OK": "#2e7d32", "LAGGING": "#f9a825", "STALLED": "#ef6c00", "STOPPED": "#c62828", "ERROR": "#6a1b9a",
           "FOREIGN": "#b71c1c",   # records the mirror did not write on its target (core/foreign.py)
           # a mirror's disaster-recovery states (docs/disaster-recovery.md): no alert, it copies no more
           "SWITCHING-OVER": "#1565c0", "SWITCHED-OVER": "#1565c0", "PROMOTING": "#37474f", "PROMOTED": "#37474f"}
RANGES = {"1h": 3_600_000, "24h": 86_400_000, "7d": 7 * 86_400_000}
MAX_POINTS = 400

STYLE = """body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse}
td,th{padding:.3em .7em;border-bottom:1px solid #ddd;text-align:right}td:first-child,th:first-child{text-align:left}
.status{color:#fff;border-radius:.3em;padding:.1em .5em;font-weight:600}.reason{color:#555;font-size:.9em}
.breach{color:#c62828;font-weight:600}nav a{margin-right:1em}svg{background:#fafafa;border:1px solid #ddd}"""


def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{escape(title)}</h1>{body}</body></html>")


def badge(status: str) -> str:
    return f"<span class='status' data-status='{status}' style='background:{COLOURS[status]}'>{status}</span>"


def _slo_cell(status: MirrorStatus) -> str:
    text = escape(lagview.slo_text(status))
    return f"<span class='breach'>{text}</span>" if status.breached else text


def overview(statuses: list[MirrorStatus], now_ms: int,
             readiness: Mapping[str, rules.Report | None] | None = None) -> str:
    """One row per mirror: status, record lag, time lag, last run, last commit, SLO (and, given the latest
    readiness reports, each mirror's readiness)."""
    rows = []
    for s in statuses:
        rows.append(
            f"<tr data-mirror='{escape(s.mirror)}'><td><a href='mirror/{escape(s.mirror)}'>{escape(s.mirror)}</a></td>"
            f"<td>{badge(s.status)}</td><td class='record-lag'>{s.record_lag}</td>"
            f"<td class='time-lag'>{s.time_lag_seconds:.1f} s</td><td>{escape(lagview.last_run_text(s, now_ms))}</td>"
            f"<td>{escape(lagview.ago(s.last_commit_ms, now_ms))}</td><td>{_slo_cell(s)}</td>"
            + (readiness_cell(readiness.get(s.mirror), s.mirror, now_ms) if readiness is not None else "")
            + f"<td class='reason'>{escape(s.reason)}{' (cap-limited)' if s.cap and s.cap.limiting else ''}</td></tr>")
    table = ("<table id='mirrors'><tr><th>mirror</th><th>status</th><th>record lag</th><th>time lag</th>"
             "<th>last run</th><th>last commit</th><th>SLO</th>" + ("<th>readiness</th>" if readiness is not None
                                                                     else "") + "<th></th></tr>" + "".join(rows)
             + "</table>")
    note = (f"<p class='reason'>At {lagview.iso(now_ms)}. Record lag: offsets still to copy (last stable offset - "
            f"progress; markers and aborted records occupy offsets). Time lag: age of the oldest committed source "
            f"record not yet mirrored. Same figures: <code>eosmirror lag --json</code>, <a href='api/lag'>JSON</a>, "
            f"<a href='metrics'>metrics</a>.</p>")
    return _page("Mirror lag", table + note)


def _downsample(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """At most MAX_POINTS points, each bucket's maximum (a peak must not vanish from the chart)."""
    if len(points) <= MAX_POINTS:
        return points
    size = -(-len(points) // MAX_POINTS)
    return [max(points[i:i + size], key=lambda p: p[1]) for i in range(0, len(points), size)]


def chart(samples: list[MirrorSample], since_ms: int, now_ms: int, width: int = 900, height: int = 220) -> str:
    """SVG: record lag (blue, left axis) and time lag (red, right axis) of the mirror over time."""
    record = _downsample([(s.time_ms, float(sum(p.record_lag for p in s.partitions))) for s in samples])
    times = _downsample([(s.time_ms, recoverypoint.time_lag_seconds(s)) for s in samples])
    pad, span = 50, max(1, now_ms - since_ms)

    def line(points: list[tuple[int, float]], colour: str, name: str) -> str:
        top = max((v for _, v in points), default=0.0) or 1.0
        xys = [(pad + (t - since_ms) / span * (width - 2 * pad), height - pad / 2 - v / top * (height - pad))
               for t, v in points]
        xy = " ".join(f"{x:.1f},{y:.1f}" for x, y in xys)
        # Few samples: mark each one, so a single sample or a flat stretch is still visible.
        dots = "".join(f"<circle cx='{x:.1f}' cy='{y:.1f}' r='2.5' fill='{colour}'/>" for x, y in xys) \
            if len(xys) <= 60 else ""
        return (f"<polyline class='{name}' fill='none' stroke='{colour}' stroke-width='1.5' points='{xy}'/>{dots}"
                f"<text x='{pad if name == 'record-lag' else width - pad}' y='14' fill='{colour}' font-size='12' "
                f"text-anchor='{'start' if name == 'record-lag' else 'end'}'>{name.replace('-', ' ')} "
                f"(max {top:g}{' s' if name == 'time-lag' else ''})</text>")

    axis = (f"<line x1='{pad}' y1='{height - pad / 2}' x2='{width - pad}' y2='{height - pad / 2}' stroke='#999'/>"
            f"<text x='{pad}' y='{height - 4}' font-size='11'>{lagview.iso(since_ms)}</text>"
            f"<text x='{width - pad}' y='{height - 4}' font-size='11' text-anchor='end'>{lagview.iso(now_ms)}</text>")
    empty = "" if samples else f"<text x='{width / 2}' y='{height / 2}' text-anchor='middle'>no samples yet</text>"
    return (f"<svg id='lag-chart' xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
            f"data-samples='{len(samples)}'>{axis}{line(record, '#1565c0', 'record-lag')}"
            f"{line(times, '#c62828', 'time-lag')}{empty}</svg>")


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def recovery_table(status: MirrorStatus, samples: list[MirrorSample], now_ms: int) -> str:
    """Time lag now and its percentiles over the last hour and day (the recovery point, docs/recovery-point.md)."""
    rows = [f"<tr data-window='now'><td>now</td><td>-</td><td>-</td><td>-</td>"
            f"<td>{_seconds(status.time_lag_seconds)}</td></tr>"]
    rows += [f"<tr data-window='{escape(r.window)}'><td>{escape(r.window)}</td><td>{r.samples}</td>"
             f"<td>{_seconds(r.p50_seconds)}</td><td>{_seconds(r.p99_seconds)}</td><td>{_seconds(r.max_seconds)}</td>"
             f"</tr>" for r in recoverypoint.recovery_points(samples, now_ms)]
    return ("<h2>Recovery point</h2><p>Time lag: what a failover would lose, as the age of the oldest committed "
            "source record the target does not hold yet; percentiles of the samples the lag DAG recorded.</p>"
            "<table id='recovery-point'><tr><th>window</th><th>samples</th><th>p50</th><th>p99</th><th>max</th></tr>"
            + "".join(rows) + "</table>")


def mirror_page(status: MirrorStatus, samples: list[MirrorSample], window: str, now_ms: int) -> str:
    """The chart over ``window`` (1h, 24h or 7d), the recovery point and one row per partition. ``samples``: at
    least those of the last day (the recovery point's longest window) and of ``window``."""
    since = now_ms - RANGES[window]
    links = " ".join(f"<a href='?range={key}'>{'<b>' + key + '</b>' if key == window else key}</a>" for key in RANGES)
    rows = "".join(
        f"<tr data-partition='{escape(p.label)}'><td>{escape(p.label)}</td><td>{badge(p.status)}</td>"
        f"<td>{p.high_watermark}</td><td>{p.last_stable}</td><td>{'-' if p.progress is None else p.progress}</td>"
        f"<td class='record-lag'>{p.record_lag}</td>"
        f"<td class='time-lag{' breach' if p.breach else ''}'>{p.time_lag_seconds:.1f} s</td>"
        f"<td>{escape(lagview.ago(p.last_commit_ms, now_ms))}</td><td class='reason'>{escape(p.reason)}</td></tr>"
        for p in status.partitions)
    body = (f"<nav><a href='../'>all mirrors</a> range: {links}</nav>"
            f"<p>{badge(status.status)} record lag <b>{status.record_lag}</b>, time lag "
            f"<b>{status.time_lag_seconds:.1f} s</b>, SLO {_slo_cell(status)}, last run "
            f"{escape(lagview.last_run_detail(status, now_ms))}. <span class='reason'>{escape(status.reason)}</span></p>"
            + "".join(f"<p class='breach'>{escape(a)}</p>" for a in status.alerts())
            + (f"<p id='cap' data-limiting='{str(status.cap.limiting).lower()}'>{escape(lagview.cap_text(status))}</p>"
               if status.cap is not None else "")
            + chart([s for s in samples if s.time_ms >= since], since, now_ms)
            + recovery_table(status, samples, now_ms)
            + "<h2>Partitions</h2><table id='partitions'><tr><th>partition</th><th>status</th><th>high watermark</th>"
              "<th>last stable</th><th>progress</th><th>record lag</th><th>time lag</th><th>last commit</th><th></th></tr>"
            + rows + "</table>" + _groups(status))
    return _page(f"Mirror lag: {status.mirror}", body)


def _groups(status: MirrorStatus) -> str:
    """The consumer groups on the target (mirrors with a groups section)."""
    if status.groups_error:
        return f"<h2>Consumer groups on the target</h2><p class='breach'>{escape(status.groups_error)}</p>"
    if not status.groups:
        return ""
    rows = "".join(f"<tr data-group='{escape(g.group)}'><td>{escape(g.group)}</td><td>{escape(g.state)}</td>"
                   f"<td>{g.partitions}</td><td class='record-lag'>{g.record_lag}</td></tr>" for g in status.groups)
    return ("<h2>Consumer groups on the target</h2><table id='groups'><tr><th>group</th><th>state</th>"
            "<th>partitions</th><th>record lag</th></tr>" + rows + "</table>")


def metrics(statuses: list[MirrorStatus], now_ms: int,
            readiness: Mapping[str, rules.Report | None] | None = None) -> tuple[bytes, str]:
    """Prometheus text: per mirror and partition, record lag, time lag, last commit age, status; per mirror that
    copies (not switched over, promoted ...) with a recorded readiness report, its verdict and age."""
    from prometheus_client import CollectorRegistry, Gauge, generate_latest
    from prometheus_client.exposition import CONTENT_TYPE_LATEST

    registry = CollectorRegistry()
    labels = ["mirror", "topic", "partition"]
    g: dict[str, Any] = {
        "records": Gauge("eosmirror_lag_records", "offsets still to copy (LSO - progress)", labels, registry=registry),
        "seconds": Gauge("eosmirror_lag_seconds", "age of the oldest committed source record not yet mirrored",
                         labels, registry=registry),
        "commit": Gauge("eosmirror_last_commit_age_seconds", "seconds since the mirror last committed the partition",
                        labels, registry=registry),
        "status": Gauge("eosmirror_lag_status", "1 for the partition's current status", labels + ["status"],
                        registry=registry),
        "mirror": Gauge("eosmirror_mirror_status", "1 for the mirror's current status", ["mirror", "status"],
                        registry=registry),
        "group": Gauge("eosmirror_group_lag_records", "a consumer group's committed offsets behind the target's "
                       "last stable offsets (mirrors with a groups section)", ["mirror", "group"], registry=registry),
        "breach": Gauge("eosmirror_mirror_slo_breached", "1 when a partition's time lag exceeds max_lag_seconds",
                        ["mirror"], registry=registry),
        "ready": Gauge("eosmirror_readiness_ready", "1 when the mirror's latest readiness report says READY, 0 when "
                       "NOT READY (mirrors with a recorded report)", ["mirror"], registry=registry),
        "ready_age": Gauge("eosmirror_readiness_age_seconds", "seconds since the mirror's latest readiness report",
                           ["mirror"], registry=registry),
        "cap": Gauge("eosmirror_cap_limited", "1 when the bandwidth cap, not the source, limits the mirror "
                     "(mirrors with max_bytes_per_second)", ["mirror"], registry=registry),
    }
    copying = {s.mirror for s in statuses if s.status in SEVERITY}   # a switched-over (...) mirror is not judged
    for name, report in sorted((readiness or {}).items()):
        if report is not None and name in copying:
            g["ready"].labels(name).set(1 if report.ready else 0)
            g["ready_age"].labels(name).set(max(0, now_ms - report.time_ms) / 1000)
    for s in statuses:
        for status in (*SEVERITY, *(() if s.status in SEVERITY else (s.status,))):   # or its DR state
            g["mirror"].labels(s.mirror, status).set(1 if s.status == status else 0)
        g["breach"].labels(s.mirror).set(1 if s.breached else 0)
        if s.cap is not None:
            g["cap"].labels(s.mirror).set(1 if s.cap.limiting else 0)
        for group in s.groups:
            g["group"].labels(s.mirror, group.group).set(group.record_lag)
        for p in s.partitions:
            key = (s.mirror, p.source_topic, str(p.partition))
            g["records"].labels(*key).set(p.record_lag)
            g["seconds"].labels(*key).set(p.time_lag_seconds)
            if p.last_commit_ms is not None:
                g["commit"].labels(*key).set(max(0, now_ms - p.last_commit_ms) / 1000)
            for status in SEVERITY:
                g["status"].labels(*key, status).set(1 if p.status == status else 0)
    return generate_latest(registry), CONTENT_TYPE_LATEST


# --- readiness (core/readiness.py): the overview's column, the page, its chart -------------------------

READINESS_COLOURS = {rules.READY_VERDICT: "#2e7d32", rules.NOT_READY_VERDICT: "#c62828",
           rules.OK: "#2e7d32", rules.WARN: "#f9a825", rules.NOT_READY: "#c62828"}


def verdict_badge(text: str) -> str:
    colour = READINESS_COLOURS.get(text, "#757575")
    return f"<span class='status' data-verdict='{escape(text)}' style='background:{colour}'>{escape(text.upper())}</span>"


def readiness_cell(report: rules.Report | None, mirror: str, now_ms: int) -> str:
    """The overview's readiness cell: the latest verdict, how old, a link to the page."""
    if report is None:
        return f"<td class='readiness' data-verdict=''><a href='readiness/{escape(mirror)}'>no report</a></td>"
    return (f"<td class='readiness' data-verdict='{escape(report.verdict)}'><a href='readiness/{escape(mirror)}'>"
            f"{verdict_badge(report.verdict)}</a> {escape(lagview.ago(report.time_ms, now_ms))}</td>")


def readiness_chart(history: list[rules.Report], since_ms: int, now_ms: int, width: int = 900, height: int = 180) -> str:
    """SVG: per report, its blocking checks (a dot, red when NOT READY) and the expected recovery time (blue)."""
    pad, span = 50, max(1, now_ms - since_ms)
    blocking = [(r.time_ms, float(len(r.reasons())), r.ready) for r in history]
    recovery = [(r.time_ms, float(_recovery(r) or 0.0)) for r in history]
    top_b = max((v for _, v, _ in blocking), default=0.0) or 1.0
    top_r = max((v for _, v in recovery), default=0.0) or 1.0

    def x(t: int) -> float:
        return pad + (t - since_ms) / span * (width - 2 * pad)

    def y(v: float, top: float) -> float:
        return height - pad / 2 - v / top * (height - pad)

    dots = "".join(f"<circle class='report' data-ready='{str(ok).lower()}' cx='{x(t):.1f}' cy='{y(v, top_b):.1f}' "
                   f"r='3' fill='{READINESS_COLOURS[rules.READY_VERDICT if ok else rules.NOT_READY_VERDICT]}'/>"
                   for t, v, ok in blocking)
    line = " ".join(f"{x(t):.1f},{y(v, top_r):.1f}" for t, v in recovery)
    axis = (f"<line x1='{pad}' y1='{height - pad / 2}' x2='{width - pad}' y2='{height - pad / 2}' stroke='#999'/>"
            f"<text x='{pad}' y='{height - 4}' font-size='11'>{lagview.iso(since_ms)}</text>"
            f"<text x='{width - pad}' y='{height - 4}' font-size='11' text-anchor='end'>{lagview.iso(now_ms)}</text>"
            f"<text x='{pad}' y='14' font-size='12' fill='#c62828'>blocking checks (max {top_b:g})</text>"
            f"<text x='{width - pad}' y='14' font-size='12' fill='#1565c0' text-anchor='end'>expected recovery "
            f"time (max {top_r:g} s)</text>")
    empty = "" if history else f"<text x='{width / 2}' y='{height / 2}' text-anchor='middle'>no reports yet</text>"
    return (f"<svg id='readiness-chart' xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
            f"data-reports='{len(history)}'>{axis}<polyline class='recovery' fill='none' stroke='#1565c0' "
            f"stroke-width='1.5' points='{line}'/>{dots}{empty}</svg>")


def _recovery(report: rules.Report) -> float | None:
    for c in report.checks:
        if c.name == "switchover" and "expected_recovery_seconds" in c.figures:
            return float(c.figures["expected_recovery_seconds"])
    return None


def readiness_page(mirror: str, history: list[rules.Report], since_ms: int, now_ms: int) -> str:
    """The latest report's checks and the history's chart."""
    latest = history[-1] if history else None
    if latest is None:
        head = (f"<p>No readiness report recorded for {escape(mirror)} since {lagview.iso(since_ms)}: run "
                f"<code>eosmirror readiness {escape(mirror)} --record</code> or its DAG.</p>")
        table = ""
    else:
        head = (f"<p id='verdict'>{verdict_badge(latest.verdict)} at {lagview.iso(latest.time_ms)} "
                f"({escape(lagview.ago(latest.time_ms, now_ms))})</p>")
        rows = "".join(f"<tr data-check='{escape(c.name)}'><td>{escape(c.name)}</td><td>{verdict_badge(c.verdict)}</td>"
                       f"<td class='reason'>{escape(c.reason)}</td></tr>" for c in latest.checks)
        table = "<table id='checks'><tr><th>check</th><th>verdict</th><th></th></tr>" + rows + "</table>"
    body = (f"<nav><a href='../'>all mirrors</a> <a href='../mirror/{escape(mirror)}'>lag</a></nav>" + head + table
            + "<h2>History</h2>" + readiness_chart(history, since_ms, now_ms)
            + "<p class='reason'>docs/disaster-recovery.md, \"Readiness\". Same report: "
              f"<code>eosmirror readiness {escape(mirror)} --json</code>.</p>")
    return _page(f"Readiness: {mirror}", body)


