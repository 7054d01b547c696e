"""What the foreign-write check (core/foreign.py, issue #51 item 3) adds to a run, at 8 and 500 partitions.

Per shape: one topic of ``partitions`` partitions holding ``RECORDS`` records each, mirrored once
(in-process slots) so that every partition's progress carries its accounting. Then, ``ROUNDS`` times:

* ``clean_s``: the planner's check when nothing is foreign (driver/foreigncheck.check with the accounting
  the run's progress read already holds): one batched ListOffsets of the target's high watermarks;
* ``empty_run_check_s``: the "target check" step of an empty run's report (the same work, inside a run);
* ``suspect_s``: the check when EVERY partition lies beyond its accounting (an aborted transaction of
  another producer on each: not foreign, but it has to be read): a read_committed ListOffsets and a read
  of every partition's range by one consumer.

Run: ``python -m eosmirror_tools.bench.foreigncost`` against the clusters of ``EOSMIRROR_SOURCE_PORT`` /
``EOSMIRROR_TARGET_PORT`` (``eosmirror local up``). Prints one JSON document.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

RECORDS = 20
ROUNDS = 10
SHAPES = (8, 500)


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 1)


def measure(partitions: int, rounds: int = ROUNDS) -> dict[str, Any]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from eosmirror import driver
    from eosmirror.core import config
    from eosmirror.driver import foreigncheck
    from eosmirror.kafka import progress
    from eosmirror.kafka.cluster import Cluster

    name = f"fc{partitions}-{uuid.uuid4().hex[:6]}"
    raw = {"name": name, "source": {"local": "source"}, "target": {"local": "target"}, "topics": [name],
           "slots": 4, "max_transaction_seconds": 10}
    mirror = config.parse({"mirrors": [raw]}, Path("foreigncost.yaml")).mirrors[0]
    source = Cluster.resolve("source", mirror.source, mirror.name)
    target = Cluster.resolve("target", mirror.target, mirror.name)
    source_admin, target_admin = AdminClient(source.settings), AdminClient(target.settings)
    for future in source_admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)
    producer = Producer({**source.settings, "linger.ms": 5})
    for n in range(RECORDS):
        for k in range(partitions):
            producer.produce(name, value=f"{k}-{n}".encode(), partition=k)
    producer.flush(60)
    first = driver.MirrorRun(mirror)
    report = first.execute(first.prepare(), driver.run_in_process)
    assert report.ok and report.records == RECORDS * partitions, report.errors
    keys = [(name, k) for k in range(partitions)]

    def accounting() -> dict[tuple[str, int], Any]:
        return foreigncheck.of_progress(progress.read(target, keys, mirror.progress_group, stable=False))

    clean, empty, suspect = [], [], []
    for _ in range(rounds):
        acc = accounting()
        began = time.monotonic()
        outcome = foreigncheck.check(target, mirror.progress_group, keys, acc)
        clean.append(time.monotonic() - began)
        assert not outcome.foreign and outcome.read == 0 and outcome.checked == partitions, outcome
        run = driver.MirrorRun(mirror)
        report = run.execute(run.prepare(), driver.run_in_process)
        assert report.ok and report.records == 0, report.errors
        empty.append(report.steps["target check"])
    other = Producer({**target.settings, "transactional.id": f"other-{name}"})
    other.init_transactions(30)
    other.begin_transaction()
    for k in range(partitions):
        other.produce(name, value=b"aborted", partition=k)
    other.flush(30)
    other.abort_transaction(30)
    acc = accounting()
    for _ in range(rounds):
        began = time.monotonic()
        outcome = foreigncheck.check(target, mirror.progress_group, keys, acc)
        suspect.append(time.monotonic() - began)
        assert not outcome.foreign and outcome.read == partitions, outcome
    for admin in (source_admin, target_admin):
        for future in admin.delete_topics([name]).values():
            future.result(30)
    return {"partitions": partitions, "rounds": rounds, "clean_ms_median": _median_ms(clean),
            "clean_ms_max": round(max(clean) * 1000, 1), "empty_run_check_ms_median": _median_ms(empty),
            "suspect_ms_median": _median_ms(suspect), "suspect_ms_max": round(max(suspect) * 1000, 1)}


def main() -> int:
    print(json.dumps([measure(n) for n in SHAPES], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
