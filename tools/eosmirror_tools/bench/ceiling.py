"""Broker ceiling: Kafka's own ``org.apache.kafka.tools.ProducerPerformance`` into the target.

It writes ``value_bytes``-byte values without keys or headers, with the same producer batching
eosmirror's slots use (acks=all, linger.ms=20, batch.size=1 MB), once without and once with
transactions. Its rate excludes JVM start (the tool times its own send loop); the wall time
includes it. What a mirror can reach on this machine is below this: a mirror must also read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eosmirror_tools.kit import measured, runtime
from eosmirror_tools.kit.processes import TreeUsage

PRODUCER_PROPS = {"acks": "all", "linger.ms": "20", "batch.size": "1000000"}

# "2000000 records sent, 312500.0 records/sec (59.60 MB/sec), 35.1 ms avg latency, ..."
_SUMMARY = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)", re.MULTILINE)


@dataclass
class CeilingRun:
    exit_code: int
    records_sent: int
    records_per_second: float
    wall_seconds: float
    peak: TreeUsage
    summary_line: str
    cpu: dict[str, Any]


def command(bootstrap: str, topic: str, records: int, value_bytes: int, transactional_id: str | None,
            transaction_duration_ms: int) -> list[str]:
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records),
            "--record-size", str(value_bytes), "--throughput", "-1",
            "--command-property", *[f"{k}={v}" for k, v in PRODUCER_PROPS.items()]]
    if transactional_id:
        args += ["--transactional-id", transactional_id, "--transaction-duration-ms", str(transaction_duration_ms)]
    return runtime.java_command("org.apache.kafka.tools.ProducerPerformance", *args, heap="512m")


def run(bootstrap: str, topic: str, records: int, value_bytes: int, log_path: Path, timeout: float,
        transactional_id: str | None = None, transaction_duration_ms: int = 3000) -> CeilingRun:
    cmd = command(bootstrap, topic, records, value_bytes, transactional_id, transaction_duration_ms)
    with measured.child(cmd, log_path) as child:
        code = child.wait(timeout)
    text = log_path.read_text(errors="replace")
    found = _SUMMARY.findall(text)
    # The last summary line is the whole run (with --warmup-records a steady-state line follows).
    sent, rate, _mb = found[-1] if found else ("0", "0", "0")
    line = next((l for l in reversed(text.splitlines()) if _SUMMARY.match(l)), "")
    return CeilingRun(exit_code=code, records_sent=int(sent), records_per_second=float(rate),
                      wall_seconds=child.seconds, peak=child.peak, summary_line=line.strip(), cpu=child.cpu())
