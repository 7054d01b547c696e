"""report.md: the tables a person reads, rendered from report.json's document."""

from __future__ import annotations

from typing import Any

from eosmirror_tools.bench.mdtable import n as _n
from eosmirror_tools.bench.mdtable import table as _table


def results_table(doc: dict[str, Any]) -> str:
    rows = []
    for r in doc["configurations"]:
        rows.append([r["size_class"], r["label"], _n(r["records"]), _n(r["records_per_second"]),
                     _n(r["mb_per_second"], 1), _n(r["end_to_end_records_per_second"]), _n(r["wall_seconds"], 1),
                     _n(r["peak_rss_mb"]), _n(r.get("cpu_seconds"), 1), _share(r.get("others_cpu_share")),
                     _n(r["verified"]) + ("" if not r.get("error") else " (error)")
                     + (" (a broker restarted: timing void)" if r.get("brokers_restarted") else "")])
    return _table(["size", "configuration", "records", "records/s steady", "MB/s steady", "records/s end to end",
                   "wall s", "peak RSS MB", "CPU s", "others' CPU", "verified"], rows, "llrrrrrrrrl")


def _share(value: float | None) -> str:
    """Others' CPU share; flagged when a fifth of the machine or more was busy with other work."""
    if value is None:
        return "-"
    return f"{value:.0%}" + (" (busy)" if value >= 0.2 else "")


def targets_table(doc: dict[str, Any]) -> str:
    def verdict(t: dict[str, Any]) -> str:
        if t["met"] is None:
            busy = t.get("others_cpu_share") is not None and t["others_cpu_share"] > 0.05
            return "no verdict: not quiet" if busy and t["measured"] is not None else "not measured"
        return "met" if t["met"] else "MISSED"

    rows = [[t["target"], t["goal"], _n(t["measured"], 2), _share(t.get("others_cpu_share")), verdict(t)]
            for t in doc["targets"]]
    table = _table(["target", "goal", "measured", "others' CPU", ""], rows, "llrrl") if rows else "(no targets measured)"
    if rows and "quiet" in doc and not doc["quiet"]:
        table += "\n\nNOT A QUIET RUN: other work used more than 5% of the machine during a configuration."
    return table


def _ratios(doc: dict[str, Any]) -> str:
    rows = []
    for size, pairs in doc["ratios"].items():
        for name, pair in pairs.items():
            rows.append([size, name.replace("_", " "), _n(pair["steady"], 2), _n(pair["end_to_end"], 2),
                         _share(pair.get("others_cpu_share")), _n(pair["both_verified"])])
    return _table(["size", "ratio", "steady", "end to end", "others' CPU", "both verified"], rows,
                  "llrrrl") if rows else "-"


def _sweep(doc: dict[str, Any]) -> str:
    rows = [[_n(s["slots"]), s["master"] or "-", _n(s["records_per_second"]), _n(s["end_to_end_records_per_second"]),
             _n(s["wall_seconds"], 1), _n(s["verified"])] for s in doc["slot_sweep"]]
    return _table(["slots", "master", "records/s in slots", "records/s end to end", "wall s", "verified"], rows,
                  "rlrrrl") if rows else "(not run)"


def _memory(doc: dict[str, Any]) -> str:
    rows = []
    for r in doc["configurations"]:
        roles = ", ".join(f"{role} {mb:,.0f}" for role, mb in (r.get("peak_rss_by_role_mb") or {}).items())
        rows.append([r["size_class"], r["label"], _n(r["peak_rss_mb"]), roles or "-"])
    return _table(["size", "configuration", "peak RSS MB (sum of tree)", "peak per role (MB)"], rows, "llrl")


def _cost(doc: dict[str, Any]) -> str:
    rows = []
    for r in doc["configurations"]:
        cpu = r.get("cpu") or {}
        roles = ", ".join(f"{role} {sec:,.1f}" for role, sec in (cpu.get("program_by_role_seconds") or {}).items())
        rows.append([r["size_class"], r["label"], _n(cpu.get("program_seconds"), 1),
                     _n(r.get("cpu_seconds_per_million_records"), 1), roles or "-", _n(cpu.get("brokers_seconds"), 1),
                     _n(cpu.get("other_seconds"), 1), _n(cpu.get("wall_seconds"), 1)])
    return _table(["size", "configuration", "CPU s", "CPU s per 1M records", "CPU s per role", "brokers CPU s",
                   "others' CPU s (noise)", "window s"], rows, "llrrlrrr")


def _mm2(doc: dict[str, Any]) -> str:
    lines = []
    for item in doc["mm2_exactly_once"]:
        ev = item.get("evidence") or {}
        lines.append(f"- {item['size_class']}: exactly-once confirmed: **{_n(item['confirmed'])}**; source tasks "
                     f"{', '.join(ev.get('exactly_once_source_tasks', [])) or 'none'} ran as "
                     f"ExactlyOnceWorkerSourceTask; transactional ids {', '.join(ev.get('transactional_ids', [])) or 'none'}; "
                     f"exactly.once.source.support={'/'.join(ev.get('exactly_once_source_support', [])) or '?'}; "
                     f"{_n(item['transaction_markers'])} transaction markers on the target; MM2 started after "
                     f"{_n(ev.get('seconds_to_mirrormaker_started'), 1)} s, source tasks after "
                     f"{_n(ev.get('seconds_to_source_task_started'), 1)} s; ERROR lines: {len(ev.get('error_lines', []))}"
                     f" (log `{ev.get('log', '?')}`)")
    return "\n".join(lines) or "(MirrorMaker 2 exactly-once not run)"


def translation_table(doc: dict[str, Any]) -> str:
    """Translation cost per offset-sync history size, side by side (and the old full read)."""
    costs = doc.get("translation")
    if not costs:
        return ""
    rows = []
    for row in costs["sizes"]:
        plan, recover, full = row.get("plan", {}), row.get("recover", {}), row.get("full_read") or {}
        rows.append([f"{row['records']:,}", _n(plan.get("seconds"), 2), f"{plan.get('sync_records_read', 0):,}",
                     _n(plan.get("peak_rss_mb")), str(plan.get("wrong_translations", plan.get("error"))),
                     _n(recover.get("seconds"), 2), f"{recover.get('sync_records_read', 0):,}",
                     _n(recover.get("peak_rss_mb")), _n(full.get("seconds"), 2) if full else "-",
                     _n(full.get("peak_rss_mb")) if full else "-"])
    return _table(["sync records", f"plan {costs['groups']:,} groups x {costs['partitions_per_group']} (s)",
                   "syncs read", "RSS MB", "wrong", "recover idle partition (s)", "syncs read", "RSS MB",
                   "old full read (s)", "RSS MB"], rows, "r" * 10)


def rereads_table(doc: dict[str, Any]) -> str:
    """Re-reads and skips after failover per system, side by side."""
    section = doc.get("rereads")
    if not section:
        return ""
    rows = []
    for name, label in (("eosmirror", "eosmirror (groups sync)"), ("mm2", "MirrorMaker 2 (sync.group.offsets)")):
        run, result = section["systems"].get(name) or {}, (section["systems"].get(name) or {}).get("result")
        if not result:
            rows.append([label, "-", "-", "-", "-", "-", "-", run.get("note") or run.get("status") or "did not run"])
            continue
        not_synced = ", ".join(result["not_synced"]) or "-"
        rows.append([label, f"{result['groups_synced']}/{result['groups']}", f"{result['rereads']:,}",
                     f"{result['max_rereads_per_partition']:,}", f"{result['skips']:,}", _n(run.get("copy_seconds"), 1),
                     _n(run.get("sync_seconds"), 2), f"not synced: {not_synced}"])
    return _table(["system", "groups synced", "re-reads total", "max per partition", "skips", "copy (s)",
                   "group offsets (s, after copy)", "note"], rows, "lrrrrrrl")


def storm_table(doc: dict[str, Any]) -> str:
    """The catch-up storm's cases (``--only storm``): both latencies, baseline and during the catch-up."""
    from eosmirror_tools.bench.storm import table

    return table(doc)


def scale_table(doc: dict[str, Any]) -> str:
    """One row per scale shape: the seconds of each step and the peak RSS of a Python process."""
    section = doc.get("scale")
    if not section:
        return ""
    rows = [[f"{r['topics']:,}", f"{r['partitions']:,}", _n(r["empty_run_s"], 1), _n(r["first_run_s"], 1),
             _n(r.get("first_run_target_topics_s"), 1), _n(r.get("visible_after_first_run_s"), 1),
             _n(r["verify_s"], 1), f"{_n(r['groups_sync_s'], 1)} ({r['groups']:,} x {r['group_partitions']})",
             _n(r["lag_s"], 1), _n(r["peak_rss_mb"]), "yes" if r["verified"] else "NO"] for r in section["rows"]]
    table = _table(["topics", "partitions", "empty run (s)", "first run (s)", "of it target topics (s)",
                    "visible after (s)", "verify (s)", "groups sync (s)", "lag (s)", "peak RSS MB", "verified"],
                   rows, "rrrrrrrrrrl")
    beside = [f"MirrorMaker 2 exactly-once ({m['tasks']} tasks, {m['settings']}) on the {r['partitions']:,}-partition "
              f"data: {_n(m['start_to_done_s'], 1)} s until {m['read_committed_count']:,} records were counted "
              f"read_committed; eosmirror end to end {_n(m['eosmirror_end_to_end_s'], 1)} s "
              f"(x{m['eosmirror_speedup']})" + (f"; failed: {m['error']}" if m.get("error") else "")
              for r in section["rows"] for m in [r.get("mm2")] if m]
    beside += [f"The same {f['records']:,} records over {f['partitions']} partitions: first run {_n(f['first_run_s'], 1)} s "
               f"(target topics {_n(f['target_topics_s'], 1)} s of it), copy {_n(f['copy_s'], 1)} s; the "
               f"{r['partitions']:,}-partition copy {_n(r.get('first_run_copy_s'), 1)} s (x{f['copy_ratio']})"
               for r in section["rows"] for f in [r.get("few_partitions")] if f]
    return "\n\n".join([table, *beside])


def _errors(doc: dict[str, Any]) -> str:
    lines = [f"- `{r['key']}`: {r['error']}" for r in doc["configurations"] if r.get("error")]
    return "\n".join(lines)


def _distance(doc: dict[str, Any]) -> str:
    from eosmirror_tools.bench import distance

    return distance.table(doc)


def render(doc: dict[str, Any]) -> str:
    m, data = doc["machine"], doc["data_set"]
    sizes = "; ".join(f"{s['name']}: {s['records']:,} records of {s['value_bytes']} B values "
                      f"({s['record_bytes']} B with key and header)" for s in data["size_classes"])
    empty = doc.get("empty_run") or {}
    parts = [
        f"# eosmirror benchmark, run {doc['run_id']}" + (" (quick)" if doc["quick"] else ""),
        f"{doc['created_at']}; {m['cpus']} CPUs ({m['cpu_model']}), {m['memory_gb']} GB; load average at start "
        f"{', '.join(f'{x:.2f}' for x in m['load_average_at_start'])}; Kafka {m['kafka']}, {m['java']}; "
        f"confluent-kafka {m['confluent_kafka']} (librdkafka {m['librdkafka']}); pyspark {m['pyspark']}; "
        f"whole run {doc['duration_seconds']:,.0f} s.",
        f"Data set: {data['partitions']} partitions, {data['key_bytes']}-byte keys, one header "
        f"({data['header']}); {sizes}. Every configuration loads its own fresh topics.",
        "## Results",
        results_table(doc),
        "**All configurations verified** (read_committed count on the target equals N)." if doc["all_verified"]
        else "**Some configurations did not verify**: their numbers are not results.",
        _errors(doc),
        "CPU s: the program's own CPU time. Others' CPU: the share of the machine other work used during the "
        "configuration; a result marked (busy) was measured while something else competed for the CPUs.",
        "## Translation cost vs offset-sync history",
        translation_table(doc),
        (f"Plan: `driver.groups.plan_offsets` for the groups' given offsets (95% within 3 syncs of the head, 5% "
         f"{doc['translation']['lag_syncs']} syncs (x100 source records) behind; reading group offsets from Kafka and writing them is not "
         f"timed, it does not depend on the history); every translation is checked against the known answer "
         "(wrong = 0). Recover: `syncstore.latest` (snapshot + syncs after its marker), what a run calls when a "
         "partition's progress expired. The snapshot is one mirror run stale. Each step runs in a fresh process "
         "(its peak RSS). Old full read: `syncstore.load`, what every call did before.") if doc.get("translation")
        else "",
        "## Re-reads after failover" if doc.get("rereads") else "",
        rereads_table(doc),
        (f"Same source data and group positions for both: {doc['rereads']['partitions']} partitions x "
         f"{doc['rereads']['records_per_partition']:,} committed records (every third transaction aborted), "
         f"{doc['rereads']['groups']} groups ({doc['rereads']['positions']}). Per group and partition, the first "
         "record a read_committed consumer of the group receives on the target is compared with the next record "
         "it had not consumed on the source: re-reads = records received again, skips = records never received. "
         "MirrorMaker 2: dedicated mode, at-least-once, `sync.group.offsets.enabled=true`, checkpoints and syncs "
         "every 1 s, `offset.lag.max` 100 (default); its group offsets are read once they stop changing.")
        if doc.get("rereads") else "",
        "## Scale: many partitions of few records" if doc.get("scale") else "",
        scale_table(doc),
        (f"{doc['scale']['records_per_partition']} records of 200 B per partition, {doc['scale']['slots']} slots, "
         "each step a fresh `python -m eosmirror.cli` process timed from start to exit (the runs include Spark's "
         "start; the empty run starts none). The empty run, verify and lag start one after the other right after "
         "the first run, with no wait for its commits to land; 'visible after': from the first run's end until "
         "every target partition's last stable offset reached its high watermark (every copied record visible "
         "to read_committed consumers), polled beside them; groups sync: that many source groups of that many "
         "partitions each; peak RSS: the largest Python process (CLI, driver, a slot worker: one process, not the "
         "sum). Growth (one topic, "
         f"{doc['scale']['growth'].get('from_partitions', '-')} -> {doc['scale']['growth'].get('to_partitions', '-')} "
         f"partitions): {', '.join(f'{k} x{v}' for k, v in doc['scale']['growth'].items() if k.endswith('_s'))}.")
        if doc.get("scale") else "",
        "## Catch-up storm: other clients' latency while a backlog is caught up" if doc.get("storm") else "",
        storm_table(doc),
        "## Across distance: the source a round trip away" if doc.get("distance") else "",
        _distance(doc),
        ("The mirror beside the target, the source behind a proxy (toxiproxy, half the round trip each way); "
         "every system reaches the source only through it, loading and the verdict go direct. End to end: N / "
         "wall time from process start. Measured round trip: the best of five metadata requests of a warm "
         "client through the proxy.") if doc.get("distance") else "",
        "## Ratios (same run)",
        _ratios(doc),
        "## Targets",
        targets_table(doc),
        "## eosmirror exactly_once: records/s vs slots",
        _sweep(doc),
        "## Fixed overhead of an empty eosmirror run",
        (f"The same mirror run again with nothing new to copy: {_n(empty.get('wall_seconds'), 1)} s end to end "
         f"(`eosmirror run` to exit), peak RSS {_n(empty.get('peak_rss_mb'))} MB." if empty else "(not run)"),
        "## Peak memory (RSS)",
        _memory(doc),
        "RSS is sampled every 0.2 s from /proc over the whole process tree; forked Python workers share pages "
        "with their parent, so the sum is an upper bound.",
        "## Cost: CPU time",
        _cost(doc),
        "CPU s: user+system time of the program's process tree over its whole life (start-up included), "
        "sampled with the RSS. Brokers: both local brokers in the same window. Others': the rest of the "
        f"machine's busy time in the window (work that is not part of the measurement; {m['cpus']} CPUs can give "
        "at most that many CPU seconds per second): a large value means the result was measured on a busy machine.",
        "## MirrorMaker 2 exactly-once: is it really on?",
        _mm2(doc),
        "## How the numbers are measured",
        "- **steady**: eosmirror: records / the longest slot's seconds (inside the Spark tasks); MirrorMaker 2: "
        "from the first record on the target until a read_committed count reaches N; raw loop: its own copy loop "
        "time; ProducerPerformance: its own send-loop rate (value bytes only, no key or header).",
        "- **end to end**: N / wall time from process start: `eosmirror run` incl. Python and Spark start-up; "
        "MirrorMaker 2 incl. JVM and Connect start-up until the count reaches N; the raw loop incl. Python start.",
        "- Verification: after every configuration the target is read with read_committed and its records counted; "
        "end offsets are only a hint (transaction markers occupy offsets).",
        f"- Settings: Spark {doc['settings']['master']}, {doc['settings']['main_slots']} slots; MM2 tasks.max=2; "
        f"ProducerPerformance transactions of {doc['settings']['transaction_duration_ms']} ms; extra MM2 properties "
        f"{doc['settings']['mm2_extra_properties'] or 'none'}.",
    ]
    if doc.get("profiles"):
        parts += ["## Profiles", "\n".join(f"- {name}: `{info.get('path')}` {info.get('summary', '')}"
                                            for name, info in doc["profiles"].items())]
    return "\n\n".join(p for p in parts if p) + "\n"
