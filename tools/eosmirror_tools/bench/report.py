"""build/bench/report.json (machine-readable), report.md (for people) and throughput.png.

Ratios compare configurations of the same run only (same brokers, data, machine and hour): a
ratio between two runs would mostly measure the difference in background load.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from eosmirror_tools.bench.results import ConfigResult
from eosmirror_tools.bench.settings import HEADER, KEY_BYTES, PARTITIONS, QUIET_SHARE, BenchSettings
from eosmirror_tools.kit import mm2

SCHEMA_VERSION = 2
# The goals of issues #21 and #29, side by side in one run. A ratio against MirrorMaker 2 is a goal
# only against MM2 tuned as its users tune it (mm2.TUNED); the ratio to MM2 at its defaults is shown,
# never called "met".
GOALS = {
    "eos_vs_ceiling_txn": {"steady": 0.85, "end_to_end": 0.60},
    "eos_vs_jvmcopier": {"end_to_end": 0.9},
    "eos_vs_mm2_eos_tuned": {"steady": 1.5, "end_to_end": 1.5},
    "alo_vs_mm2_alo_tuned": {"end_to_end": 1.5},
    # The same copy through the run server (`eosmirror run --server`): the run shape without Spark's
    # start per run; same goals.
    "served_vs_ceiling_txn": {"end_to_end": 0.60},
    "served_vs_jvmcopier": {"end_to_end": 0.9},
    "served_vs_mm2_eos_tuned": {"end_to_end": 1.5},
    "served_alo_vs_mm2_alo_tuned": {"end_to_end": 1.5},
}
CPU_PER_MILLION_GOAL = 4.0          # CPU s per million records copied, exactly_once, whole process tree
CPU_VS_MM2_GOAL = 0.6               # eosmirror's CPU per record / tuned MM2 exactly-once's
EMPTY_RUN_GOAL_SECONDS = 2.0        # an empty CLI run (nothing to copy), process start to exit


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def _others(*rows: dict[str, Any]) -> float | None:
    shares = [r.get("others_cpu_share") for r in rows if r.get("others_cpu_share") is not None]
    return max(shares) if shares else None


def _pair(by_key: dict[str, dict[str, Any]], ours: str, theirs: str) -> dict[str, Any] | None:
    a, b = by_key.get(ours), by_key.get(theirs)
    if not a or not b:
        return None
    # A broker restart by someone else during either measurement voids the comparison.
    timed = not (a["brokers_restarted"] or b["brokers_restarted"])
    return {"ours": ours, "theirs": theirs,
            "steady": _ratio(a["records_per_second"], b["records_per_second"]) if timed else None,
            "end_to_end": _ratio(a["end_to_end_records_per_second"], b["end_to_end_records_per_second"])
            if timed else None,
            "others_cpu_share": _others(a, b),
            "both_verified": bool(a["verified"] and b["verified"]), "brokers_restarted": not timed}


def ratios(settings: BenchSettings, by_key: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    slots = settings.main_slots
    out = {}
    for size in settings.sizes:
        eos, alo = f"{size}/eosmirror-exactly_once-{slots}slots", f"{size}/eosmirror-at_least_once-{slots}slots"
        served = f"{size}/eosmirror-served-exactly_once-{slots}slots"
        pairs = {
            "eos_vs_ceiling_txn": _pair(by_key, eos, f"{size}/ceiling-txn"),
            "eos_vs_jvmcopier": _pair(by_key, eos, f"{size}/jvmcopier-{slots}slots"),
            "eos_vs_mm2_eos_tuned": _pair(by_key, eos, f"{size}/mm2-exactly_once-tuned"),
            "eos_vs_mm2_eos_defaults": _pair(by_key, eos, f"{size}/mm2-exactly_once"),
            "alo_vs_mm2_alo_tuned": _pair(by_key, alo, f"{size}/mm2-at_least_once-tuned"),
            "alo_vs_mm2_alo_defaults": _pair(by_key, alo, f"{size}/mm2-at_least_once"),
            "eos_vs_raw_loop": _pair(by_key, eos, f"{size}/raw-loop"),
            "served_vs_ceiling_txn": _pair(by_key, served, f"{size}/ceiling-txn"),
            "served_vs_jvmcopier": _pair(by_key, served, f"{size}/jvmcopier-{slots}slots"),
            "served_vs_mm2_eos_tuned": _pair(by_key, served, f"{size}/mm2-exactly_once-tuned"),
            "served_alo_vs_mm2_alo_tuned": _pair(by_key, f"{size}/eosmirror-served-at_least_once-{slots}slots",
                                                 f"{size}/mm2-at_least_once-tuned"),
        }
        out[size] = {k: v for k, v in pairs.items() if v}
    return out


def _verdict(measured: float | None, goal: float, others: float | None, at_most: bool = False) -> bool | None:
    """None when this run could not measure it, or when the machine was not quiet (no verdict then)."""
    if measured is None or (others is not None and others > QUIET_SHARE):
        return None
    return measured <= goal if at_most else measured >= goal


def _row(target: str, goal: str, measured: float | None, met: bool | None, others: float | None) -> dict[str, Any]:
    return {"target": target, "goal": goal, "measured": measured, "met": met, "others_cpu_share": others}


def targets(settings: BenchSettings, ratio_table: dict[str, dict[str, Any]], empty: dict[str, Any] | None,
            by_key: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The issues' goals, as measured in this run (reported, never asserted by tests)."""
    rows = []
    by_key = by_key or {}
    for size, found in ratio_table.items():
        for name, goals in GOALS.items():
            pair = found.get(name)
            if not pair:
                continue
            for measure, goal in goals.items():
                rows.append(_row(f"{name.replace('_', ' ')} ({measure.replace('_', ' ')}, {size})", f">= {goal}",
                                 pair[measure], _verdict(pair[measure], goal, pair["others_cpu_share"]),
                                 pair["others_cpu_share"]))
        for shape, how in (("served-", " in the run server"), ("", "")):
            row = by_key.get(f"{size}/eosmirror-{shape}exactly_once-{settings.main_slots}slots")
            if row and row.get("cpu_seconds_per_million_records") is not None:
                cpu, others = row["cpu_seconds_per_million_records"], _others(row)
                rows.append(_row(f"CPU s per million records, eosmirror exactly_once{how} ({size})",
                                 f"<= {CPU_PER_MILLION_GOAL}", cpu, _verdict(cpu, CPU_PER_MILLION_GOAL, others, True),
                                 others))
        ours = by_key.get(f"{size}/eosmirror-exactly_once-{settings.main_slots}slots")
        if ours and ours.get("cpu_seconds_per_million_records") is not None:
            cpu = ours["cpu_seconds_per_million_records"]
            theirs = by_key.get(f"{size}/mm2-exactly_once-tuned")
            if theirs and theirs.get("cpu_seconds_per_million_records"):
                share = _ratio(cpu, theirs["cpu_seconds_per_million_records"])
                others = _others(ours, theirs)
                rows.append(_row(f"CPU per record, eosmirror / tuned MM2 exactly-once ({size})",
                                 f"<= {CPU_VS_MM2_GOAL}", share, _verdict(share, CPU_VS_MM2_GOAL, others, True),
                                 others))
    if empty:
        wall, others = empty.get("wall_seconds"), empty.get("others_cpu_share")
        rows.append(_row("empty eosmirror run, process start to exit (s)", f"<= {EMPTY_RUN_GOAL_SECONDS}", wall,
                         _verdict(wall, EMPTY_RUN_GOAL_SECONDS, others, True), others))
    return rows


def quiet(rows: list[dict[str, Any]]) -> bool:
    """A run is quiet when no configuration saw others use more than QUIET_SHARE of the machine."""
    shares = [r.get("others_cpu_share") for r in rows if r.get("others_cpu_share") is not None]
    return all(share <= QUIET_SHARE for share in shares)


def translation_verified(translation: dict[str, Any] | None) -> bool:
    """Every translation of the translation-cost step was exact (True when the step did not run)."""
    if translation is None:
        return True
    return all(row.get("plan", {}).get("wrong_translations") == 0 and row.get("recover", {}).get("exact") is True
               for row in translation["sizes"])


def build(settings: BenchSettings, results: list[ConfigResult], machine: dict[str, Any], seconds: float,
          profiles: dict[str, Any] | None = None, translation: dict[str, Any] | None = None,
          rereads: dict[str, Any] | None = None, scale: dict[str, Any] | None = None,
          storm: dict[str, Any] | None = None, cap: dict[str, Any] | None = None) -> dict[str, Any]:
    from eosmirror_tools.bench import distance
    from eosmirror_tools.bench.rereads import targets as rereads_targets
    from eosmirror_tools.bench.rereads import verified as rereads_verified
    from eosmirror_tools.bench.scale import targets as scale_targets

    rows = [r.as_dict() for r in results]
    by_key = {r["key"]: r for r in rows}
    distance_section = distance.section(rows)
    ratio_table = ratios(settings, by_key)
    empty = next((r for r in rows if r["kind"] == "eosmirror-empty"), None)
    first = settings.sizes[0] if settings.sizes else None
    sweep = sorted((r for r in rows if r["kind"] == "eosmirror" and r["delivery"] == "exactly_once"
                    and r["size_class"] == first), key=lambda r: r["slots"])
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": settings.run_id,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "quick": settings.quick,
        "records": settings.records,
        "duration_seconds": round(seconds, 1),
        "machine": machine,
        "data_set": {"partitions": PARTITIONS, "key_bytes": KEY_BYTES, "header": f"{HEADER[0]}={HEADER[1].decode()}",
                     "size_classes": [{"name": s.name, "value_bytes": s.value_bytes, "records": s.records,
                                       "record_bytes": s.record_bytes} for s in settings.size_classes]},
        "settings": {"master": settings.master, "main_slots": settings.main_slots, "slot_sweep": list(settings.slot_sweep),
                     "kinds": list(settings.kinds), "transaction_duration_ms": settings.transaction_duration_ms,
                     "mm2_extra_properties": settings.mm2_properties},
        "configurations": rows,
        "ratios": ratio_table,
        "quiet": quiet(rows),
        # every row says how busy the machine was (None where the step does not measure it)
        "targets": [{"others_cpu_share": None, **row} for row in
                    targets(settings, ratio_table, empty, by_key) + (translation or {}).get("targets", [])
                    + rereads_targets(rereads) + scale_targets(scale) + distance.targets(distance_section)],
        "distance": distance_section,
        "translation": translation,
        "rereads": rereads,
        "scale": scale,
        "storm": storm,
        "cap": cap,
        "slot_sweep": [{"slots": r["slots"], "master": r["details"].get("master"),
                        "records_per_second": r["records_per_second"],
                        "end_to_end_records_per_second": r["end_to_end_records_per_second"],
                        "wall_seconds": r["wall_seconds"], "verified": r["verified"]} for r in sweep],
        "empty_run": None if empty is None else {k: empty[k] for k in ("wall_seconds", "peak_rss_mb", "verified",
                                                                        "peak_rss_by_role_mb", "error",
                                                                        "others_cpu_share")},
        "mm2_exactly_once": [{"size_class": r["size_class"],
                              "confirmed": r["details"].get("exactly_once_confirmed"),
                              "evidence": r["details"].get("evidence"),
                              "transaction_markers": (r["offsets_on_target"] - r["target_count"])
                              if r["offsets_on_target"] is not None and r["target_count"] is not None else None}
                             for r in rows if r["kind"] == "mm2" and r["delivery"] == "exactly_once"],
        "mm2_tuned_settings": mm2.TUNED,
        "all_verified": (bool(rows) or translation is not None or rereads is not None or scale is not None
         or storm is not None or cap is not None)
        and all(r["verified"] for r in rows) and translation_verified(translation) and rereads_verified(rereads)
        and (scale is None or scale["verified"]) and (storm is None or storm["verified"])
        and (cap is None or cap["verified"]),
        "profiles": profiles or {},
    }


def write_all(document: dict[str, Any], out_dir: Path) -> list[Path]:
    from eosmirror_tools.bench import chart, markdown

    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "report.json"
    tmp = json_path.with_name(json_path.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=2) + "\n")
    tmp.replace(json_path)   # readers never see half a report
    md_path = out_dir / "report.md"
    md_path.write_text(markdown.render(document))
    png_path = chart.render(document, out_dir / "throughput.png")
    return [json_path, md_path, png_path]


def console_summary(document: dict[str, Any]) -> str:
    from eosmirror_tools.bench import distance, markdown

    return (markdown.results_table(document) + "\n\n" + markdown.translation_table(document) + "\n\n"
            + markdown.rereads_table(document) + "\n\n" + markdown.scale_table(document) + "\n\n"
            + distance.table(document) + "\n\n"
            + markdown.targets_table(document))
