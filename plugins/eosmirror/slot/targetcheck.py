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
"""

from __future__ import annotations

import logging
import time
from typing import Iterable

from eosmirror.core.errors import TargetMismatchError
from eosmirror.slot.slotio import SlotIO

log = logging.getLogger(__name__)

# How long a slot waits for another producer's transaction on its target partitions to end.
SETTLE_SECONDS = 15.0
POLL_SECONDS = 0.5
MAX_NAMED = 5


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
                settle_seconds: float = SETTLE_SECONDS) -> None:
    """Return once no target partition holds an open transaction; else raise ``refusal`` after ``settle_seconds``.
    Reads the last stable offsets first, then the ends (an end read later is never below them)."""
    keys = list(partitions)
    started = time.monotonic()
    shown = -1
    while True:
        stable = io.target_stable_offsets(keys)
        ends = io.target_end_offsets(keys)
        open_ = unclosed(stable, ends)
        if not open_:
            return
        waited = time.monotonic() - started
        if waited >= settle_seconds:
            raise refusal(target_label, open_, waited)   # the slot's report names the slot
        if len(open_) != shown:
            log.info("slot %d: %d target partition(s) hold an open transaction (e.g. %s); waiting up to %.0f s for "
                     "it to end before writing", slot, len(open_), next(iter(sorted(open_))), settle_seconds)
            shown = len(open_)
        time.sleep(POLL_SECONDS)
