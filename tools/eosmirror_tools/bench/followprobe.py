"""Issue #44, follow rounds at many partitions: does chunking a follow round's progress
(``max_partitions_per_transaction``: a round's progress covers the partitions that moved and one chunk of
the others in rotation) shorten the recovery point, or the wait for visibility after a follow run ends?

Per run, in the order given (``--chunks 250,0,250,0``: alternated, so a drifting load weighs on both): a
source topic of ``--partitions`` partitions and its target topic (created beforehand, timed apart), the
soak's load (soak/load.py: every partition written, or the first ``--hot`` ones only; transactions of
which a third abort) at ``--rate`` records/s, the soak's independent time-lag sampler (soak/sampler.py, read_committed on both sides), and
one ``eosmirror run --follow-seconds`` of a 4-slot follow mirror. Production (and the sampler) start once
every slot follows and last ``--produce-seconds``; the time lag is summarised over the steady window (from
``--warmup`` s after production started to its stop), the follower idles to its bound, the exact comparison (duplicates, losses) once the target caught
up, and the time from the run's end until every target partition's last stable offset reached its high
watermark (scale.visible_seconds). Both topics are deleted after each run.

    python -m eosmirror_tools.bench.followprobe --partitions 5000 --chunks 250,0,250,0 --out build/bench/followprobe.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from eosmirror_tools.bench import chunkprobe, scale
from eosmirror_tools.soak import load
from eosmirror_tools.soak.sampler import Sampler


def _definition(path: Path, name: str, topic: str, chunk: int, txn_seconds: float) -> None:
    import yaml

    mirror: dict[str, Any] = {"name": name, "source": {"local": "source"}, "target": {"local": "target"},
                              "topics": [topic], "slots": scale.SLOTS, "delivery": "exactly_once",
                              "target_replication_factor": 1, "replication_policy": "prefix",
                              "source_alias": name, "max_partitions_per_transaction": chunk or None,
                              "follow": True, "max_transaction_seconds": txn_seconds}
    path.write_text(yaml.safe_dump({"mirrors": [mirror]}, sort_keys=False))


class WideSampler(Sampler):
    """The soak's sampler with its fetches parked up to 500 ms instead of 50: a fetch of 5,000 partitions
    20 times a second filled the 1 GB heap of the local brokers with delayed-fetch entries (2.4 million
    FetchPartition objects, old generation 99.9% full, requests timing out). Precision: about 0.5 s."""

    @staticmethod
    def _consumer(bootstrap: str) -> Any:
        from confluent_kafka import Consumer

        return Consumer({"bootstrap.servers": bootstrap, "group.id": f"followprobe-sampler-{time.time_ns()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "enable.partition.eof": False,
                         "topic.metadata.refresh.interval.ms": 1000, "fetch.wait.max.ms": 500,
                         "fetch.queue.backoff.ms": 10})


def _wait_following(log_path: Path, proc: subprocess.Popen, budget: float) -> float | None:
    """Seconds until every slot logged "following" (None: the run ended or ``budget`` passed first)."""
    began = time.monotonic()
    while time.monotonic() - began < budget and proc.poll() is None:
        if log_path.read_text().count(": following ") >= scale.SLOTS:
            return round(time.monotonic() - began, 1)
        time.sleep(0.5)
    return None


def one_run(source_conf: dict[str, Any], target_conf: dict[str, Any], args: argparse.Namespace, name: str,
            chunk: int, work: Path) -> dict[str, Any]:
    topic = f"{name}-src"
    target_topic = f"{name}.{topic}"
    created = time.monotonic()
    scale._create(source_conf, [topic], args.partitions)
    scale._create(target_conf, [target_topic], args.partitions)
    chunkprobe._wait_usable(source_conf, topic, args.partitions)
    chunkprobe._wait_usable(target_conf, target_topic, args.partitions)
    create_s = round(time.monotonic() - created, 1)
    config = work / f"{name}.yaml"
    _definition(config, name, topic, chunk, args.txn_seconds)
    log_path, result = work / f"{name}.log", work / f"{name}.json"
    load_before = os.getloadavg()[0]
    began = time.monotonic()
    with log_path.open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "eosmirror.cli", "run", name, "--config", str(config),
                                 "--master", args.master, "--follow-seconds", str(args.follow_seconds),
                                 "--result-json", str(result)], stdout=log, stderr=subprocess.STDOUT)
        # Production and the time lag start once every slot follows (a loaded machine takes a minute to
        # start Spark): the recovery point of a follower, not of a run's start.
        following = _wait_following(log_path, proc, args.follow_seconds)
        sampler = WideSampler(source_conf["bootstrap.servers"], target_conf["bootstrap.servers"], topic,
                          targets={"m": target_topic}).start()
        stop = threading.Event()
        counts: dict[str, int] = {}
        producer = threading.Thread(target=lambda: counts.update(load.produce(
            source_conf["bootstrap.servers"], topic, args.hot or args.partitions, stop, rate=args.rate,
            txn_id=f"{name}-load")), daemon=True)
        produced_epoch = time.time()
        producer.start()
        stop.wait(args.produce_seconds)
        stop.set()
        stopped_epoch = time.time()
        producer.join(60)
        load_at_stop = os.getloadavg()[0]
        code = proc.wait(timeout=args.follow_seconds + 900)
    ended = time.monotonic()
    keys = [(target_topic, p) for p in range(args.partitions)]
    visible = scale.visible_seconds(target_conf, keys, ended)
    caught_up = time.monotonic() + 120   # the sampler's own readers reach the target's end
    while sampler.lag_now("m") > 0 and time.monotonic() < caught_up:
        time.sleep(1)
    summary = sampler.stop(since=produced_epoch + args.warmup, until=stopped_epoch)["m"]
    report = json.loads(result.read_text()) if result.exists() else {}
    slots = report.get("slots", [])
    lines = log_path.read_text().splitlines()
    row = {"max_partitions_per_transaction": chunk or None, "hot": args.hot or args.partitions, "rate": args.rate,
           "exit_code": code, "create_s": create_s,
           "run_s": round(ended - began, 2), "following_after_s": following, "visible_after_run_s": visible["seconds"],
           "pending_at_first_poll": visible["pending_at_first_poll"], **summary,
           "source_committed": counts.get("committed", 0) + counts.get("plain", 0),
           "transactions": sum(s.get("transactions", 0) for s in slots),
           "transaction_mean_s": round(sum(s.get("transaction_seconds", 0) for s in slots)
                                       / max(1, sum(s.get("transactions", 0) for s in slots)), 3),
           "transaction_max_s": max((s.get("max_transaction_seconds", 0) for s in slots), default=None),
           "follow_ends": sorted({str(s.get("follow_end")) for s in slots}),
           "load_before": round(load_before, 2), "load_at_stop": round(load_at_stop, 2),
           "load_after": round(os.getloadavg()[0], 2),
           "slow_transactions": [line.strip() for line in lines if "follow transaction took" in line][-8:]}
    print(f"chunk {chunk or 'none'}: exit {code}, time lag p50 {row['time_lag_p50_s']} p95 {row['time_lag_p95_s']} "
          f"max {row['time_lag_max_s']} s ({row['samples']} samples), visible {row['visible_after_run_s']} s after "
          f"the run's end ({row['pending_at_first_poll']} pending), {row['transactions']} transactions (mean "
          f"{row['transaction_mean_s']} s, max {row['transaction_max_s']} s), "
          f"{row['records']} copied of {row['source_committed']}, duplicates {row['duplicates']}, losses "
          f"{row['losses']}, aborted {row['aborted']}, load {row['load_before']} / {row['load_at_stop']} / "
          f"{row['load_after']}; topics {create_s} s", flush=True)
    chunkprobe._cleanup([source_conf, target_conf], name)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=5000)
    parser.add_argument("--chunks", default="250,0,250,0", help="max_partitions_per_transaction per run; 0 = none")
    parser.add_argument("--rate", type=float, default=2000.0, help="records/s produced")
    parser.add_argument("--hot", type=int, default=0,
                        help="production reaches only the first this many partitions (0: every partition)")
    parser.add_argument("--follow-seconds", type=float, default=150.0,
                        help="the run's follow bound (its slots may take a minute to start following)")
    parser.add_argument("--produce-seconds", type=float, default=45.0,
                        help="production runs this long from the moment every slot follows")
    parser.add_argument("--warmup", type=float, default=10.0,
                        help="the time lag is counted from this long after production started")
    parser.add_argument("--txn-seconds", type=float, default=0.5, help="the mirror's max_transaction_seconds")
    parser.add_argument("--master", default=f"local[{scale.SLOTS}]",
                        help="Spark master: a follow run holds a core per slot while it follows")
    parser.add_argument("--out", type=Path, default=Path("build/bench/followprobe.json"))
    args = parser.parse_args(argv)
    source_conf, target_conf = chunkprobe.local_confs()
    work = args.out.parent / "followprobe"
    work.mkdir(parents=True, exist_ok=True)
    run_id = uuid.uuid4().hex[:6]
    rows = [one_run(source_conf, target_conf, args, f"fp{run_id}r{index}c{chunk}", chunk, work)
            for index, chunk in enumerate(int(c) for c in args.chunks.split(","))]
    args.out.write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(r["exit_code"] == 0 and not r["duplicates"] and not r["losses"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
