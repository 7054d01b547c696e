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
from eosmirror_tools.bench.settings import HEADER, KEY_BYTES, PARTITIONS, BenchSettings

SCHEMA_VERSION = 1
TARGETS = {"eosmirror_eos_vs_mm2_eos": 1.0, "eosmirror_eos_vs_raw_loop": 0.7, "empty_run_seconds": 15.0}


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


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
            "both_verified": bool(a["verified"] and b["verified"]), "brokers_restarted": not timed}


def ratios(settings: BenchSettings, by_key: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    slots = settings.main_slots
    out = {}
    for size in settings.sizes:
        eos, alo = f"{size}/eosmirror-exactly_once-{slots}slots", f"{size}/eosmirror-at_least_once-{slots}slots"
        pairs = {
            "eosmirror_eos_vs_mm2_eos": _pair(by_key, eos, f"{size}/mm2-exactly_once"),
            "eosmirror_eos_vs_raw_loop": _pair(by_key, eos, f"{size}/raw-loop"),
            "eosmirror_alo_vs_mm2_alo": _pair(by_key, alo, f"{size}/mm2-at_least_once"),
            "eosmirror_eos_vs_ceiling_txn": _pair(by_key, eos, f"{size}/ceiling-txn"),
        }
        out[size] = {k: v for k, v in pairs.items() if v}
    return out


def _met(measured: float | None, goal: float) -> bool | None:
    """None when this run could not measure it (a failed configuration, or N too small to time)."""
    return None if measured is None else measured >= goal


def targets(settings: BenchSettings, ratio_table: dict[str, dict[str, Any]],
            empty: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The issue's targets, as measured in this run (reported, never asserted by tests)."""
    rows = []
    for size, found in ratio_table.items():
        mm2 = found.get("eosmirror_eos_vs_mm2_eos")
        if mm2:
            for measure in ("steady", "end_to_end"):
                rows.append({"target": f"eosmirror exactly_once / MM2 exactly-once records/s ({measure}, {size})",
                             "goal": f">= {TARGETS['eosmirror_eos_vs_mm2_eos']}", "measured": mm2[measure],
                             "met": _met(mm2[measure], TARGETS["eosmirror_eos_vs_mm2_eos"])})
        raw = found.get("eosmirror_eos_vs_raw_loop")
        if raw:
            rows.append({"target": f"eosmirror exactly_once steady rate / raw copy loop ({size})",
                         "goal": f">= {TARGETS['eosmirror_eos_vs_raw_loop']}", "measured": raw["steady"],
                         "met": _met(raw["steady"], TARGETS["eosmirror_eos_vs_raw_loop"])})
    if empty:
        wall = empty.get("wall_seconds")
        rows.append({"target": "empty eosmirror run, fixed overhead (s)", "goal": f"<= {TARGETS['empty_run_seconds']}",
                     "measured": wall, "met": None if wall is None else wall <= TARGETS["empty_run_seconds"]})
    return rows


def translation_verified(translation: dict[str, Any] | None) -> bool:
    """Every translation of the translation-cost step was exact (True when the step did not run)."""
    if translation is None:
        return True
    return all(row.get("plan", {}).get("wrong_translations") == 0 and row.get("recover", {}).get("exact") is True
               for row in translation["sizes"])


def build(settings: BenchSettings, results: list[ConfigResult], machine: dict[str, Any], seconds: float,
          profiles: dict[str, Any] | None = None, translation: dict[str, Any] | None = None,
          rereads: dict[str, Any] | None = None) -> dict[str, Any]:
    from eosmirror_tools.bench.rereads import targets as rereads_targets, verified as rereads_verified

    rows = [r.as_dict() for r in results]
    by_key = {r["key"]: r for r in rows}
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
        "targets": targets(settings, ratio_table, empty) + (translation or {}).get("targets", [])
        + rereads_targets(rereads),
        "translation": translation,
        "rereads": rereads,
        "slot_sweep": [{"slots": r["slots"], "master": r["details"].get("master"),
                        "records_per_second": r["records_per_second"],
                        "end_to_end_records_per_second": r["end_to_end_records_per_second"],
                        "wall_seconds": r["wall_seconds"], "verified": r["verified"]} for r in sweep],
        "empty_run": None if empty is None else {k: empty[k] for k in ("wall_seconds", "peak_rss_mb", "verified",
                                                                        "peak_rss_by_role_mb", "error")},
        "mm2_exactly_once": [{"size_class": r["size_class"],
                              "confirmed": r["details"].get("exactly_once_confirmed"),
                              "evidence": r["details"].get("evidence"),
                              "transaction_markers": (r["offsets_on_target"] - r["target_count"])
                              if r["offsets_on_target"] is not None and r["target_count"] is not None else None}
                             for r in rows if r["kind"] == "mm2" and r["delivery"] == "exactly_once"],
        "all_verified": (bool(rows) or translation is not None or rereads is not None)
        and all(r["verified"] for r in rows) and translation_verified(translation) and rereads_verified(rereads),
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
    from eosmirror_tools.bench import markdown

    return (markdown.results_table(document) + "\n\n" + markdown.translation_table(document) + "\n\n"
            + markdown.rereads_table(document) + "\n\n" + markdown.targets_table(document))
