"""``make demo``: the mirror on the embedded clusters, start to finish, with a summary a person reads."""

from __future__ import annotations

import json
import time

from eosmirror import config, demo_data, paths, readers, submit, verify
from eosmirror.errors import EXIT_FAILED, EXIT_OK
from eosmirror.local import cluster

MIRROR = "demo"


def _step(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def _spark_run(master: str, result: str) -> tuple[int, dict, float]:
    mirror = config.load().get(MIRROR)
    cmd = submit.command(master, submit.job_arguments(MIRROR, result_json=result),
                         submit.spark_conf(dict(mirror.spark_conf), f"eosmirror-{MIRROR}"))
    started = time.monotonic()
    code = submit.run(cmd)
    with open(result) as fh:
        return code, json.load(fh), time.monotonic() - started


def main(records: int = 2000, master: str = "local[2]") -> int:
    _step("starting the embedded Kafka clusters (KRaft, loopback)")
    clusters = cluster.up()
    for c in clusters:
        print(f"    {c.name:<7} {c.bootstrap}   data {c.data_dir}")
    source = cluster.local_cluster("source")

    _step(f"writing the demo data set on the source ({records} records per topic)")
    seeded = demo_data.seed(source.client_config(), records=records)
    for topic in demo_data.TOPICS:
        extra = f" (+{seeded.aborted[topic]} in aborted transactions)" if topic in seeded.aborted else ""
        print(f"    {topic:<15} {seeded.committed[topic]} committed{extra}")

    out = paths.build_dir("demo")
    _step(f"mirror run 1: spark-submit --master {master} spark_jobs/mirror_batch.py --mirror {MIRROR}")
    code1, first, wall1 = _spark_run(master, str(out / "run1.json"))
    _step("mirror run 2: nothing new on the source, so it must copy nothing")
    code2, second, wall2 = _spark_run(master, str(out / "run2.json"))

    _step(f"eosmirror verify {MIRROR}: source and target, record by record")
    checks = verify.verify(config.load().get(MIRROR))
    print(verify.format_checks(checks))

    target = cluster.local_cluster("target").client_config()
    aborted_leaks = sum(1 for p in range(demo_data.TOPICS["demo.payments"][0])
                        for r in readers.read_all(target, "src.demo.payments", p, "target")
                        if ("txn", b"aborted") in r.headers)
    ok = (code1 == 0 and code2 == 0 and second["records"] == 0 and all(c.ok for c in checks) and not aborted_leaks)
    _step("summary")
    print(f"    run 1: {first['records']} records, {first['bytes'] / 1e6:.2f} MB copied in {wall1:.1f} s wall "
          f"(Spark start included); {first['records_per_second']:.0f} records/s inside the slots")
    print(f"    run 2: {second['records']} records copied (expected 0), {wall2:.1f} s wall")
    print(f"    verify: {sum(c.records for c in checks)} records in {len(checks)} partitions, "
          f"{'all identical' if all(c.ok for c in checks) else 'DIFFERENCES FOUND'}; aborted source records on "
          f"the target: {aborted_leaks}")
    print(f"    reports: {out}/run1.json, {out}/run2.json")
    print("    stop the clusters with: make down   (or .venv/bin/eosmirror local down)")
    print(f"\nDEMO {'PASSED' if ok else 'FAILED'}")
    return EXIT_OK if ok else EXIT_FAILED
