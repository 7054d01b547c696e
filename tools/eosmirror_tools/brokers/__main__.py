"""`make broker-matrix`: every cell of cells.py (BROKER_CELLS=2.8->4.4,3.9 selects cells, BROKER_PARTS=a,b the
parts), then build/brokers/matrix.md (the table docs/versions.md quotes) and build/brokers/report.json.
Exit 1 when a cell failed (the table says where and what the judge saw)."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from eosmirror import paths
from eosmirror_tools.brokers import cells

REPO = Path(__file__).resolve().parents[3]
WHAT = {"a": "mirror under production, aborted txns", "b": "group failover", "c": "switchover",
        "d": "promote/reverse/switch back/resume", "e": "take-over from exactly-once MM2 of the source's version"}


def commit() -> str:
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "plugins", "tools"],
                           capture_output=True, text=True).stdout.strip()
    return head + ("+uncommitted changes" if dirty else "")   # the table must not claim a commit it did not test


def table(rows: list[dict[str, Any]], sha: str, date: str, java: str) -> str:
    lines = [f"Commit `{sha}`, {date}, {java}. Each cell: fresh single-node clusters of the two versions "
             "(ZooKeeper before 3.3, KRaft from 3.3), in-process mirror runs; judged by each cluster's own "
             "version of Kafka's ConsoleConsumer (read_committed) and kafka-transactions, and the oracle.", "",
             "| cell | source | target | part | what ran | result | seconds |", "|---|---|---|---|---|---|---|"]
    for row in rows:
        head = f"| {row['cell']} | {row['source']} ({row['source_metadata']}) | {row['target']} ({row['target_metadata']}) "
        if row.get("error"):
            lines.append(head + f"| - | start | FAILED: {_cell_text(row['error'])} | {row['seconds']} |")
            continue
        for part, found in row["parts"].items():
            result = ("not run" if found.get("not_run") else "pass") if found["ok"] else f"FAILED: {_cell_text(found['error'])}"
            lines.append(head + f"| {part} | {WHAT[part]} | {result}{_detail(part, found)} | {found['seconds']} |")
    return "\n".join(lines) + "\n"


def _detail(part: str, found: dict[str, Any]) -> str:
    if not found["ok"]:
        return ""
    if part == "a":
        return (f": {found['records_checked']} committed records ({found['aborted']} aborted) exactly once, in order; "
                f"LSO = HW; find-hanging {found['find_hanging']}")
    if part == "b":
        return f": first records on the target = next on the source, {len(found['first_on_target'])} partitions"
    if part == "c":
        return f": {found['switchover']}"
    if part == "e":
        if found.get("not_run"):
            return f": {found['not_run']}"
        return (f": MM2 {found['mm2_version']} (exactly-once) copied {found['mm2_records']} committed records in "
                f"{found['mm2_seconds']} s, stopped; migrate --from mm2 seeded {found['seeded']}; eosmirror copied "
                f"{found['eosmirror_records']} more; {found['target_console']} on the target = the source's "
                f"{found['source_console']}, each once, in order; LSO = HW")
    return ": both logs equal, in order"


def _cell_text(text: str) -> str:
    return " ".join(text[:400].replace("|", "/").split())


def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    chosen = cells.select(os.environ.get("BROKER_CELLS"))
    parts = tuple(p.strip() for p in os.environ.get("BROKER_PARTS", ",".join(cells.PARTS)).split(",") if p.strip())
    unknown = [p for p in parts if p not in cells.PARTS]
    if unknown:
        raise SystemExit(f"unknown part(s) {unknown}; parts: {', '.join(cells.PARTS)} ({WHAT})")
    out = paths.build_dir("brokers")
    sha, now = commit(), dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    rows = []
    with tempfile.TemporaryDirectory(prefix="eosmirror-brokers-") as work:
        for cell in chosen:
            print(f"broker-matrix: {cell.name} (parts {','.join(parts)}) ...", flush=True)
            row = cells.run_cell(cell, parts, Path(work))
            rows.append(row)
            verdicts = ", ".join(f"{p} {'pass' if f['ok'] else 'FAILED'} {f['seconds']} s" for p, f in row["parts"].items())
            print(f"broker-matrix: {cell.name}: {'pass' if row['ok'] else 'FAILED'} ({row['seconds']} s; "
                  f"{verdicts or row.get('error', '')[:300]})", flush=True)
            (out / "report.json").write_text(json.dumps({"commit": sha, "date": now, "java": java, "rows": rows},
                                                        indent=1, default=str))
            (out / "matrix.md").write_text(table(rows, sha, now, java))
    print(f"broker-matrix: {out / 'matrix.md'}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
