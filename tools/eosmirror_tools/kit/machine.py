"""The machine a figure came from: enough to tell whether two reports (bench, soak) are comparable."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from typing import Any


def _version(cmd: list[str]) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return (done.stdout + done.stderr).strip().splitlines()[0]
    except Exception:  # noqa: BLE001
        return "unknown"


def describe() -> dict[str, Any]:
    """Enough to tell whether two reports are comparable."""
    import confluent_kafka

    from eosmirror_tools.kit import runtime

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor())
    mem_kb = next((int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal")), 0)
    try:
        from importlib.metadata import version
        pyspark_version = version("pyspark")
    except Exception:  # noqa: BLE001
        pyspark_version = "unknown"
    return {"cpus": os.cpu_count(), "cpu_model": cpu, "memory_gb": round(mem_kb / 1024 / 1024, 1),
            "load_average_at_start": os.getloadavg(), "python": sys.version.split()[0],
            "java": _version([runtime.java_binary(), "-version"]), "kafka": runtime.kafka_version(),
            "confluent_kafka": confluent_kafka.__version__, "librdkafka": confluent_kafka.libversion()[0],
            "pyspark": pyspark_version, "platform": platform.platform()}
