"""``--only storm``: the catch-up storm, measured from outside (issue #52 item 4).

N partitions (default 5,000; ``--storm-partitions``; ``--quick``: 50) hold a backlog that one bounded
eosmirror run (``SLOTS`` slots, in threads of this process: the SlotCopier a Spark task runs) copies at
once. Three cases, one after another, each on a fresh source topic of the same shape: no cap,
``max_bytes_per_second`` = ``CAP``, ``catch_up_bytes_per_second`` = ``CAP`` (no ``max_bytes_per_second``:
a cap only while the mirror is far behind).

The backlog: ``RECORDS_PER_PARTITION`` records of ``VALUE_BYTES`` per partition, stamped over the hour
before the seeding (from 60 to 5 minutes old: "an hour of lag"), so that every batch the mirror copies is
older than ``catch_up_lag_seconds`` (300 s): the catch-up rate is in force until the end. A spread reaching
"now" would not exercise it: with a few dozen records per partition one fetch returns a partition's whole
hour, its newest record is young, and the slot would count itself caught up from the first batch on.

Measured from outside, in processes of their own (kit/latency.py), for the whole selection: a producer
(acks=all, 100 B records, ``PROBE_RATE``/s) on the TARGET, latency from its delivery callbacks, and a
consumer on the SOURCE of a topic fed at ``PROBE_RATE``/s, latency = consume time - record timestamp. Per
case: p50/p99/max of both over the ``BASELINE`` seconds before the run (no mirror) and over the run's copy
(``execute``, after the target topics exist), the catch-up time, and exactly-once: the read_committed count
on the target equals the source's count. Written to build/bench/storm.json and the bench report.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

from eosmirror_tools.kit import counting
from eosmirror_tools.kit.latency import Probes, summary

PARTITIONS = 5_000
QUICK_PARTITIONS = 50
RECORDS_PER_PARTITION = 60
VALUE_BYTES = 1_000
KEY_BYTES = 16
SLOTS = 4
CAP = 4_000_000                      # bytes per second, the mirror's (1,000,000 per slot)
CATCH_UP_LAG_SECONDS = 300.0         # the field's default
BACKLOG_OLDEST_S = 3_600.0           # the oldest record's age when seeded
BACKLOG_NEWEST_S = 300.0 + 60.0      # the newest's: older than catch_up_lag_seconds, with a minute to spare
MAX_MESSAGE_BYTES = 262_144          # a slot's share of the cap carries one such record a second
PROBE_RATE = 200.0                   # records per second of each probe
BASELINE = 10.0
QUICK_BASELINE = 3.0
CASES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("no cap", {}),
    ("max_bytes_per_second", {"max_bytes_per_second": CAP}),
    ("catch_up_bytes_per_second", {"catch_up_bytes_per_second": CAP, "catch_up_lag_seconds": CATCH_UP_LAG_SECONDS}),
)


def _create(conf: dict[str, Any], topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(conf)   # held until the topic exists: a collected admin client cancels its futures
    future = admin.create_topics([NewTopic(topic, partitions, 1, config={"max.message.bytes": str(MAX_MESSAGE_BYTES)})],
                                 request_timeout=180)[topic]
    future.result(240)


def _seed(conf: dict[str, Any], topic: str, partitions: int) -> int:
    """The backlog, stamped from BACKLOG_OLDEST_S to BACKLOG_NEWEST_S ago; returns the records acknowledged."""
    from confluent_kafka import Producer

    acked = [0]

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked[0] += 1

    p = Producer({**conf, "enable.idempotence": True, "linger.ms": 20, "batch.size": MAX_MESSAGE_BYTES // 2,
                  "queue.buffering.max.messages": 1_000_000})
    value = b"v" * VALUE_BYTES
    now_ms = int(time.time() * 1000)
    step_ms = (BACKLOG_OLDEST_S - BACKLOG_NEWEST_S) * 1000 / max(RECORDS_PER_PARTITION - 1, 1)
    for i in range(RECORDS_PER_PARTITION):
        stamp = int(now_ms - BACKLOG_OLDEST_S * 1000 + i * step_ms)
        for k in range(partitions):
            while True:
                try:
                    p.produce(topic, key=b"%08d-%07d" % (k, i), value=value, partition=k, timestamp=stamp,
                              on_delivery=delivered)
                    break
                except BufferError:
                    p.poll(0.1)   # the producer's queue is full: let it send
        p.poll(0)
    if p.flush(300):
        raise RuntimeError(f"seeding {topic}: records not acknowledged in 300 s")
    return acked[0]


def _case(source_conf: dict[str, Any], target_conf: dict[str, Any], probes: Probes, label: str,
          fields: dict[str, Any], partitions: int, baseline: float, topic: str, name: str,
          say: Callable[[str], None]) -> dict[str, Any]:
    from eosmirror import driver
    from eosmirror.core import config

    _create(source_conf, topic, partitions)
    seeded = _seed(source_conf, topic, partitions)
    source_count = counting.offset_sum(source_conf, topic, partitions, "source", read_committed=False)
    m = config.parse({"mirrors": [{"name": name, "source": {"local": "source"}, "target": {"local": "target"},
                                   "topics": [topic], "slots": SLOTS, "target_replication_factor": 1,
                                   **fields}]}, Path("bench.yaml")).mirrors[0]
    mirror_run = driver.MirrorRun(m, driver.RunOptions())
    prepared = mirror_run.prepare()          # the target topics exist before the storm starts
    # The baseline: the probes beside idle clusters (a measurement window, not a wait for a condition).
    base_start = time.time()
    time.sleep(baseline)
    load_before = os.getloadavg()[0]
    start = time.time()
    report = mirror_run.execute(prepared, driver.run_in_process)
    end = time.time()
    catch_up = end - start
    target_count, target_offsets = counting.count_committed(target_conf, topic, partitions)
    slots = report.slots
    row = {
        "case": label, "mirror_fields": fields, "partitions": partitions, "records": source_count,
        "seeded": seeded, "bytes": report.bytes, "catch_up_seconds": round(catch_up, 2),
        "catch_up_bytes_per_second": round(report.bytes / catch_up) if catch_up else None,
        "run_status": report.status.value, "run_records": report.records,
        "throttled_seconds": round(sum(s.throttled_seconds for s in slots), 1),
        "catch_up_rate_seconds": round(sum(s.catch_up_seconds for s in slots), 1),
        "cap_cut_transactions": sum(s.cap_cut_transactions for s in slots),
        "target_read_committed": target_count, "target_offsets": target_offsets,
        "verified": report.ok and target_count == source_count == seeded,
        "baseline_window": [round(base_start, 3), round(start, 3)], "storm_window": [round(start, 3), round(end, 3)],
        "load_average_1m": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
    }
    say(f"{label}: {source_count:,} records ({report.bytes / 1e6:.0f} MB) on {partitions:,} partitions caught up in "
        f"{catch_up:.1f} s ({row['catch_up_bytes_per_second'] or 0:,} bytes/s; throttled {row['throttled_seconds']} "
        f"slot-s, at the catch-up rate {row['catch_up_rate_seconds']} slot-s); {target_count:,} read_committed on "
        f"the target: {'verified' if row['verified'] else 'NOT VERIFIED'}")
    return row


def _latencies(probes: Probes, row: dict[str, Any]) -> None:
    for probe, key in (("produce", "target_produce_latency"), ("fetch", "source_fetch_latency")):
        samples = probes.samples(probe)
        row[key] = {"baseline": summary(samples, *row["baseline_window"]),
                    "storm": summary(samples, *row["storm_window"])}


def _cleanup(source_conf: dict[str, Any], target_conf: dict[str, Any], fragment: str) -> None:
    from eosmirror_tools.kit import topics

    for conf in (source_conf, target_conf):
        topics.delete_topics(conf, topics.topics_containing(conf, fragment))


def run(source_conf: dict[str, Any], target_conf: dict[str, Any], quick: bool, keep_topics: bool, run_id: str,
        partitions: int | None, say: Callable[[str], None]) -> dict[str, Any]:
    from eosmirror.kafka import clients

    quiet = {"log_level": clients.librdkafka_log_level()}
    source_conf, target_conf = {**source_conf, **quiet}, {**target_conf, **quiet}
    partitions = partitions or (QUICK_PARTITIONS if quick else PARTITIONS)
    baseline = QUICK_BASELINE if quick else BASELINE
    prefix = f"bench-storm-{run_id}"
    rows: list[dict[str, Any]] = []
    say(f"{partitions:,} partitions x {RECORDS_PER_PARTITION} records of {KEY_BYTES + VALUE_BYTES} B stamped "
        f"{BACKLOG_OLDEST_S / 60:.0f}-{BACKLOG_NEWEST_S / 60:.0f} min ago, {SLOTS} slots; probes at "
        f"{PROBE_RATE:.0f} records/s; baseline {baseline:.0f} s per case")
    try:
        with Probes(target_conf, f"{prefix}-probe-produce", source_conf, f"{prefix}-probe-fetch", PROBE_RATE) as probes:
            for index, (label, fields) in enumerate(CASES):
                slug = label.replace("_", "").replace(" ", "")
                rows.append(_case(source_conf, target_conf, probes, label, fields, partitions, baseline,
                                  f"{prefix}-{slug}", f"benchstorm{run_id.replace('-', '')}{index}", say))
                if not keep_topics:   # one backlog on the brokers at a time
                    _cleanup(source_conf, target_conf, f"{prefix}-{slug}")
        for row in rows:
            _latencies(probes, row)
            t, s = row["target_produce_latency"], row["source_fetch_latency"]
            say(f"{row['case']}: target produce p99 {t['baseline']['p99_ms']} -> {t['storm']['p99_ms']} ms, "
                f"source fetch p99 {s['baseline']['p99_ms']} -> {s['storm']['p99_ms']} ms "
                f"(baseline -> storm)")
        failures = {name: r["failed"] for name, r in probes.results.items() if r.get("failed")}
    finally:
        if not keep_topics:
            _cleanup(source_conf, target_conf, prefix)
    return {"quick": quick, "partitions": partitions, "records_per_partition": RECORDS_PER_PARTITION,
            "record_bytes": KEY_BYTES + VALUE_BYTES, "slots": SLOTS, "cap_bytes_per_second": CAP,
            "catch_up_lag_seconds": CATCH_UP_LAG_SECONDS,
            "backlog_age_seconds": [BACKLOG_NEWEST_S, BACKLOG_OLDEST_S], "probe_rate": PROBE_RATE,
            "baseline_seconds": baseline, "probe_failures": failures, "cases": rows,
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "verified": len(rows) == len(CASES) and all(r["verified"] for r in rows) and not failures}


def table(doc: dict[str, Any]) -> str:
    """Markdown: one row per case, both latencies (baseline -> storm) and the catch-up."""
    section = doc.get("storm")
    if not section:
        return ""

    def cell(lat: dict[str, Any]) -> str:
        return "/".join("-" if lat[k] is None else f"{lat[k]:g}" for k in ("p50_ms", "p99_ms", "max_ms"))

    lines = [f"{section['partitions']:,} partitions x {section['records_per_partition']} records of "
             f"{section['record_bytes']} B (stamped {section['backlog_age_seconds'][1] / 60:.0f}-"
             f"{section['backlog_age_seconds'][0] / 60:.0f} min old), {section['slots']} slots, cap "
             f"{section['cap_bytes_per_second']:,} B/s; probes {section['probe_rate']:g} records/s; latencies in ms "
             f"p50/p99/max, baseline ({section['baseline_seconds']:g} s before) -> during the catch-up", "",
             "| case | catch-up (s) | MB/s | target produce, baseline | target produce, storm | source fetch, "
             "baseline | source fetch, storm | read_committed / source | verified |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in section["cases"]:
        t, s = r.get("target_produce_latency"), r.get("source_fetch_latency")
        lines.append(f"| {r['case']} | {r['catch_up_seconds']} | {(r['catch_up_bytes_per_second'] or 0) / 1e6:.1f} | "
                     f"{cell(t['baseline']) if t else '-'} | {cell(t['storm']) if t else '-'} | "
                     f"{cell(s['baseline']) if s else '-'} | {cell(s['storm']) if s else '-'} | "
                     f"{r['target_read_committed']:,} / {r['records']:,} | {'yes' if r['verified'] else 'NO'} |")
    return "\n".join(lines)


def write(section: dict[str, Any], out_dir: Path) -> Path:
    from eosmirror.core.report import write_json

    return write_json(section, out_dir / "storm.json")
