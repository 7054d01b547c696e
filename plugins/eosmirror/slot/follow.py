"""Follow runs: what a slot does after its bounded ranges are complete, when its task says it may
follow (``SlotTask.follow_until``, a wall-clock bound set by the driver: only scheduled runs of the
latest interval, or ``eosmirror run --follow-seconds``).

Following is a stream of transactions (copier.py ``_follow``): the ranges' ends are opened
(``open_ends``), the source consumer reads on from the committed progress without pausing, and
each transaction copies what arrives for ``max_transaction_seconds`` and commits it, with the
progress of every partition and the offset syncs, exactly as a bounded run's transaction does (a
slot with ``max_partitions_per_transaction`` chunks sends the progress of the partitions that moved
and of one chunk of the others in rotation: copier.py ``_progress_covered``). A
transaction with nothing new still commits the progress alone: that is how an idle follower learns
that it was fenced. read_committed is what keeps a follower below the source's last stable offset,
so no end is needed. (Rounds of "ask the last stable offsets, seek there, copy up to them, wait out
the period" paid a fetch round trip and the wait in every transaction: time lag p50 0.59 s at 0.5 s.)
Every SOURCE_CHECK_SECONDS the follower still asks the source's last stable offsets: an unreachable
source fails loudly, and a caught-up follower counts as active for the record loop's stall check.

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

import logging
from typing import Any, Iterable

from eosmirror.core.runreport import FollowEnd
from eosmirror.slot.classify import is_fenced
from eosmirror.slot.slotstate import PartitionCopy, SlotTask, steps_text

log = logging.getLogger(__name__)

# A range end no offset reaches: a follow transaction ends at its deadline, never at an end.
OPEN_END = 2**63 - 1
# A follow transaction slower than this many max_transaction_seconds (+ 0.5 s) is logged with its steps.
SLOW_FACTOR = 2
TRANSACTION_STEPS = ("copy", "flush", "target ends", "offset syncs", "send progress", "commit")
# A follower logs this many first transactions with their distance from its fence: the hand-over's
# gap (the previous run's last commit was just before that fence) is what they show.
FIRST_TRANSACTIONS_LOGGED = 3
# How often a follower asks the source's last stable offsets (liveness, and "caught up").
SOURCE_CHECK_SECONDS = 5.0


def stop_reason(now: float, follow_until: float, bytes_copied: int, max_bytes: int | None) -> FollowEnd | None:
    """Why following stops before the next round (None: follow on). ``now``/``follow_until``: epoch s."""
    if now >= follow_until:
        return FollowEnd.FOLLOW_BOUND
    if max_bytes is not None and bytes_copied >= max_bytes:
        return FollowEnd.BYTE_BUDGET
    return None


def open_ends(states: Iterable[PartitionCopy]) -> None:
    """Let every range run on: each transaction copies up to its deadline, whatever arrived."""
    for s in states:
        s.end = OPEN_END
        s.done = False


def close_ends(states: Iterable[PartitionCopy]) -> None:
    """Following ended: each range ends where its committed progress is (the run's report says
    complete; never below the bounded end it reached first: progress never moves backwards)."""
    for s in states:
        s.end = max(s.task.end, s.committed)
        s.done = s.committed >= s.end


def caught_up(states: Iterable[PartitionCopy], stable: dict[tuple[str, int], int]) -> bool:
    """Every partition has reached the source's last stable offset (nothing is waiting to be read)."""
    return all(s.reached >= stable.get((s.task.source_topic, s.task.partition), 0) for s in states)


def warn_if_slow(task: SlotTask, marks: list[float]) -> None:
    """A follower's transaction is its recovery point: say where a slow one spent its time
    (``marks``: the monotonic times that start and end each of TRANSACTION_STEPS)."""
    took = marks[-1] - marks[0]
    if took > SLOW_FACTOR * task.max_transaction_seconds + 0.5:
        log.warning("slot %d: a follow transaction took %.2f s (%s)", task.slot, took,
                    steps_text(TRANSACTION_STEPS, marks))


def log_following(task: SlotTask, fenced_at: float, marks: list[float]) -> None:
    """Following started (``marks``: start, assigned, the source's stable offsets read)."""
    log.info("slot %d: following %.2f s after the fence (%s)", task.slot, marks[-1] - fenced_at,
             steps_text(("assign", "source's stable offsets"), marks))


def log_first(task: SlotTask, transactions: int, fenced_at: float, marks: list[float]) -> None:
    """One of a follower's first transactions committed: how long after its fence (the hand-over's gap),
    and its steps."""
    if marks:
        log.info("slot %d: transaction %d committed %.2f s after the fence (%s)", task.slot, transactions,
                 marks[-1] - fenced_at, steps_text(TRANSACTION_STEPS, marks))


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
