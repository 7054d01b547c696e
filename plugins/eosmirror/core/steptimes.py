"""How long each step of one run took: the run report's ``steps`` and its timing line.

A run's fixed cost (everything but copying) decides how often a mirror can run; timing it step by
step in every report shows where it goes (process start, resolve, observe and plan, target sync,
generation, slots, snapshot, lag record) without a profiler.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from typing import Iterator, Mapping, TypeVar

T = TypeVar("T")


class StepTimes:
    """Named durations, in the order the steps ran (a step run twice adds up)."""

    def __init__(self) -> None:
        self._seconds: dict[str, float] = {}

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - started)

    def add(self, name: str, seconds: float) -> None:
        self._seconds[name] = self._seconds.get(name, 0.0) + max(0.0, seconds)

    def as_dict(self) -> dict[str, float]:
        return {name: round(seconds, 3) for name, seconds in self._seconds.items()}


_client = threading.local()


def time_process(pid: int | None) -> None:
    """Runs of this thread time ``pid``'s start as their "process start" (the run server's client,
    whose start is the run's; None: this process)."""
    _client.pid = pid


def process_age() -> float | None:
    """Seconds since this process started (interpreter start, imports, config: before any step);
    None where /proc does not tell."""
    try:
        with open(f"/proc/{getattr(_client, 'pid', None) or os.getpid()}/stat") as stat:
            started_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as uptime:
            now = float(uptime.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, now - started_ticks / os.sysconf("SC_CLK_TCK"))


def timing_line(steps: Mapping[str, float]) -> str:
    """``steps: process start 0.90 s, resolve 0.05 s, ...`` (empty when nothing was timed)."""
    if not steps:
        return ""
    return "steps: " + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in steps.items())
