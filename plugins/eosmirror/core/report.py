"""Human-readable views of a run report (the JSON is the machine-readable one)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

from eosmirror.core import runreport
from eosmirror.core.planning import PartitionPlan
from eosmirror.core.runreport import RunReport
from eosmirror.core.steptimes import timing_line
from eosmirror.core.texttable import table


def plan_table(plan: Sequence[PartitionPlan]) -> str:
    rows = [[f"{p.source_topic}[{p.partition}] -> {p.target_topic}", p.start, p.end, p.pending, p.slot, p.origin]
            for p in plan]
    return table(["partition", "progress", "end", "to copy", "slot", "start from"], rows)


def summary(report: RunReport) -> str:
    r = report
    head = (f"mirror {r.mirror} run {r.run_id}: {r.status.value.upper()}{' (dry run)' if r.dry_run else ''} - "
            f"{r.records} records, {r.bytes / 1e6:.2f} MB in {r.seconds:.1f} s "
            f"({r.records_per_second:.0f} records/s, {r.mb_per_second:.2f} MB/s inside the slots)")
    lines = [head, f"  source: {r.source}", f"  target: {r.target}", f"  topics: {r.topic_sync}",
             f"  generation {r.generation}" + (" (new: fenced " + ", ".join(r.fenced_transactional_ids) + ")"
                                               if r.fenced_transactional_ids else "")]
    if r.until:
        lines.append(f"  bounded by until={r.until}")
    for line in r.writers:
        lines.append(f"  WRITER (not the mirror) {line}")
    if r.steps:
        lines.append("  " + timing_line(r.steps))
    cap = cap_line(r)
    if cap:
        lines.append("  " + cap)
    rows = []
    for slot in r.slots:
        ages = [p.record_age_ms for p in slot.partitions if p.record_age_ms is not None]
        rows.append([slot.slot, slot.status.value, slot.records, slot.bytes, slot.transactions, slot.aborts,
                     slot.seconds, f"{min(ages) / 1000:.1f} s" if ages else "-"])
    lines.append(table(["slot", "status", "records", "bytes", "txns", "aborts", "seconds", "newest age"], rows))
    for error in r.errors:
        lines.append(f"  ERROR {error}")
    return "\n".join(lines)


def cap_line(r: RunReport) -> str:
    """The bandwidth cap of the run and what it did (empty when the mirror has none)."""
    if r.max_bytes_per_second is None and r.catch_up_bytes_per_second is None:
        return ""
    rates = [f"max_bytes_per_second {r.max_bytes_per_second:,}" if r.max_bytes_per_second else "",
             f"catch_up_bytes_per_second {r.catch_up_bytes_per_second:,}" if r.catch_up_bytes_per_second else ""]
    waited = sum(s.throttled_seconds for s in r.slots)
    cut = sum(s.cap_cut_transactions for s in r.slots)
    catch_up = sum(s.catch_up_seconds for s in r.slots)
    text = f"cap: {', '.join(x for x in rates if x)}; the slots waited {waited:.1f} s on it"
    if catch_up:
        text += f", copied {catch_up:.1f} slot-seconds at the catch-up rate"
    if cut:
        text += (f"; {cut} transaction(s) reached max_transaction_seconds before their chunk was done and "
                 f"committed what they held (the chunk went on in smaller transactions)")
    return text


def partitions(report: RunReport) -> list[dict[str, Any]]:
    """Per partition: what this run copied and what it left for the next run.

    ``left`` counts offsets below the run's bound (source end, or `until`) that a record cap
    (max_records_per_partition, max_bytes_per_slot) or a failure left uncopied; markers and aborted
    records occupy offsets too, so it is an upper bound on records.
    """
    plan = {(p.source_topic, p.partition): p for p in report.plan}
    rows = []
    for slot in report.slots:
        for part in slot.partitions:
            planned = plan.get((part.source_topic, part.partition))
            available = planned.available if planned is not None else part.planned_end
            rows.append({"source_topic": part.source_topic, "target_topic": part.target_topic,
                         "partition": part.partition, "slot": slot.slot, "from": part.start,
                         "to": part.end, "records": part.records, "left": max(0, available - part.end),
                         "newest_record_age_ms": part.record_age_ms,
                         "target_from": part.target_from, "target_to": part.target_to})
    return sorted(rows, key=lambda r: (r["source_topic"], r["partition"]))


def partitions_table(rows: list[dict[str, Any]]) -> str:
    ages = [f"{r['newest_record_age_ms'] / 1000:.1f} s" if r["newest_record_age_ms"] is not None else "-" for r in rows]
    targets = [f"{r['target_from']}..{r['target_to']}" if r.get("target_from") is not None else "-" for r in rows]
    return table(["partition", "slot", "source offsets", "target offsets", "records", "left", "newest age"],
                  [[f"{r['source_topic']}[{r['partition']}] -> {r['target_topic']}", r["slot"],
                    f"{r['from']}..{r['to']}", target, r["records"], r["left"], age]
                   for r, age, target in zip(rows, ages, targets)])


def write_json(report: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write atomically (tmp file + rename) so a reader never sees half a report."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    tmp.replace(target)
    return target


# The Spark job prints its report as one line with this prefix on the driver's stdout; the Airflow
# `copy` task reads it from spark-submit's output and returns it (XCom), so `copy` and `publish`
# may run on different hosts. The report holds cluster labels, never a secret.
RESULT_MARKER = "EOSMIRROR-RUN-REPORT "


def result_line(report: runreport.Report) -> str:
    return RESULT_MARKER + json.dumps(report.to_dict(), sort_keys=True, separators=(",", ":"))


def parse_result_line(line: str) -> runreport.Report | None:
    """The report in a line of the job's output, or None when the line is something else."""
    text = line.strip()
    if not text.startswith(RESULT_MARKER):
        return None
    try:
        value = json.loads(text[len(RESULT_MARKER):])
        return runreport.from_dict(value) if isinstance(value, dict) else None
    except (ValueError, KeyError, TypeError):   # not a report: the line is printed as it is
        return None


_LEFT_REASONS = {
    "beyond_mirror": "with target records that are not copies",
    "waiting": "waiting for the mirror",
    "before_range": "before the mirror's start",
    "not_mirrored": "with nothing mirrored yet",
    "unrecorded": "inside a way back whose start is not recorded",
    "rewind_refused": "refused: would move backwards (allow_rewind)",
}


def _group_result(p: dict[str, Any], skipped: bool, reverse_mirror: str | None = None) -> str:
    """One partition of a group sync report, in words (``reverse_mirror``: on the way back)."""
    outcome, decision, records = p["outcome"], p["decision"], p["records"]
    if outcome == "waiting" and reverse_mirror and p.get("via") == "reverse":
        return (f"waiting for {reverse_mirror}: {records} offsets of the new primary not copied back yet; run "
                f"{reverse_mirror} first")
    if outcome == "waiting":
        return f"waiting for the mirror: {records} offsets not mirrored yet"
    if outcome == "before_range":
        return f"{records} offsets before the mirror's start were never mirrored"
    if outcome == "beyond_mirror":
        return f"{records} target records after the mirrored range are not copies"
    if outcome == "not_mirrored":
        return "nothing mirrored yet"
    if outcome == "unrecorded":
        back = reverse_mirror or "the reverse mirror"
        return (f"{records} offsets of the new primary went back by {back}, whose start there is not recorded "
                f"(`eosmirror history {back}` shows no `reverse` before the resume): not guessed")
    if skipped:
        return "skipped (group active)"
    return {"write": "write", "unchanged": "unchanged", "rewind_refused": "refused: would move backwards"}[decision]


def groups_table(report: dict[str, Any]) -> str:
    """A group sync report (``driver.groups.move_groups``) as one table per group."""
    mode = " (dry run: nothing written)" if report["dry_run"] else ""
    lines = [f"mirror {report['mirror']} {report['direction']}{mode}: {len(report['groups'])} group(s), "
             f"from {report['read_from']} to {report['written_to']}; checkpoints: {report['checkpoints_topic']}"]
    way = report.get("way_back")
    if way:
        lines.append(f"after the reverse of {way['forward']} ({way['state']}; {way['promotion']}): through both "
                     f"offset maps, {way['forward']}'s copies (map forward) and {way['reverse']}'s (map reverse)")
    if report.get("listing"):
        lines.append(f"groups listed partially: {report['listing']}")
    for name in report.get("groups_not_found", []):
        lines.append(f"\ngroup {name}: not found (no such group, or excluded by groups.include/exclude)")
    for g in report["groups"]:
        writes = sum(1 for p in g["partitions"] if p["decision"] == "write")
        left = g.get("left") or {}
        status = ("SKIPPED: active (has members), untouched" if g["skipped"]
                  else f"FAILED, rolled back: {g['error']}" if g["error"]
                  else f"wrote {writes} partition(s)" if g["written"]
                  else f"would write {writes} partition(s)" if writes
                  else "nothing to write" if not left else "")
        if left:
            why = ", ".join(f"{n} {_LEFT_REASONS.get(reason, reason)}" for reason, n in sorted(left.items()))
            status = (f"{status}; " if status else "") + f"LEFT {sum(left.values())} partition(s) unmoved: {why}"
        lines.append(f"\ngroup {g['group']} (state {g['state']} where written): {status}")
        rows = [[f"{p['from_topic']}[{p['partition']}]" + (f" -> {p['to_topic']}" if p["to_topic"] != p["from_topic"]
                                                          else ""), p["committed"],
                 "-" if p["current"] is None else p["current"], "-" if p["new_offset"] is None else p["new_offset"],
                 *([p.get("via") or "-"] if way else []),
                 _group_result(p, g["skipped"], way["reverse"] if way else None)] for p in g["partitions"]]
        lines.append(table(["partition", "committed", "there now", "new offset", *(["map"] if way else []), "result"],
                           rows))
        lines += [_diverged_line(p, way["forward"]) for p in g["partitions"] if way and p.get("diverged")]
    return "\n".join(lines)


def _diverged_line(p: dict[str, Any], forward: str) -> str:
    """The old source's diverged records a way-back move passes over, and where they are."""
    d = p["diverged"]
    span = f" (old source offsets {d['first_offset']}..{d['last_offset']})" if d["records"] else ""
    where = (f"a copy of each is in {d['side_topic']}" if d["side_topic"] else
             f"they stay only in the old source's log (`eosmirror reverse {forward} --divergence copy` copies them "
             f"to a side topic)")
    return (f"  {p['to_topic']}[{p['partition']}]: passes over {d['records']} of the {d['diverged']} diverged "
            f"record(s){span}, never on the new primary; {where}")
