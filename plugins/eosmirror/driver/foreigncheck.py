"""The foreign-write check of a mirror's target partitions, before its slots start (core/foreign.py).

Used by a run's planner (it refuses the run before any slot copies), the lag reports (FOREIGN) and
`promote` (foreign records beside the loss report). Cost when nothing is foreign: ONE batched ListOffsets
of the target's high watermarks (the accounting comes with the progress the caller read anyway);
only partitions whose end lies beyond their accounting cost a read_committed ListOffsets and a read
of [read_from, last stable offset) by one consumer.

It never calls the mirror's own records foreign, even while a follow run of the previous run still
commits (the planner reads while it copies): a data record found beyond the accounting is foreign
only if the progress, read again with require_stable AFTER the record was read, still does not
account for it. A commit of the mirror that made the record visible had its progress pending (the
stable read waits for it) or written before, so the read accounts for every record of the mirror
that was visible before it. What the planner cannot judge (progress still pending, a transaction
open, no accounting) the slot judges exactly after fencing (slot/targetcheck.py).
"""

from __future__ import annotations

import logging
import time
from typing import Mapping

from eosmirror.core import foreign, naming
from eosmirror.core.config import MirrorConfig
from eosmirror.core.errors import ProgressUnavailableError
from eosmirror.kafka import offsets, progress, readers, transactions
from eosmirror.kafka.cluster import Cluster
from eosmirror.kafka.progress import Progress

log = logging.getLogger(__name__)

TP = tuple[str, int]
STABLE_READ_SECONDS = 10.0   # the re-read of the suspects' progress waits at most this for a pending commit


def check(target: Cluster, group: str, partitions: list[TP],
          accounting: Mapping[TP, foreign.Accounting | None] | None = None,
          client_id: str = "eosmirror-target-check") -> foreign.Check:
    """Judge ``partitions`` (core/foreign.py) from the accounting of their progress (``accounting``: as the
    caller read it with the progress; None: read here, stable: the mirror is fenced, as in `promote`)."""
    from confluent_kafka.admin import OffsetSpec

    started = time.monotonic()
    if accounting is None:
        accounting = of_progress(progress.read(target, partitions, group, stable=True))
    accounting = {tp: accounting.get(tp) for tp in partitions}
    outcome = foreign.Check()
    accounted = [tp for tp, acc in accounting.items() if acc is not None]
    outcome.not_judged[foreign.UNACCOUNTED] = len(partitions) - len(accounted)
    highs = offsets.list_offsets_of(target, dict.fromkeys(accounted, OffsetSpec.latest()), read_committed=False)
    judged = {tp: foreign.judge(accounting[tp], highs[tp]) for tp in accounted}
    outcome.not_judged[foreign.BEHIND] = sum(1 for j in judged.values() if j == foreign.BEHIND)
    suspects = [tp for tp, j in judged.items() if j == foreign.SUSPECT]
    outcome.checked = sum(1 for j in judged.values() if j == foreign.CLEAN)
    if suspects:
        stables = offsets.list_offsets_of(target, dict.fromkeys(suspects, OffsetSpec.latest()), read_committed=True)
        outcome.not_judged["with an open transaction"] = sum(1 for tp in suspects if stables[tp] < highs[tp])
        ranges = foreign.ranges_to_read({tp: accounting[tp] for tp in suspects}, highs, stables)
        reads = readers.data_offsets(target, ranges, client_id, group_id=group)
        outcome.read, outcome.checked = len(ranges), outcome.checked + len(ranges)
        with_data = {tp: found for tp, found in reads.items() if found[1]}
        if with_data:
            try:
                now = progress.read(target, list(with_data), group, stable=True, timeout=STABLE_READ_SECONDS)
            except ProgressUnavailableError:   # a commit of the mirror still pending: the slots judge it
                outcome.not_judged["with a progress commit pending"] = len(with_data)
                outcome.checked -= len(with_data)
            else:
                outcome.foreign = foreign.found(with_data, highs, {tp: now[tp].accounting if tp in now
                                                                   else accounting[tp] for tp in with_data})
    outcome.seconds = time.monotonic() - started
    return outcome


def of_progress(committed: Mapping[TP, Progress]) -> dict[TP, foreign.Accounting | None]:
    return {tp: found.accounting for tp, found in committed.items()}


def own_transactional_ids(mirror: MirrorConfig) -> list[str]:
    """The slot ids of the mirror's configured slot count (their producer ids mark the mirror's own)."""
    return naming.slot_transactional_ids(mirror.transactional_id_prefix, mirror.name, mirror.slots)


def named(target: Cluster, mirror: MirrorConfig, outcome: foreign.Check) -> foreign.Check:
    """``outcome`` with the producers on its foreign partitions named (DescribeProducers), and what is left out."""
    if outcome.foreign:
        outcome.foreign, outcome.producers_note = transactions.name_producers(
            target.settings, outcome.foreign, own_transactional_ids(mirror))
    return outcome


def refuse_or_accept(target: Cluster, mirror: MirrorConfig, outcome: foreign.Check, accept: bool) -> None:
    """A run's verdict on ``outcome``: ForeignWriteError naming what was found, or (``accept``: the
    operator accepted the records) a warning; the slots then move their accounting past them."""
    if not outcome.foreign:
        return
    named(target, mirror, outcome)
    if not accept:
        raise foreign.refusal(target.label, f"mirror {mirror.name}", outcome.foreign, outcome.producers_note,
                              target.first_bootstrap)
    for record in outcome.foreign:
        log.warning("mirror %s: %s (accepted with --accept-foreign: the mirror copies on after them)", mirror.name,
                    record.line())
