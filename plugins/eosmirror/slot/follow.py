"""Follow runs: what a slot does after its bounded ranges are complete, when its task says it may
follow (``SlotTask.follow_until``, a wall-clock bound set by the driver: only scheduled runs of the
latest interval, or ``eosmirror run --follow-seconds``).

Each follow round (copier.py ``_follow``): read the source's last stable offsets of the slot's
partitions in ONE request, move every range's end up to them (``extend_ends``), run transactions
until the new ends are reached - each transaction still commits the progress of every partition
and the offset syncs, exactly as a bounded run does - then wait out the rest of
``max_transaction_seconds`` (``pause_seconds``). A round with nothing new still commits one
progress-only transaction: that is how an idle follower learns that it was fenced.

How a follow run ends (``stop_reason`` and the copier's fencing rule):
  handed-over   the next run's slot of the SAME generation fenced this transactional id: the
                normal end. The broker aborted our open transaction; the next run starts at the
                committed progress, so nothing is copied twice or skipped.
  follow-bound  the wall-clock bound passed without a hand-over (a missed next run): the run
                still ends, committed and ok.
  byte-budget   the run's ``max_bytes_per_slot`` is spent.
Fenced by a NEWER generation (the slots were re-planned) stays "fenced", as in a bounded run.
"""

from __future__ import annotations

import time
from typing import Any, Iterable

from eosmirror.slot import lifeline
from eosmirror.slot.classify import is_fenced
from eosmirror.slot.slotstate import PartitionCopy, SlotTask

HANDED_OVER = "handed-over"
FOLLOW_BOUND = "follow-bound"
BYTE_BUDGET = "byte-budget"
PAUSE_STEP = 0.1   # seconds between lifeline checks while a round waits


def stop_reason(now: float, follow_until: float, bytes_copied: int, max_bytes: int | None) -> str | None:
    """Why following stops before the next round (None: follow on). ``now``/``follow_until``: epoch s."""
    if now >= follow_until:
        return FOLLOW_BOUND
    if max_bytes is not None and bytes_copied >= max_bytes:
        return BYTE_BUDGET
    return None


def extend_ends(states: Iterable[PartitionCopy], stable: dict[tuple[str, int], int]) -> bool:
    """Move each range's end up to the source's last stable offset (never down: an end is where
    progress may go, and progress never moves backwards). True if any partition has new work."""
    grown = False
    for s in states:
        lso = stable.get((s.task.source_topic, s.task.partition))
        if lso is not None and lso > s.end:
            s.end = lso
            s.done = s.committed >= s.end
            grown = grown or not s.done
    return grown


def pause_seconds(round_started: float, now: float, max_transaction_seconds: float,
                  wall_now: float, follow_until: float) -> float:
    """How long to wait before the next round: the rest of ``max_transaction_seconds`` since this
    round started (monotonic clock), never past the follow bound (wall clock)."""
    return max(0.0, min(round_started + max_transaction_seconds - now, follow_until - wall_now))


def pause(seconds: float) -> None:
    """Sleep, in short steps that notice a cut lifeline (the run's JVM is gone: exit, start nothing)."""
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        lifeline.check()
        time.sleep(min(PAUSE_STEP, left))


def is_hand_over(task: SlotTask, io: Any, exactly_once: bool) -> bool:
    """Fenced in a follow run: by the next run of the same generation that is the normal end
    ("handed-over") - also before this run's bound was reached, since the next run's bound is later
    and it starts at the committed progress; by a newer generation (re-planned slots) it stays
    "fenced" (False)."""
    if task.follow_until is None or not exactly_once:
        return False
    try:
        io.check_generation()
    except Exception:  # noqa: BLE001 - a newer generation, or unknown: stay "fenced"
        return False
    return True


def fenced_while_flushing(task: SlotTask, producer: Any, exactly_once: bool) -> bool:
    """A follow run's producer fenced while flushing surfaces as whatever flush() raised (seen: a
    SystemError from a delivery callback); the producer's own answer to an abort says if it was fenced."""
    if task.follow_until is None or not exactly_once or producer is None:
        return False
    try:
        producer.abort_transaction(10)
    except Exception as exc:  # noqa: BLE001 - only the fenced answer matters here
        return is_fenced(exc)
    return False
