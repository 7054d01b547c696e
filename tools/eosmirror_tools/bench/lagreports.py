"""``python -m eosmirror_tools.bench.lagreports``: the lag reports at size, on the embedded clusters.

20 mirrors x 50 partitions, each with 7 days of history at 5-minute samples (2016 samples of 50
partitions per mirror, written with their historical timestamps), then times what the lag DAG's task
does (sample, evaluate and record every mirror), the overview page and one mirror's 24 h and 7 d page
(server-side: figures, history read, HTML/SVG). Writes build/lagbench.json; deletes its topics.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from pathlib import Path

FIVE_MINUTES = 300_000


def _history(target_conf: dict, mirrors: list, topic: str, partitions: int, days: int, now_ms: int) -> int:
    from confluent_kafka import Producer

    from eosmirror.core import naming
    from eosmirror.core.lag import SAMPLE_KEY, MirrorSample, PartitionSample
    from eosmirror.kafka import lagstore
    from eosmirror.kafka.cluster import Cluster

    producer = Producer({**target_conf, "compression.type": "lz4", "linger.ms": 50, "enable.idempotence": True})
    count = days * 86_400_000 // FIVE_MINUTES
    for m in mirrors:
        target = Cluster.resolve("target", m.target, m.name)
        lagstore.ensure_topic(target, m.name, m.lag.history_days, -1)
        for i in range(count):
            at = now_ms - (count - i) * FIVE_MINUTES
            lso = 1000 + i * 10
            sample = MirrorSample(m.name, at, tuple(PartitionSample(topic, p, lso, lso, lso - (i % 7) * 3, 0,
                                                                    at - 60_000, at - 30_000) for p in range(partitions)))
            producer.produce(naming.lag_topic(m.name), key=SAMPLE_KEY, value=sample.encode(), partition=0, timestamp=at)
            producer.poll(0)
        producer.flush(120)
    return count


def _timed(fn):  # noqa: ANN001, ANN202
    started = time.perf_counter()
    value = fn()
    return value, round(time.perf_counter() - started, 3)


def measure(mirror_count: int, partitions: int, days: int, keep: bool) -> dict:
    from confluent_kafka.admin import AdminClient, NewTopic

    from eosmirror.airflow import lagrender
    from eosmirror.core import config, naming
    from eosmirror.driver import lag
    from eosmirror_tools.kit import cluster

    source, target = (c.client_config() for c in cluster.default_clusters())
    suffix = uuid.uuid4().hex[:6]
    topic = f"lagbench-src-{suffix}"
    source_admin, target_admin = AdminClient(source), AdminClient(target)   # kept alive while futures run
    source_admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)
    raw = [{"name": f"lagbench-{suffix}-{k:02d}", "source": {"local": "source"}, "target": {"local": "target"},
            "topics": [topic]} for k in range(mirror_count)]
    mirrors = config.parse({"mirrors": raw}, Path("lagbench.yaml"))
    now = int(time.time() * 1000)
    samples, history_seconds = _timed(lambda: _history(target, list(mirrors.mirrors), topic, partitions, days, now))
    try:
        one = mirrors.mirrors[0]
        _, dag_task = _timed(lambda: lag.report_all(mirrors, record=True))
        statuses, overview_data = _timed(lambda: lag.report_all(mirrors))
        _, overview_html = _timed(lambda: lagrender.overview(statuses, now))
        out = {"mirrors": mirror_count, "partitions_per_mirror": partitions, "history_days": days,
               "samples_per_mirror": samples, "history_written_seconds": history_seconds,
               "lag_dag_task_seconds": dag_task, "overview_page_seconds": round(overview_data + overview_html, 3)}
        for window in ("24h", "7d"):
            def page() -> int:
                (status,) = lag.report_all(mirrors, one.name)
                found = lag.history(one, int(time.time() * 1000) - lagrender.RANGES[window])
                return len(lagrender.mirror_page(status, found, window, int(time.time() * 1000)))
            size, seconds = _timed(page)
            out[f"mirror_page_{window}_seconds"], out[f"mirror_page_{window}_bytes"] = seconds, size
        return out
    finally:
        if not keep:
            names = [naming.lag_topic(m.name) for m in mirrors.mirrors]
            for future in target_admin.delete_topics(names).values():
                future.result(60)
            source_admin.delete_topics([topic])[topic].result(60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eosmirror_tools.bench.lagreports", description=__doc__)
    parser.add_argument("--mirrors", type=int, default=20)
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--keep-topics", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("build/lagbench.json"))
    args = parser.parse_args(argv)
    result = measure(args.mirrors, args.partitions, args.days, args.keep_topics)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
