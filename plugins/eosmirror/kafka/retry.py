"""The one bounded retry loop: ask again while an error is transient, until a deadline.

Every wait on a broker in eosmirror is bounded: a partition whose leader moves, a coordinator still
loading, a topic just created that is not in the metadata yet. Past the deadline the last error
propagates, so the caller's message names what was still wrong.
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def retry_until(seconds: float, attempt: Callable[[], T], transient: Callable[[BaseException], bool],
                pause: float = 0.2) -> T:
    """``attempt()`` until it returns, while it raises a ``transient`` error and ``seconds`` have not passed."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return attempt()
        except Exception as exc:  # noqa: BLE001 - re-raised unless transient and in time
            if not transient(exc) or time.monotonic() + pause >= deadline:
                raise
        time.sleep(pause)


def wait_until(seconds: float, probe: Callable[[], T], done: Callable[[T], bool], pause: float = 0.2) -> T:
    """``probe()`` until ``done(value)`` or ``seconds`` have passed; returns the last value either way."""
    deadline = time.monotonic() + seconds
    value = probe()
    while not done(value) and time.monotonic() + pause < deadline:
        time.sleep(pause)
        value = probe()
    return value
