"""A follow run's recovery point measured from outside, with the source near or far (issue #52 item 2's goal:
p99 <= the round trip + 0.5 s). Not part of `make test` or `make bench`: a lab measurement on the clusters of
``eosmirror local up`` (``--source-rtt MS`` puts the source behind a link; without it the source is near).

    eosmirror local up --source-rtt 100
    python -m eosmirror_tools.bench.followfar --seconds 60

A paced transactional load (kit/workload.py: committed and aborted transactions and plain records, each value
starting with its id) goes to the source's direct listener; one follow run (``eosmirror run --inprocess
--follow-seconds``, ``max_transaction_seconds`` 0.1, 2 slots) copies it, reaching the source as ``local:
source`` resolves (through the link when there is one); the soak's sampler (kit/sampler.py, its own
consumers, no eosmirror code) reads the source directly and the target, and samples the time lag five times a
second: the age of the oldest committed source record not on the target yet. Percentiles are taken after the
warm-up, up to the load's end; the exact comparison (duplicates, order, losses, aborted data) covers every
record. Prints one JSON line; exit 0 when the copy was exact.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from eosmirror.core.config import ClusterRef
from eosmirror.kafka import connections
from eosmirror_tools.kit import cluster, link, workload
from eosmirror_tools.kit.sampler import Sampler


def measure(seconds: float, warmup: float, rate: float, partitions: int, size: int) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient, NewTopic

    source, target = cluster.local_cluster("source"), cluster.local_cluster("target")
    direct = source.client_config()
    far = connections.resolve(ClusterRef(local="source"), "followfar: the source")
    rtt_ms = link.measured_rtt_ms(far)
    topic = f"followfar-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(direct)
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    work = Path(tempfile.mkdtemp(prefix="followfar-"))
    name = "followfar_" + topic.split("-")[1]
    (work / "mirrors.yaml").write_text(yaml.safe_dump({"mirrors": [{
        "name": name, "source": {"local": "source"}, "target": {"local": "target"}, "topics": [topic],
        "slots": 2, "follow": True, "max_transaction_seconds": 0.1}]}))
    sampler = Sampler(direct["bootstrap.servers"], target.client_config()["bootstrap.servers"], topic,
                      every=0.2).start()
    stop, counts = threading.Event(), {}
    load = workload.Workload(direct, topic, partitions, txn_id=f"followfar-load-{topic}", size=size, headers=False)
    producer = threading.Thread(target=lambda: counts.update(load.produce_paced(stop, rate, max(1, 100 // partitions))),
                                daemon=True, name="followfar-load")
    started = time.time()
    producer.start()
    with (work / "follower.log").open("w") as out:
        follower = subprocess.Popen(
            [sys.executable, "-m", "eosmirror.cli", "run", name, "--config", str(work / "mirrors.yaml"), "--inprocess",
             "--follow-seconds", str(int(warmup + seconds + 60))], stdout=out, stderr=subprocess.STDOUT)
        try:
            time.sleep(warmup + seconds)   # elapsed time, not a wait: the load runs this long
            stop.set()
            producer.join(60)
            ended = time.time()
            deadline = time.monotonic() + 60
            while sampler.lag_now("mirror") > 0 and time.monotonic() < deadline and follower.poll() is None:
                time.sleep(0.2)   # the poll of a bounded wait for the follower to copy the last records
            measured = sampler.stop(since=started + warmup, until=ended)["mirror"]
        finally:
            follower.terminate()
            follower.wait(60)
    return {"round_trip_ms": round(rtt_ms, 1), "goal_s": round(rtt_ms / 1000 + 0.5, 2), **measured,
            "produced": counts, "follower_log": str(work / "follower.log")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="eosmirror_tools.bench.followfar", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measured seconds after the warm-up")
    parser.add_argument("--warmup", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=2000.0, help="records/s produced")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--size", type=int, default=200, help="bytes per record (20 or more)")
    args = parser.parse_args(argv)
    for flag, value in (("--seconds", args.seconds), ("--rate", args.rate), ("--partitions", args.partitions)):
        if value <= 0:
            parser.error(f"{flag} must be above 0 (got {value:g})")
    if args.warmup < 0 or args.size < 20:
        parser.error("--warmup must not be negative and --size must be 20 or more")
    out = measure(args.seconds, args.warmup, args.rate, args.partitions, args.size)
    print(json.dumps(out))
    exact = out["records"] > 0 and not (out["duplicates"] or out["out_of_order"] or out["losses"] or out["aborted"])
    return 0 if exact else 1


if __name__ == "__main__":
    raise SystemExit(main())
