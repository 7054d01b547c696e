"""Bounded waits on an observable condition: each gives up with a message naming what it saw."""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import sys
import time
import traceback


def in_seconds(seconds: float) -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=seconds)


def wait_for(what, check, budget: float):
    """Until ``check()`` returns (True, seen); returns that ``seen``. Gives up after ``budget`` seconds
    naming ``what`` and the last ``seen``."""
    deadline = time.monotonic() + budget
    seen = None
    while time.monotonic() < deadline:
        ok, seen = check()
        if ok:
            return seen
        time.sleep(0.3)   # the poll interval of this bounded wait
    raise AssertionError(f"gave up after {budget:.0f} s waiting for {what}; last saw: {seen}")


def result_or_stacks(future, budget: float, what: str, other) -> dict:
    """``future.result()`` within ``budget``; else fail saying where every thread of this process
    stood (the runs' slots are threads here: the stacks show which step a run waited in)."""
    try:
        return future.result(timeout=budget)
    except concurrent.futures.TimeoutError:
        stacks = "\n".join(f"--- thread {ident}:\n" + "".join(traceback.format_stack(frame)[-6:])
                           for ident, frame in sys._current_frames().items())
        raise AssertionError(f"gave up after {budget:.0f} s waiting for {what}; the other run done: "
                             f"{other.done()}; threads:\n{stacks[-12000:]}") from None
