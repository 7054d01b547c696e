"""Waiting for the markers of transactions that are already committed (issue #44).

``commit_transaction()`` returns once the transaction coordinator has decided; the broker then
writes a commit marker into every partition the transaction touched, the progress group's offsets
partition included. A transaction of 1,250 partitions on a busy broker takes many seconds to be
marked (figures: docs/results.md, "Incidents behind the code"), and until a partition's
marker is written, reads with require_stable (or read_committed) of that partition answer "pending".
That looks exactly like an open transaction, which only a slot of a running or killed run holds.

The difference is visible over time: markers being written make the set of pending partitions
SHRINK; an open transaction keeps its partitions pending. So a reader asks again, round after round,
and decides here:

* nothing pending: settled;
* something settled in the last ``stuck_seconds``: markers are being written, wait;
* nothing settled for ``stuck_seconds``: a transaction is really open (stuck);
* ``bound_seconds`` (the mirror's transaction timeout: by then the broker has aborted any open
  transaction of the mirror) since the first look: give up whatever the trend (bound).

"Settled" means a new minimum: a count that rises (a new transaction began) and falls back is no
progress, so a flapping count cannot keep a reader waiting; the bound caps even a steady trickle.
The decision is a pure function of the looks; :func:`wait` is the loop, its clock and sleep passed in.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

SETTLED, WAIT, STUCK, BOUND = "settled", "wait", "stuck", "bound"


@dataclass(frozen=True)
class Look:
    """One round: when (monotonic seconds) and how much was still pending. ``pending`` is what the
    decision compares (it may count a partition once per sign of progress it is still missing);
    ``partitions``, when given, is how many partitions that is, for the messages."""

    at: float
    pending: int
    partitions: int | None = None

    @property
    def shown(self) -> int:
        return self.pending if self.partitions is None else self.partitions


def last_progress(looks: Sequence[Look]) -> float:
    """When the pending count last reached a new minimum (the first look counts as one)."""
    best, when = looks[0].pending, looks[0].at
    for look in looks[1:]:
        if look.pending < best:
            best, when = look.pending, look.at
    return when


def decide(looks: Sequence[Look], stuck_seconds: float, bound_seconds: float) -> str:
    """SETTLED, WAIT, STUCK or BOUND after the last of ``looks`` (at least one; the first is the start)."""
    last = looks[-1]
    if last.pending == 0:
        return SETTLED
    if last.at - looks[0].at >= bound_seconds:
        return BOUND
    if last.at - last_progress(looks) >= stuck_seconds:
        return STUCK
    return WAIT


@dataclass
class Outcome:
    verdict: str
    looks: list[Look] = field(default_factory=list)
    stuck_seconds: float = 0.0
    bound_seconds: float = 0.0

    @property
    def waited(self) -> float:
        return self.looks[-1].at - self.looks[0].at if self.looks else 0.0

    def explain(self) -> str:
        """Why the wait ended, in figures (for refusals and warnings)."""
        first, last = self.looks[0], self.looks[-1]
        if self.verdict == SETTLED:
            return f"settled after {self.waited:.1f} s (was {first.shown:,} pending)"
        trend = f"{last.shown:,} still pending after {self.waited:.0f} s (was {first.shown:,})"
        if self.verdict == BOUND:
            return (f"{trend}: the wait reached the mirror's transaction timeout "
                    f"({self.bound_seconds:.0f} s), by which the broker aborts an abandoned transaction")
        return f"{trend}, and none settled in the last {self.stuck_seconds:.0f} s"


def progress_line(what: str, looks: Sequence[Look]) -> str:
    """"progress of 3,750 partitions still settling (was 4,469 12 s ago): ..." for a log line."""
    first, last = looks[0], looks[-1]
    return (f"{what} of {last.shown:,} partitions still settling (was {first.shown:,} "
            f"{last.at - first.at:.0f} s ago): the last run's commit markers are being written")


# A waiting reader says how far it got this often (at WARNING, the CLI's default level: the operator
# of a command that waits half a minute sees why, and that it moves).
LOG_EVERY_SECONDS = 5.0


def reporter(say: Callable[[str], None], what: str, every: float = LOG_EVERY_SECONDS) -> Callable[[list[Look]], None]:
    """An ``on_wait`` for :func:`wait` that says :func:`progress_line` at most every ``every`` seconds."""
    said: list[float] = []     # when it last said something

    def on_wait(looks: list[Look]) -> None:
        if looks[-1].at - (said[-1] if said else looks[0].at) >= every:
            said.append(looks[-1].at)
            say(progress_line(what, looks))
    return on_wait


def wait(probe: Callable[[float], int | tuple[int, int]], stuck_seconds: float, bound_seconds: float,
         on_wait: Callable[[list[Look]], None] | None = None, pause: float = 0.5,
         clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> Outcome:
    """Ask ``probe(round_seconds)`` (the pending count now, or (count, partitions); it may block up to
    round_seconds) until :func:`decide` says anything but WAIT. ``on_wait`` sees the looks after each
    WAIT (to log)."""
    round_seconds = max(0.5, min(3.0, stuck_seconds / 3))
    looks: list[Look] = []
    while True:
        started = clock()
        answer = probe(round_seconds)
        pending, partitions = answer if isinstance(answer, tuple) else (answer, None)
        looks.append(Look(clock(), pending, partitions))
        verdict = decide(looks, stuck_seconds, bound_seconds)
        if verdict != WAIT:
            return Outcome(verdict, looks, stuck_seconds, bound_seconds)
        if on_wait is not None:
            on_wait(looks)
        sleep(max(0.0, pause - (clock() - started)))
