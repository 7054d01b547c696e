"""A measured child program (processes.ChildProcess) that counts the local brokers' CPU apart: the one place
the process tools meet the clusters (processes.py imports no cluster module, so cluster -> link -> processes
stays a line, not a circle)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eosmirror_tools.kit import cluster
from eosmirror_tools.kit.processes import ChildProcess


def child(cmd: list[str], log_path: Path, **options: Any) -> ChildProcess:
    """``ChildProcess(cmd, log_path, **options)`` whose CPU window also reads the local brokers and proxies."""
    return ChildProcess(cmd, log_path, brokers=cluster.broker_pids, **options)
