"""Step 3b (exactly_once): the slot's target partitions hold no open transaction before it writes.

Why: after step 1 (``init_transactions``) no transaction of this slot's transactional id is open: the
coordinator finished any it had, writing its markers, before it answered. A target partition whose
last stable offset is still below its end therefore holds a transaction the broker never closed, or
another producer's. The first is the dangerous one. Kafka's transaction coordinator skips a marker for
a partition that has no leader at that moment ("Couldn't find leader endpoint ... likely deleted
already and hence can be skipped"), as when a target broker restarts hard and aborts a timed-out
transaction of a slot before its partitions have their leader back. The aborted records then stay
open in that partition under this slot's producer id, and the slot's next commit there (same producer
id, newer epoch) would commit them too: records copied twice. So a slot never writes on top of an
open transaction: it waits a little (another producer's transaction may commit), then fails loudly,
naming the partitions and how to abort what hangs, having written nothing. (The chaos round that
found it: a6793d6 and docs/results.md, "Incidents behind the code".)

The offset-sync topic's partition is shared by the mirror's slots (another slot's open transaction is
normal there) and is not checked.

Step 3c (exactly_once): once every target partition is closed, none holds a committed record the mirror
did not write (``check_foreign``; the rule: core/foreign.py). The progress read after fencing carries
what the mirror accounts for on each partition; a partition whose end lies beyond it is read
read_committed from where the mirror's copies end, and any data record there is a foreign write: the
slot refuses (ForeignWriteError) before it writes anything. Only markers and aborted records there (a
killed attempt of this slot, aborted by the fence) are not foreign; the accounting moves past them.
"""

from __future__ import annotations

import logging
import time
from typing import Iterable

from eosmirror.core import foreign
from eosmirror.core.errors import TargetMismatchError
from eosmirror.slot.slotio import SlotIO
from eosmirror.slot.slotstate import PartitionCopy

log = logging.getLogger(__name__)

# How long a slot waits for another producer's transaction on its target partitions to end.
SETTLE_SECONDS = 15.0
POLL_SECONDS = 0.5
MAX_NAMED = 5
# An executor has neither Kafka's tools nor their jars: the planner's check names the producers (it refuses
# the same records before the slots start), the slot only when they landed after that check.
SLOT_PRODUCERS_NOTE = ("not described by the slot, which found them after the run's own check; the next run's "
                       "check names them, or `kafka-transactions.sh describe-producers`")


def unclosed(stable: dict[tuple[str, int], int], ends: dict[tuple[str, int], int]) -> dict[tuple[str, int], tuple[int, int]]:
    """{partition: (last stable offset, end)} of the partitions whose last stable offset is below the end."""
    return {tp: (stable[tp], end) for tp, end in ends.items() if tp in stable and 0 <= stable[tp] < end}


def refusal(target_label: str, open_: dict[tuple[str, int], tuple[int, int]], waited: float) -> TargetMismatchError:
    named = sorted(open_.items())[:MAX_NAMED]
    where = ", ".join(f"{t}[{p}] last stable offset {lso} < end {end}" for (t, p), (lso, end) in named)
    (topic, partition), (lso, _) = named[0]
    more = f" and {len(open_) - MAX_NAMED} more" if len(open_) > MAX_NAMED else ""
    return TargetMismatchError(
        f"{target_label}: {len(open_)} target partition(s) still hold an open transaction "
        f"{waited:.0f} s after this slot fenced its own ({where}{more}). Either the broker never closed a "
        f"transaction there (it skips a marker for a partition without a leader, e.g. right after a broker "
        f"restart: then it is this slot's own, and committing on top of it would make its aborted records "
        f"visible) or another producer writes to the mirror's target. Nothing was written. Find it with "
        f"`kafka-transactions.sh --bootstrap-server <target> find-hanging --broker-id <leader>` and abort it, "
        f"e.g. `kafka-transactions.sh --bootstrap-server <target> abort --topic {topic} --partition {partition} "
        f"--start-offset {lso}`, or stop the other producer; then run again.")


def wait_closed(io: SlotIO, slot: int, target_label: str, partitions: Iterable[tuple[str, int]],
                settle_seconds: float = SETTLE_SECONDS) -> dict[tuple[str, int], int]:
    """Return the ends once no target partition holds an open transaction; else raise ``refusal`` after
    ``settle_seconds``. Reads the last stable offsets first, then the ends (an end read later is never below them)."""
    keys = list(partitions)
    started = time.monotonic()
    shown = -1
    while True:
        stable = io.target_stable_offsets(keys)
        ends = io.target_end_offsets(keys)
        open_ = unclosed(stable, ends)
        if not open_:
            return ends
        waited = time.monotonic() - started
        if waited >= settle_seconds:
            raise refusal(target_label, open_, waited)   # the slot's report names the slot
        if len(open_) != shown:
            log.info("slot %d: %d target partition(s) hold an open transaction (e.g. %s); waiting up to %.0f s for "
                     "it to end before writing", slot, len(open_), next(iter(sorted(open_))), settle_seconds)
            shown = len(open_)
        time.sleep(POLL_SECONDS)


def check_foreign(io: SlotIO, slot: int, target_label: str, states: Iterable[PartitionCopy],
                  accept: bool = False) -> None:
    """Steps 3b and 3c: wait until the slot's target partitions are closed, then judge each against the
    accounting of its committed progress (core/foreign.py). Foreign records: ForeignWriteError naming
    them (``accept``: logged, and the accounting moves past them: an operator accepted them). Afterwards
    every partition's accounting is exact up to its end now."""
    by_key = {(s.task.target_topic, s.task.partition): s for s in states}
    ends = wait_closed(io, slot, target_label, list(by_key))
    fresh = [tp for tp, s in by_key.items() if s.accounting is None]
    if fresh:
        log.info("slot %d: %d target partition(s) (e.g. %s[%d]) have no accounting yet (first copy, or progress "
                 "written by a migration, a reset or an older eosmirror): checked from their end now on",
                 slot, len(fresh), *fresh[0])
    for tp in fresh:
        by_key[tp].accounting = foreign.Accounting.checked(ends[tp])
    behind = {tp: (s.accounting.expected_end, ends[tp]) for tp, s in by_key.items()
              if s.accounting is not None and foreign.judge(s.accounting, ends[tp]) == foreign.BEHIND}
    if behind:
        (topic, partition), (expected, end) = sorted(behind.items())[0]
        raise TargetMismatchError(
            f"{target_label}: {len(behind)} target partition(s) end below what the mirror committed there (e.g. "
            f"{topic}[{partition}] ends at {end}, the mirror's last transaction left it at {expected}): the target "
            f"lost records (an unclean leader election, a re-created topic). Nothing was written. Compare it with "
            f"`eosmirror verify` and decide what it should hold")
    ranges = foreign.ranges_to_read({tp: s.accounting for tp, s in by_key.items()}, ends, ends)
    reads = io.target_data_offsets(ranges) if ranges else {}
    found = foreign.found(reads, ends, {tp: by_key[tp].accounting for tp in reads})
    if found and not accept:
        raise foreign.refusal(target_label, f"slot {slot}", found, SLOT_PRODUCERS_NOTE)
    for record in found:
        log.warning("slot %d: %s (accepted by the operator: the mirror copies on after them)", slot, record.line())
    for tp in ranges:
        by_key[tp].accounting = foreign.Accounting.checked(ends[tp])
