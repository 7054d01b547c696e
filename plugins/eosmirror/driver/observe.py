"""Gather what planning needs (docs/architecture.md "How a run works", driver step 2): source offsets, committed
progress, recovered progress.

The only module that turns broker answers into ``PartitionObservation`` values; it also fails loudly
when the progress belongs to another incarnation of a topic (re-created source or target topic).

``start_from`` applies only to a topic's FIRST mirroring. Whether the mirror copied a topic before
is read from what the copy itself commits (``mirrored_topics``), not from a separate record: see
there why that evidence is sufficient and never lost.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from eosmirror.core import naming, settle
from eosmirror.core.config import MirrorConfig
from eosmirror.core.errors import ConfigError, DataLossError, ProgressUnavailableError
from eosmirror.core.offsetsync import PartitionSyncs
from eosmirror.core.planning import PartitionObservation
from eosmirror.driver.topics import TopicPair
from eosmirror.kafka import progress, state, syncstore, transactions
from eosmirror.kafka.cluster import Cluster
from eosmirror.kafka.offsets import list_offsets_of

log = logging.getLogger(__name__)


def _ms(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1000)


def mirrored_topics(pairs: list[TopicPair], committed: dict[tuple[str, int], Any],
                    syncs: dict[tuple[str, int], PartitionSyncs]) -> set[str]:
    """Target topics the mirror copied before: some partition has committed progress in the mirror's
    group or an offset sync in the mirror's offset-sync topic.

    Why this evidence and not a separate "first mirrored" record in the state topic:
    * every copy transaction that moves a partition's progress also writes that partition's offset
      sync, atomically, and a partition's first commit always writes one (even with no record), so
      "the mirror ever committed anything for this topic" <=> "an offset sync of the topic exists";
    * the offset-sync topic is kept forever (``retention.ms=-1``), so the evidence survives the
      expiry of the member-less group's offsets, and each partition's newest sync is also kept in
      the compacted snapshot topic; committed progress is only the cheap first look (the newest
      syncs are read whenever some partition has no progress, which a new partition implies);
    * it needs no extra write in the planner (plans and dry runs write nothing) and it also covers
      topics mirrored before this rule existed.
    Consequence to know: a topic's first run that committed some partitions and failed before the
    first commit of others leaves those others looking like partitions added later, so they start
    at offset 0 instead of ``start_from`` (more is copied than ``latest`` asked for, never less).
    """
    seen = {topic for topic, _ in committed} | {topic for topic, _ in syncs}
    return {pair.target for pair in pairs if pair.target in seen}


def _start_from(mirror: MirrorConfig, source: Cluster, source_tps: list[tuple[str, int]],
                earliest: dict[tuple[str, int], int], stable: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """``start_from`` resolved per partition (used only for topics the mirror never copied)."""
    from confluent_kafka.admin import OffsetSpec

    if isinstance(mirror.start_from, dt.datetime):
        at_time = list_offsets_of(source, {tp: OffsetSpec.for_timestamp(_ms(mirror.start_from)) for tp in source_tps})
        return {tp: (off if off >= 0 else stable[tp]) for tp, off in at_time.items()}
    if mirror.start_from == "latest":
        return dict(stable)
    return dict(earliest)


def _recover(pair: TopicPair, p: int, history: PartitionSyncs, target_topic_ids: dict[str, str], where: str) -> int:
    """The exact position the offset syncs give back when the committed progress expired."""
    last = history.ordered()[-1]
    if last.source_topic_id and last.source_topic_id != pair.source_topic_id:
        raise DataLossError(f"{where}: the source topic was re-created since the mirror last copied it "
                            f"(topic id {last.source_topic_id} -> {pair.source_topic_id})")
    target_id = target_topic_ids.get(pair.target, "")
    if last.target_topic_id and target_id and last.target_topic_id != target_id:
        raise ProgressUnavailableError(
            f"{where}: the target topic was deleted and re-created (topic id {last.target_topic_id} -> "
            f"{target_id}): the records the mirror copied are gone from the target. Delete the "
            f"mirror's offset-sync history for it (or mirror into a fresh topic) to copy again")
    recovered = history.progress
    assert recovered is not None   # the chain is not empty: its last sync was just read
    log.warning("%s: committed progress is gone (expired after offsets.retention.minutes?); "
                "recovered the exact position %d from the offset syncs", where, recovered)
    return recovered


# How long the planner waits without seeing any pending first progress settle (see progress.read_settled
# and core/settle.py). Markers normally land within milliseconds of a slot's commit; on a loaded broker
# writing the markers of thousands of partitions, the pending set keeps shrinking for tens of seconds,
# and the wait goes on while it does (bounded by the mirror's transaction timeout). Nothing settling
# for this long means an open transaction: a running or killed slot.
# EOSMIRROR_PROGRESS_SETTLE_SECONDS sets it (a cluster whose markers take longer; tests that need a
# shorter window): every reader asks progress_settle_seconds(), so one setting reaches them all.
PROGRESS_SETTLE_SECONDS = 15.0
SETTLE_ENV = "EOSMIRROR_PROGRESS_SETTLE_SECONDS"


def progress_settle_seconds() -> float:
    """The settle window: EOSMIRROR_PROGRESS_SETTLE_SECONDS when set (a positive number), else 15 s."""
    raw = os.environ.get(SETTLE_ENV)
    if not raw:
        return PROGRESS_SETTLE_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise ConfigError(f"{SETTLE_ENV}={raw!r}: a number of seconds above 0 (default {PROGRESS_SETTLE_SECONDS:g})")
    return value


def settle_bound_seconds(mirror: MirrorConfig) -> float:
    """The longest any settle wait of this mirror lasts: its transaction timeout, after which the
    broker has aborted any transaction of the mirror that was left open."""
    return max(progress_settle_seconds(), mirror.transaction_timeout_ms / 1000)


def holders(mirror: MirrorConfig, target: Cluster) -> str:
    """The mirror's transactional ids that can hold its progress group's transaction, with their
    state where a describer is available (kafka/transactions.py): for a refusal only."""
    try:
        current = state.read_generation(target, mirror.name, mirror.progress_group)
    except Exception as exc:  # noqa: BLE001 - the refusal must still be said
        log.debug("the generation could not be read for the refusal: %s", exc)
        current = None
    slots = max(mirror.slots, current.max_slots if current else 0)
    ids = naming.slot_transactional_ids(mirror.transactional_id_prefix, mirror.name, slots)
    ids.append(naming.planner_transactional_id(mirror.transactional_id_prefix, mirror.name))
    states, why = transactions.describe(target.settings, ids)
    if not states:
        return f"{', '.join(ids)} (their state was not described: {why})"
    busy = [i for i in ids if states.get(i, "").split(",")[0] in ("Ongoing", "PrepareCommit", "PrepareAbort")]
    named = [f"{i} ({states.get(i, 'not described')})" for i in busy + [i for i in ids if i not in busy]]
    return "; ".join(named)


def _refuse_unsettled(mirror: MirrorConfig, unsettled: set[tuple[str, int]], mirrored: set[str],
                      target: Cluster, outcome: settle.Outcome | None = None) -> None:
    """Partitions whose answer stayed "pending" are never planned as having no progress.

    In a topic the mirror already copies, "no progress" means "new partition, copy from offset 0":
    planning that from a pending answer would show (and, without the slots' re-read after fencing,
    copy) records the mirror already copied, so the plan stops with what to do. It stops only once
    the wait found a transaction really open (nothing settled for PROGRESS_SETTLE_SECONDS, or the
    transaction timeout reached), never while the previous run's markers are still being written,
    and it names the transactional ids that can hold it before it says "fence". In a topic's first
    mirroring the fallback is ``start_from`` and the slots' re-read after fencing decides the real
    start; refusing there would leave a run killed in its first commit unrecoverable by the next run
    until the broker times its transaction out, so the plan goes on and says so once.
    """
    if not unsettled:
        return
    refused = sorted(tp for tp in unsettled if tp[0] in mirrored)
    example = ", ".join(f"{t}[{p}]" for t, p in (refused or sorted(unsettled))[:3])
    how = outcome.explain() if outcome is not None and outcome.looks else f"not stable after {progress_settle_seconds():.0f} s"
    if refused:
        raise ProgressUnavailableError(
            f"{target.label}: {len(refused)} partition(s) of topics the mirror already copies show no progress "
            f"(e.g. {example}), and that answer is not stable ({how}): a transaction of the mirror holding "
            f"progress of the group is still open (a slot of a running run, or a killed one). Their start is "
            f"unknown, not offset 0. The transactional ids that can hold it: {holders(mirror, target)}. Wait "
            f"for that run to end (the broker aborts an abandoned transaction after "
            f"{mirror.transaction_timeout_ms // 1000} s) or run `eosmirror fence {mirror.name}`, then plan again")
    log.warning("%s: the first progress of %d partition(s) of topics mirrored for the first time (e.g. %s) is not "
                "stable (%s; an open transaction of the mirror: a running or killed slot); they are "
                "planned from start_from, and the slots start from whatever that transaction left, read after "
                "fencing", target.label, len(unsettled), example, how)


def progress_beyond(stable: dict[tuple[str, int], int], committed: dict[tuple[str, int], Any],
                    pairs: list[TopicPair]) -> bool:
    """Some partition's progress (by target partition) is beyond its source's last stable offset as read."""
    return any(done.offset > stable.get((pair.source, p), done.offset)
               for pair in pairs for p in range(pair.partitions)
               if (done := committed.get((pair.target, p))) is not None)


def observe(mirror: MirrorConfig, pairs: list[TopicPair], source: Cluster, target: Cluster,
            target_topic_ids: dict[str, str], until: dt.datetime | None = None) -> list[PartitionObservation]:
    from confluent_kafka.admin import OffsetSpec

    source_tps = [(pair.source, p) for pair in pairs for p in range(pair.partitions)]
    specs = {"earliest": OffsetSpec.earliest(), "stable": OffsetSpec.latest()}
    if until is not None:
        specs["until"] = OffsetSpec.for_timestamp(_ms(until))
    # The source's offsets and the progress at once: each read waits on brokers most of its time.
    with ThreadPoolExecutor(max_workers=len(specs)) as pool:
        asked = {name: pool.submit(list_offsets_of, source, dict.fromkeys(source_tps, spec))
                 for name, spec in specs.items()}
        committed, unsettled, outcome = progress.read_settled(
            target, [(pair.target, p) for pair in pairs for p in range(pair.partitions)], mirror.progress_group,
            settle_seconds=progress_settle_seconds(), bound_seconds=settle_bound_seconds(mirror))
        earliest, stable = asked["earliest"].result(), asked["stable"].result()
        until_offsets = asked["until"].result() if "until" in asked else {}
    if progress_beyond(stable, committed, pairs):
        # A follow run of this mirror committed on after the last stable offsets were read (they are
        # read beside the progress): read them again, now after the progress. A last stable offset
        # never moves backwards, so read later it is at or beyond any progress a follower reached.
        stable = list_offsets_of(source, dict.fromkeys(source_tps, specs["stable"]))
    start_from = _start_from(mirror, source, source_tps, earliest, stable)

    missing = [(pair, p) for pair in pairs for p in range(pair.partitions) if (pair.target, p) not in committed]
    # Only each partition's newest sync matters here: the snapshot plus the syncs after its marker.
    newest = syncstore.latest(target, mirror.name, mirror.progress_group).newest if missing else {}
    syncs = {tp: PartitionSyncs([sync]) for tp, sync in newest.items()}
    mirrored = mirrored_topics(pairs, committed, syncs)
    _refuse_unsettled(mirror, unsettled - set(syncs), mirrored, target, outcome)

    observations = []
    for pair in pairs:
        for p in range(pair.partitions):
            where = f"source {pair.source}[{p}] -> target {pair.target}[{p}]"
            done = committed.get((pair.target, p))
            if done is not None and done.source_topic_id and done.source_topic_id != pair.source_topic_id:
                raise DataLossError(
                    f"{where}: the source topic was deleted and re-created (topic id {done.source_topic_id} -> "
                    f"{pair.source_topic_id}); the mirror's progress {done.offset} belongs to the old topic. "
                    f"Decide what the target should hold, then reset the mirror's progress for this topic")
            recovered = None
            if done is None and (pair.target, p) in syncs:
                recovered = _recover(pair, p, syncs[(pair.target, p)], target_topic_ids, where)
            elif done is None and pair.target in mirrored:
                log.warning("%s: partition %d is new to a topic the mirror already copies: it is copied from its "
                            "first offset, not from start_from", where, p)
            observations.append(PartitionObservation(
                source_topic=pair.source, target_topic=pair.target, partition=p,
                log_start=earliest[(pair.source, p)], last_stable=stable[(pair.source, p)],
                start_from_offset=start_from[(pair.source, p)],
                progress=done.offset if done else None, recovered=recovered,
                until_offset=until_offsets.get((pair.source, p)), topic_mirrored=pair.target in mirrored,
                accounting=done.accounting if done else None))
    return observations
