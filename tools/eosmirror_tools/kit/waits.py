"""Budgets for waiting on a service to start (a broker, Airflow, a run server), scaled by how busy
the machine is, and the words a wait says when it gives up.

A start that takes 40 s on a quiet machine takes two or three times that with a second pair of
clusters and a test suite beside it: a fixed budget is either too tight there or needlessly long
everywhere. So a budget is the quiet machine's figure times the run-queue pressure (the 1-minute
load average per core, at least 1), capped by what the caller can afford (below its test's timeout).
A wait is never a speed check: it only bounds how long a dead service can hold a test.
"""

from __future__ import annotations

import os

MAX_FACTOR = 3.0   # beyond three times the quiet figure a start is stuck, not slow


def load_factor() -> float:
    """The 1-minute load average per core, at least 1 and at most MAX_FACTOR."""
    return min(MAX_FACTOR, max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1)))


def service_budget(quiet_seconds: float, cap_seconds: float | None = None) -> float:
    """``quiet_seconds`` scaled by :func:`load_factor`, never above ``cap_seconds``."""
    budget = quiet_seconds * load_factor()
    return budget if cap_seconds is None else min(budget, cap_seconds)


def machine_now() -> str:
    """What a wait that gave up saw of the machine: enough to tell a dead service from a busy host."""
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (5 min {five:.1f}) on {os.cpu_count()} cores"
