"""Issue #44 item 2: does committing a slot in partition chunks (``max_partitions_per_transaction``) make
a run's records visible sooner? One source topic of ``--partitions`` x 200 records, then one first run per
setting, in the order given (4 slots, each run into its own target topic: prefix policy, the run's alias),
each timed as a user starts it, then the time from the run's end until every target partition's last stable offset has reached
its high watermark (scale.visible_seconds). Prints one line per run and writes the rows as JSON.

    python -m eosmirror_tools.bench.chunkprobe --partitions 5000 --chunks 250,0,250,0,250,0 --out build/bench/chunkprobe.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from eosmirror_tools.bench import scale


def _definition(path: Path, name: str, topic: str, chunk: int) -> None:
    import yaml

    mirror: dict[str, Any] = {"name": name, "source": {"local": "source"}, "target": {"local": "target"},
                              "topics": [topic], "slots": scale.SLOTS, "delivery": "exactly_once",
                              "target_replication_factor": 1, "replication_policy": "prefix",
                              "source_alias": name, "max_partitions_per_transaction": chunk or None}
    path.write_text(yaml.safe_dump({"mirrors": [mirror]}, sort_keys=False))


def probe(source_conf: dict[str, Any], target_conf: dict[str, Any], partitions: int, chunks: list[int],
          work: Path) -> list[dict[str, Any]]:
    """One run per entry of ``chunks``, in that order (``250,0,250,0,250,0``: alternated pairs, so that a
    machine whose load drifts weighs on both settings alike). Each run has its own target topic, created
    (timed apart) right before it and deleted after its visibility was measured: a broker holding every
    run's 5,000 partitions at once would measure something else."""
    run_id = uuid.uuid4().hex[:6]
    topic = f"chunkprobe-{run_id}"
    started = time.monotonic()
    scale._create(source_conf, [topic], partitions)
    scale._produce(source_conf, [topic], partitions)
    print(f"{partitions:,} partitions x {scale.RECORDS} records ready ({time.monotonic() - started:.0f} s)",
          flush=True)
    rows = []
    for index, chunk in enumerate(chunks):
        name = f"cp{run_id}r{index}c{chunk}"
        rows.append(_one_run(source_conf, target_conf, partitions, topic, name, chunk, work))
        _cleanup([target_conf], name)
    _cleanup([source_conf, target_conf], run_id)
    return rows


def _one_run(source_conf: dict[str, Any], target_conf: dict[str, Any], partitions: int, topic: str, name: str,
             chunk: int, work: Path) -> dict[str, Any]:
    import subprocess

    # The target topic first, timed apart (a 5,000-partition CreateTopics on a busy broker can take longer
    # than the run's own wait for its internal topics): the run then times the copy and the commits.
    created = time.monotonic()
    scale._create(target_conf, [f"{name}.{topic}"], partitions)
    _wait_usable(target_conf, f"{name}.{topic}", partitions)   # every partition answers ListOffsets
    create_s = round(time.monotonic() - created, 1)
    config = work / f"{name}.yaml"
    _definition(config, name, topic, chunk)
    result = work / f"{name}.json"
    log_path = work / f"{name}.log"
    load_before = os.getloadavg()[0]
    began = time.monotonic()
    with log_path.open("w") as log:
        code = subprocess.run([sys.executable, "-m", "eosmirror.cli", "run", name, "--config", str(config),
                               "--master", "local[2]", "--result-json", str(result)],
                              stdout=log, stderr=subprocess.STDOUT, timeout=1800).returncode
    ended = time.monotonic()
    load_end = os.getloadavg()[0]
    keys = [(f"{name}.{topic}", p) for p in range(partitions)]
    visible = scale.visible_seconds(target_conf, keys, ended)
    report = json.loads(result.read_text()) if result.exists() else {}
    row = {"max_partitions_per_transaction": chunk or None, "exit_code": code, "target_create_s": create_s,
           "run_s": round(ended - began, 2), "visible_after_run_s": visible["seconds"],
           "end_to_end_s": round(ended - began + visible["seconds"], 2) if visible["seconds"] is not None
           else None, "pending_at_first_poll": visible["pending_at_first_poll"],
           "records": report.get("records"), "expected": partitions * scale.RECORDS,
           "transactions": sum(s.get("transactions", 0) for s in report.get("slots", [])),
           "steps": report.get("steps") or {}, "load_before": round(load_before, 2),
           "load_at_end": round(load_end, 2), "load_after": round(os.getloadavg()[0], 2),
           "chunk_lines": [line.strip() for line in log_path.read_text().splitlines() if ": chunk " in line],
           "curve": visible["curve"]}
    print(f"chunk {chunk or 'none'}: exit {code}, run {row['run_s']} s, visible {row['visible_after_run_s']} s "
          f"after its end ({row['pending_at_first_poll']} partitions pending at the first poll), end to end "
          f"{row['end_to_end_s']} s, {row['records']} of {row['expected']} records, {row['transactions']} "
          f"transactions, load {row['load_before']} / {row['load_at_end']} / {row['load_after']} (before / "
          f"at the run's end / after visible); target topic {create_s} s", flush=True)
    return row


def _wait_usable(conf: dict[str, Any], topic: str, partitions: int, budget: float = 600.0) -> None:
    from confluent_kafka.admin import AdminClient, OffsetSpec

    from eosmirror.kafka.offsets import list_offsets

    admin, deadline = AdminClient(conf), time.monotonic() + budget
    while True:
        try:
            list_offsets(admin, {(topic, p): OffsetSpec.latest() for p in range(partitions)}, "target")
            return
        except Exception:  # noqa: BLE001 - not ready yet; the budget bounds the wait
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def _cleanup(confs: list[dict[str, Any]], run_id: str) -> None:
    """Best effort: every topic whose name holds ``run_id`` (the data, the target and internal topics)."""
    from confluent_kafka.admin import AdminClient

    for conf in confs:
        admin = AdminClient(conf)
        try:
            names = [t for t in admin.list_topics(timeout=30).topics if run_id in t]
            if names:
                for future in admin.delete_topics(names, request_timeout=120).values():
                    future.exception(180)
        except Exception:  # noqa: BLE001 - cleanup only
            pass


def local_confs() -> tuple[dict[str, Any], dict[str, Any]]:
    """The local source and target clusters' client configurations (ports from the environment), quiet."""
    from eosmirror.kafka import clients
    from eosmirror_tools.local import cluster

    clusters = {c.name: c for c in cluster.default_clusters()}
    quiet = {"log_level": clients.librdkafka_log_level()}
    return {**clusters["source"].client_config(), **quiet}, {**clusters["target"].client_config(), **quiet}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=5000)
    parser.add_argument("--chunks", default="250,0,250,0,250,0",
                        help="max_partitions_per_transaction per run, in order; 0 = none")
    parser.add_argument("--out", type=Path, default=Path("build/bench/chunkprobe.json"))
    args = parser.parse_args(argv)
    work = args.out.parent / "chunkprobe"
    work.mkdir(parents=True, exist_ok=True)
    rows = probe(*local_confs(), args.partitions, [int(c) for c in args.chunks.split(",")], work)
    args.out.write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(r["exit_code"] == 0 and r["records"] == r["expected"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
