"""eosmirror runs exactly as a user starts them: ``eosmirror run <mirror> --master local[k]``.

The whole command is timed (Python CLI, spark-submit, SparkSession, planning, the slots, shutdown)
and its process tree is sampled for RSS. The run's own report supplies the steady copy rate inside
the slots (records / the longest slot's seconds).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eosmirror_tools.kit import measured
from eosmirror_tools.kit.processes import TreeUsage


@dataclass
class MirrorRunResult:
    exit_code: int
    wall_seconds: float
    report: dict[str, Any]
    peak: TreeUsage
    log_path: Path
    cpu: dict[str, Any]

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.report.get("status") == "ok"


def write_definition(path: Path, name: str, topics: list[str], slots: int, delivery: str,
                     source: dict[str, Any] | None = None) -> Path:
    """A mirrors file holding one mirror of exactly ``topics`` (identity names, local clusters; ``source``:
    another way to the source, e.g. ``{"config": {...}}`` through a link's proxy)."""
    import yaml

    mirror = {"name": name, "source": source or {"local": "source"}, "target": {"local": "target"},
              "topics": [re.escape(t) for t in topics], "slots": slots, "delivery": delivery,
              "target_replication_factor": 1}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"mirrors": [mirror]}, sort_keys=False))
    return path


def run(name: str, config_path: Path, master: str | None, work: Path, timeout: float, label: str) -> MirrorRunResult:
    """``master`` None: the run goes to the running run server (``eosmirror run --server``)."""
    result_json = work / "results" / f"{label}.json"
    result_json.parent.mkdir(parents=True, exist_ok=True)
    result_json.unlink(missing_ok=True)
    log_path = work / "logs" / f"{label}.log"
    cmd = [sys.executable, "-m", "eosmirror.cli", "run", name, "--config", str(config_path),
           *(["--master", master] if master else ["--server"]), "--result-json", str(result_json)]
    with measured.child(cmd, log_path) as child:
        code = child.wait(timeout)
    report = json.loads(result_json.read_text()) if result_json.exists() else {}
    return MirrorRunResult(exit_code=code, wall_seconds=child.seconds, report=report, peak=child.peak,
                           log_path=log_path, cpu=child.cpu())


def internal_topics(name: str) -> list[str]:
    from eosmirror.core import naming

    return [naming.state_topic(name), naming.offset_sync_topic(name)]


def progress_group(name: str) -> str:
    return f"eosmirror.{name}"   # config.py's default progress_group
