"""``python -m eosmirror_tools.bench.mm2sweep``: find MirrorMaker 2's best exactly-once settings here,
instead of guessing them (issue #29). Each variant is one MM2 exactly-once run of the 200 B class
(``--records``, default 500,000) on the local clusters, one after another; the table goes to the
console and build/bench/mm2-sweep.{json,md}. The best end-to-end rate is the candidate for
``mm2.TUNED``, the set ``make bench`` compares eosmirror with.
"""

from __future__ import annotations

import argparse
import json
import sys

from eosmirror import paths
from eosmirror_tools.bench import configurations as configs
from eosmirror_tools.bench.settings import BenchSettings, SizeClass
from eosmirror_tools.bench.suite import ensure_clusters

POLL = {"{source}.consumer.max.poll.records": "20000"}
FETCH = {"{source}.consumer.max.partition.fetch.bytes": "8388608", "{source}.consumer.fetch.max.bytes": "67108864"}
BATCH = {"{target}.producer.linger.ms": "10", "{target}.producer.batch.size": "1048576"}
INTERVAL = {"{source}->{target}.transaction.boundary": "interval",
            "{source}->{target}.transaction.boundary.interval.ms": "5000"}

# (name, settings, tasks): one dimension at a time, then together, then the task count.
VARIANTS = [
    ("defaults", {}, 2),
    ("poll", POLL, 2),
    ("poll+fetch", {**POLL, **FETCH}, 2),
    ("poll+fetch+batch", {**POLL, **FETCH, **BATCH}, 2),
    ("batch", BATCH, 2),
    ("poll+fetch+batch+interval", {**POLL, **FETCH, **BATCH, **INTERVAL}, 2),
    ("poll+fetch+batch", {**POLL, **FETCH, **BATCH}, 4),
    ("poll+fetch+batch+interval", {**POLL, **FETCH, **BATCH, **INTERVAL}, 4),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eosmirror_tools.bench.mm2sweep")
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--only", help="comma-separated variant numbers (1-based)")
    args = parser.parse_args(argv)
    chosen = [VARIANTS[int(n) - 1] for n in args.only.split(",")] if args.only else VARIANTS
    settings = BenchSettings(records=args.records, sizes=("200B",), kinds=("mm2",), quick=False)
    source_conf, target_conf = ensure_clusters(print)
    size = SizeClass("200B", 200, args.records)
    rows = []
    for number, (name, props, tasks) in enumerate(chosen, 1):
        print(f"[{number}/{len(chosen)}] MirrorMaker 2 exactly-once, {name}, {tasks} tasks", flush=True)
        ctx = configs.Context(settings, source_conf, target_conf, lambda text: print("      " + text, flush=True))
        result = configs.run_mm2(ctx, size, True, tasks=tasks, variant=(name, props)).as_dict()
        rows.append({"variant": name, "tasks": tasks, "settings": props,
                     **{k: result[k] for k in ("records_per_second", "end_to_end_records_per_second",
                                               "wall_seconds", "cpu_seconds", "peak_rss_mb", "others_cpu_share",
                                               "verified", "error")}})
    out = paths.build_dir("bench")
    out.mkdir(parents=True, exist_ok=True)
    (out / "mm2-sweep.json").write_text(json.dumps({"records": args.records, "rows": rows}, indent=2) + "\n")
    lines = ["| variant | tasks | records/s steady | records/s end to end | CPU s | peak RSS MB | others' CPU | verified |",
             "| :-- | --: | --: | --: | --: | --: | --: | :-- |"]
    for r in rows:
        share = "-" if r["others_cpu_share"] is None else f"{r['others_cpu_share']:.0%}"
        lines.append(f"| {r['variant']} | {r['tasks']} | {r['records_per_second'] or 0:,.0f} | "
                     f"{r['end_to_end_records_per_second'] or 0:,.0f} | {r['cpu_seconds']} | {r['peak_rss_mb']} | "
                     f"{share} | {r['verified']} |")
    table = "\n".join(lines)
    (out / "mm2-sweep.md").write_text(table + "\n")
    print(table)
    return 0 if all(r["verified"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
