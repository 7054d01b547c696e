"""``--only cap``: a mirror's bandwidth cap held for 60 s, measured from outside (issue #52 item 3).

A 2-slot mirror capped at ``CAP`` bytes/s copies 75 s worth of 1 KB records from 4 partitions (the run
in this process, the slots in threads: the same SlotCopier a Spark task runs). ``kit.caprate.EndSampler``
reads the target's high watermarks five times a second with its own consumer. The figure: the rate
over the 60 s that start 5 s after the first record arrived (the goal: within +-5 % of the cap), the
worst 5 s window, the slowest and fastest second. Verified when read_committed consumers on the target
count exactly the source's records, each once. Written to build/bench/cap.json.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

from eosmirror_tools.kit.caprate import EndSampler, active, windows

CAP = 1_000_000          # bytes per second
HOLD = 60.0              # seconds the figure spans
QUICK_HOLD = 15.0
SETTLE = 5.0             # seconds after the first record before the figure starts
PARTITIONS = 4
SLOTS = 2
VALUE_BYTES = 1000
KEY_BYTES = 16
MAX_MESSAGE_BYTES = 262_144   # per slot the cap's share (500,000) carries one such record a second
GOAL_PCT = 5.0


def _seed(conf: dict[str, Any], topic: str, records: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(conf)   # held until the topic exists: a collected admin client cancels its futures
    admin.create_topics([NewTopic(topic, PARTITIONS, 1, config={"max.message.bytes": str(MAX_MESSAGE_BYTES)})]
                        )[topic].result(30)
    # Batches below the topic's max.message.bytes, or the broker refuses them.
    p = Producer({**conf, "enable.idempotence": True, "linger.ms": 20, "batch.size": MAX_MESSAGE_BYTES // 2})
    value = b"v" * VALUE_BYTES
    for n in range(records):
        while True:
            try:
                p.produce(topic, key=f"{n:016d}".encode(), value=value, partition=n % PARTITIONS)
                break
            except BufferError:
                p.poll(0.1)   # the producer's queue is full: let it send
        if n % 10_000 == 0:
            p.poll(0)
    if p.flush(120):
        raise RuntimeError(f"seeding {topic}: records not acknowledged in 120 s")


def _count(conf: dict[str, Any], topic: str) -> tuple[int, int]:
    """(records, distinct keys) a read_committed consumer reads on ``topic``."""
    from eosmirror.kafka import readers
    from eosmirror.kafka.cluster import Cluster

    cluster = Cluster.from_settings("bench", conf, "bench")
    keys: list[bytes | None] = []
    for k in range(PARTITIONS):
        keys += [r.key for r in readers.read_all(cluster, topic, k, read_committed=True)]
    return len(keys), len(set(keys))


def run(source_conf: dict[str, Any], target_conf: dict[str, Any], quick: bool, run_id: str,
        say: Callable[[str], None]) -> dict[str, Any]:
    from eosmirror import driver
    from eosmirror.core import config

    hold = QUICK_HOLD if quick else HOLD
    record = KEY_BYTES + VALUE_BYTES
    records = int(CAP * (hold + SETTLE + 10) / record)
    topic, name = f"bench-cap-{run_id}", f"benchcap{run_id.replace('-', '')}"
    say(f"seeding {records:,} records of {record} B on {PARTITIONS} partitions")
    _seed(source_conf, topic, records)
    m = config.parse({"mirrors": [{"name": name, "source": {"local": "source"}, "target": {"local": "target"},
                                   "topics": [topic], "slots": SLOTS, "max_bytes_per_second": CAP,
                                   "max_transaction_seconds": 10}]}, Path("bench.yaml")).mirrors[0]
    say(f"copying at max_bytes_per_second {CAP:,} ({hold:.0f} s measured)")
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    with EndSampler(target_conf, topic, PARTITIONS) as sampler:
        mirror_run = driver.MirrorRun(m, driver.RunOptions())
        report = mirror_run.execute(mirror_run.prepare(), driver.run_in_process)
    run_seconds = time.monotonic() - started
    samples = active(sampler.samples, records)
    first = samples[0][0] if samples else 0.0
    held = [s for s in samples if s[0] >= first + SETTLE]
    end = next((i for i, s in enumerate(held) if s[0] - held[0][0] >= hold), len(held) - 1) if held else -1
    measured = held[:end + 1]
    span = measured[-1][0] - measured[0][0] if len(measured) > 1 else 0.0
    achieved = (measured[-1][1] - measured[0][1]) * record / span if span else 0.0
    ones = [rate for _, rate in windows(measured, 1.0, record)]
    fives = [rate for _, rate in windows(measured, 5.0, record)]
    copied, distinct = _count(target_conf, topic)
    deviation = (achieved - CAP) / CAP * 100
    section = {
        "cap_bytes_per_second": CAP, "slots": SLOTS, "record_bytes": record, "records": records,
        "measured_seconds": round(span, 1), "achieved_bytes_per_second": round(achieved),
        "deviation_pct": round(deviation, 2), "goal_pct": GOAL_PCT, "met": abs(deviation) <= GOAL_PCT,
        "worst_5s_bytes_per_second": round(max(fives)) if fives else None,
        "slowest_1s_bytes_per_second": round(min(ones)) if ones else None,
        "fastest_1s_bytes_per_second": round(max(ones)) if ones else None,
        "run_seconds": round(run_seconds, 1), "run_status": report.status.value,
        "cap_cut_transactions": sum(s.cap_cut_transactions for s in report.slots),
        "throttled_seconds": round(sum(s.throttled_seconds for s in report.slots), 1),
        "verified": report.ok and copied == distinct == records,
        "target_records": copied, "load_average_1m": {"before": round(load_before, 2),
                                                      "after": round(os.getloadavg()[0], 2)},
    }
    say(f"achieved {achieved:,.0f} bytes/s over {span:.1f} s ({deviation:+.2f} % of the cap; goal +-{GOAL_PCT:g} %), "
        f"worst 5 s {section['worst_5s_bytes_per_second']:,} bytes/s, seconds "
        f"{section['slowest_1s_bytes_per_second']:,}..{section['fastest_1s_bytes_per_second']:,}; "
        f"{copied:,} of {records:,} records on the target (read_committed), "
        f"{'verified' if section['verified'] else 'NOT VERIFIED'}")
    return section


def write(section: dict[str, Any], out_dir: Path) -> Path:
    from eosmirror.core.report import write_json

    return write_json(section, out_dir / "cap.json")
