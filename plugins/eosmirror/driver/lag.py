"""Lag reports: sample a mirror (the I/O), evaluate it over its recorded history, record the sample.

One function, :func:`report`, gives the figures that `eosmirror lag --json`, the `eosmirror_lag`
DAG, the "Mirror lag" page and ``/eosmirror/metrics`` all show.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Callable

from eosmirror.core import groupfailover, lag
from eosmirror.core.config import MirrorConfig, MirrorsFile, own_groups
from eosmirror.core.errors import AuthorizationError, EosMirrorError, ProgressUnavailableError
from eosmirror.core.foreign import ForeignRecords
from eosmirror.core.mirrorstate import MirrorState, Phase
from eosmirror.core.runreport import Report
from eosmirror.driver import foreigncheck, minimums, topics
from eosmirror.driver.observe import progress_settle_seconds, settle_bound_seconds
from eosmirror.kafka import groupoffsets, lagstore, progress, readers, state
from eosmirror.kafka import groups as kafka_groups
from eosmirror.kafka.cluster import Cluster
from eosmirror.kafka.offsets import list_offsets_of

log = logging.getLogger(__name__)
PARALLEL_MIRRORS = 8
# How long the groups' read waits for a pending transactional offset commit (or a moving coordinator).
GROUPS_READ_SECONDS = 30.0


def policy_of(mirror: MirrorConfig) -> lag.Policy:
    lag_interval = lag.schedule_interval_ms(mirror.lag.schedule) or 5 * 60_000
    return lag.Policy(lag_interval_ms=lag_interval, mirror_interval_ms=lag.schedule_interval_ms(mirror.airflow.schedule),
                      max_lag_seconds=mirror.max_lag_seconds)


@dataclass
class Clusters:
    source: Cluster
    target: Cluster

    @classmethod
    def of(cls, mirror: MirrorConfig) -> "Clusters":
        return cls(Cluster.resolve("source", mirror.source, mirror.name),
                   Cluster.resolve("target", mirror.target, mirror.name))


def collect(mirror: MirrorConfig, clusters: Clusters, now_ms: int, pairs: list[Any]) -> lag.MirrorSample:
    """The mirror's partitions now: source offsets, committed progress, the oldest pending record's time."""
    from confluent_kafka.admin import OffsetSpec

    source, target = clusters.source, clusters.target
    keys = [(pair.source, p) for pair in pairs for p in range(pair.partitions)]
    target_of = {pair.source: pair.target for pair in pairs}
    # The four reads at once: each waits on brokers most of its time.
    with ThreadPoolExecutor(max_workers=4) as pool:
        asked = [pool.submit(list_offsets_of, source, {k: OffsetSpec.earliest() for k in keys}),
                 pool.submit(list_offsets_of, source, {k: OffsetSpec.latest() for k in keys}, read_committed=False),
                 pool.submit(list_offsets_of, source, {k: OffsetSpec.latest() for k in keys})]
        # The planner's read (progress.read_settled): a plain read answers "no offset" while a partition's
        # first progress commit is pending, and the partition would count from its log start.
        # It waits while the last run's markers are being written (core/settle.py), as the planner does.
        committed, unsettled, outcome = progress.read_settled(target, [(target_of[t], p) for t, p in keys],
                                                              mirror.progress_group,
                                                              settle_seconds=progress_settle_seconds(),
                                                              bound_seconds=settle_bound_seconds(mirror))
        starts, highs, stables = (future.result() for future in asked)
    if unsettled:   # an open transaction holds their first progress: nothing is committed for them yet
        example = ", ".join(f"{t}[{p}]" for t, p in sorted(unsettled)[:3])
        log.warning("mirror %s: the first progress of %d partition(s) (e.g. %s) is held by a transaction still open "
                    "(%s); they count from their log start", mirror.name, len(unsettled), example,
                    outcome.explain() if outcome is not None and outcome.looks else "not stable")
    done = {k: found for k in keys if (found := committed.get((target_of[k[0]], k[1]))) is not None}
    foreign = foreign_records(mirror, target, [(target_of[t], p) for t, p in keys], committed)
    ranges = {k: (max(done[k].offset if k in done else starts[k], starts[k]), stables[k]) for k in keys}
    oldest = readers.first_timestamps(source, ranges, f"eosmirror-{mirror.name}-lag",
                                      group_id=mirror.progress_group)
    parts = tuple(lag.PartitionSample(
        source_topic=t, partition=p, high_watermark=highs[(t, p)], last_stable=stables[(t, p)],
        progress=done[(t, p)].offset if (t, p) in done else None, log_start=max(0, starts[(t, p)]),
        oldest_pending_ms=oldest.get((t, p)),
        last_commit_ms=(done[(t, p)].committed_ms or None) if (t, p) in done else None,
        foreign=len(f.offsets) if (f := foreign.get((target_of[t], p))) else 0,
        foreign_at=f.offsets[0] if f else None) for t, p in keys)
    return lag.MirrorSample(mirror=mirror.name, time_ms=now_ms, partitions=parts)


def foreign_records(mirror: MirrorConfig, target: Cluster, partitions: list[tuple[str, int]],
                    committed: dict[tuple[str, int], Any]) -> dict[tuple[str, int], ForeignRecords]:
    """The target partitions holding records the mirror did not write (driver/foreigncheck.py: one batched
    ListOffsets when none does); exactly_once only (at_least_once commits no accounting)."""
    if mirror.delivery != "exactly_once":
        return {}
    outcome = foreigncheck.check(target, mirror.progress_group, partitions, foreigncheck.of_progress(committed),
                                 client_id=f"eosmirror-{mirror.name}-lag-target-check")
    return {(r.topic, r.partition): r for r in outcome.foreign}


def collect_groups(mirror: MirrorConfig, target: Cluster, pairs: list[Any],
                   read_seconds: float = GROUPS_READ_SECONDS) -> tuple[tuple[lag.GroupLag, ...], str | None]:
    """The lag of the consumer groups the mirror's groups section selects, on the target (where a
    failover put them): target last stable offset - committed, per group and mirrored partition it
    holds. A mirror without a groups section has none. A failure to read them (say, no Describe ACL
    on the groups) is returned as the reason, so the mirror's own figures are still reported.

    Each group's offsets are read on the partitions it holds (kafka/groupoffsets.py, require_stable,
    in a child process that librdkafka's admin offset fetch may crash); only when that gives no
    answer is every group asked for every mirrored partition with a consumer, as it always was."""
    from confluent_kafka.admin import OffsetSpec

    if mirror.groups is None:
        return (), None
    mirrored = {(pair.target, p) for pair in pairs for p in range(pair.partitions)}
    try:
        selected = groupfailover.select_groups(kafka_groups.list_groups(target), mirror.groups.include,
                                           mirror.groups.exclude, never=own_groups(mirror))
        if not selected or not mirrored:
            return (), None
        with ThreadPoolExecutor(max_workers=PARALLEL_MIRRORS) as pool:
            answers = pool.submit(groupoffsets.read_all, target.settings, selected, read_seconds)
            states = kafka_groups.group_states(target, selected)
            committed = held_offsets(answers.result(), target.label, read_seconds)
            if committed is None:
                keys = sorted(mirrored)
                committed = dict(zip(selected, pool.map(lambda g: kafka_groups.committed(target, g, keys), selected)))
        held = {tp for offsets in committed.values() for tp in offsets if tp in mirrored}
        ends = list_offsets_of(target, {k: OffsetSpec.latest() for k in sorted(held)})
    except EosMirrorError as exc:
        log.warning("mirror %s: the lag of its consumer groups on the target could not be read: %s", mirror.name, exc)
        return (), f"the lag of the consumer groups on the target could not be read: {exc}"
    return lag.group_lags(committed, ends, states), None


def held_offsets(answers: groupoffsets.Answers | None, cluster_label: str,
                 read_seconds: float = GROUPS_READ_SECONDS) -> dict[str, dict[tuple[str, int], int]] | None:
    """The groups' offsets from the child's answers; None: no answer (read with consumers instead).
    A group still pending or refused fails the read, as a consumer's read of it would."""
    if answers is None:
        return None
    for group, error in sorted(answers.failed.items()):
        name = error.split(":", 1)[0]
        if "AUTHORIZATION" in name:
            raise AuthorizationError(f"{cluster_label}: not authorized to read the committed offsets of group {group} "
                                     f"({error}): the principal needs Describe on group {group} (and on its topics)")
        raise EosMirrorError(f"{cluster_label}: the committed offsets of group {group} could not be read ({error})")
    if answers.pending:
        group, error = sorted(answers.pending.items())[0]
        others = f" (and {len(answers.pending) - 1} other group(s))" if len(answers.pending) > 1 else ""
        raise ProgressUnavailableError(
            f"{cluster_label}: the committed offsets of group {group}{others} stayed unreadable ({error}) for "
            f"{read_seconds:.0f} s: a transactional producer of that group's application holds an open "
            f"transaction, or its coordinator is moving; ask again when it has committed or timed out")
    return answers.offsets


def report(mirror: MirrorConfig, now_ms: int | None = None, record: bool = False,
           clusters: Clusters | None = None, groups_read_seconds: float = GROUPS_READ_SECONDS) -> lag.MirrorStatus:
    """Sample the mirror, evaluate it over the window of recorded samples and run outcomes ending
    now, and (``record``) append the sample to the lag topic. ``now_ms`` is injectable for tests;
    ``groups_read_seconds`` bounds the wait on a group whose offset commit is pending."""
    now_ms = now_ms if now_ms is not None else lagstore.now_ms()
    clusters = clusters or Clusters.of(mirror)
    minimums.require("lag", (clusters.source, clusters.target))
    # A switched-over or promoted mirror copies no more: its state, read from the target alone (the
    # source may be gone), is what it reports, never an alert.
    current = state.read_mirror_state(clusters.target, mirror.name, mirror.progress_group)
    if current.phase is not Phase.MIRRORING:
        return by_state(mirror, current, now_ms)

    policy = policy_of(mirror)
    # Records carry real timestamps; samples carry their (possibly injected) time: read generously,
    # the evaluation keeps only the window by sample time.
    lookback = max(policy.window_ms, 3 * (policy.mirror_interval_ms or 0))
    since = min(now_ms, lagstore.now_ms()) - 2 * lookback
    # The recorded history and the groups' lag (target only) while the mirror's own figures are
    # read: each waits on brokers most of its time.
    with ThreadPoolExecutor(max_workers=2) as pool:
        history_read = pool.submit(lagstore.read_since, clusters.target, mirror.name, since, mirror.progress_group)
        pairs = topics.resolve(mirror, clusters.source)
        groups_read = pool.submit(collect_groups, mirror, clusters.target, pairs, groups_read_seconds)
        sample = collect(mirror, clusters, now_ms, pairs)
        history, runs = history_read.result()
        sample = lag.with_run_history(sample, runs)
        groups, groups_error = groups_read.result()
    status = replace(lag.evaluate(history, sample, policy), groups=groups, groups_error=groups_error)
    if record:
        lagstore.ensure_topic(clusters.target, mirror.name, mirror.lag.history_days,
                              mirror.target_replication_factor)
        lagstore.append(clusters.target, mirror.name, lag.SAMPLE_KEY, [sample.encode()])
    return status


def by_state(mirror: MirrorConfig, current: MirrorState, now_ms: int) -> lag.MirrorStatus:
    """The status of a mirror that is not mirroring: its state (upper case: PROMOTED, ...), since when, by whom."""
    return lag.MirrorStatus(mirror=mirror.name, time_ms=now_ms, status=current.phase.value.upper(),
                            reason=f"{current.describe()}; it copies no more" + (f" ({current.note})" if current.note
                                                                                  else ""),
                            record_lag=0, time_lag_seconds=0.0, last_run=None, last_success_ms=None,
                            last_commit_ms=None, max_lag_seconds=mirror.max_lag_seconds, samples_in_window=0)


def unavailable(mirror: MirrorConfig, exc: BaseException, now_ms: int) -> lag.MirrorStatus:
    """What a mirror whose lag could not be read reports: ERROR, with the reason."""
    return lag.MirrorStatus(mirror=mirror.name, time_ms=now_ms, status=lag.ERROR,
                            reason=f"its lag could not be read: {exc}", record_lag=0, time_lag_seconds=0.0,
                            last_run=None, last_success_ms=None, last_commit_ms=None,
                            max_lag_seconds=mirror.max_lag_seconds, samples_in_window=0)


def report_all(mirrors: MirrorsFile, name: str | None = None, now_ms: int | None = None,
               record: bool = False) -> list[lag.MirrorStatus]:
    """:func:`report` of every mirror (or the one named); a mirror that cannot be read is ERROR."""
    now_ms = now_ms if now_ms is not None else lagstore.now_ms()
    chosen = [mirrors.get(name)] if name else list(mirrors.mirrors)

    def one(mirror: MirrorConfig) -> lag.MirrorStatus:
        try:
            return report(mirror, now_ms, record=record)
        except EosMirrorError as exc:
            log.error("mirror %s: %s", mirror.name, exc)
            return unavailable(mirror, exc, now_ms)

    statuses = _each(one, chosen)
    if name:
        return statuses
    # The way back: a reversed mirror's generated reverse mirror (not in the mirrors file) copies now,
    # so it is shown and alerted on like any mirror, right after its forward mirror.
    reverses = {s.mirror: one(mirrors.get(s.mirror).reverse()) for s in statuses if s.status in REVERSE_SHOWN}
    return [row for s in statuses for row in ([s, reverses[s.mirror]] if s.mirror in reverses else [s])]


# The forward mirror's states in which its reverse mirror is prepared and may copy.
REVERSE_SHOWN = (Phase.REVERSED.value.upper(),)


def _each(one: Callable[[MirrorConfig], lag.MirrorStatus], chosen: list[MirrorConfig]) -> list[lag.MirrorStatus]:
    if len(chosen) <= 1:
        return [one(m) for m in chosen]
    # Mirrors in parallel: the time goes into broker round trips (librdkafka releases the GIL).
    with ThreadPoolExecutor(max_workers=min(PARALLEL_MIRRORS, len(chosen))) as pool:
        return list(pool.map(one, chosen))


def history(mirror: MirrorConfig, since_ms: int, clusters: Clusters | None = None) -> list[lag.MirrorSample]:
    """The recorded samples since ``since_ms`` (the page's charts)."""
    clusters = clusters or Clusters.of(mirror)
    samples, _ = lagstore.read_since(clusters.target, mirror.name, since_ms, mirror.progress_group)
    return samples


def record_run(mirror: MirrorConfig, result: Report) -> None:
    """Best effort: the run's outcome on the mirror's lag topic (created when missing). Never raises:
    a committed run must not fail because its outcome could not be recorded (e.g. a least-privilege
    principal without Create/Write on the lag topic: then ERROR is not detected, STOPPED still is,
    from the progress commit times)."""
    outcome = lag.RunOutcome.of_result(result, finished_ms=int(time.time() * 1000))
    records = [(lag.RUN_KEY, outcome.encode())]
    observed = lag.SourceObservation.of_result(result)
    if observed is not None:   # what the run saw of the source: a promotion's "known to exist"
        records.append((lag.OBSERVED_KEY, observed.encode()))
    try:
        target = Cluster.resolve("target", mirror.target, mirror.name)
        # Short timeouts: a run that failed because the target is unreachable must not wait long here.
        lagstore.ensure_topic(target, mirror.name, mirror.lag.history_days, mirror.target_replication_factor, timeout=5)
        lagstore.append_keyed(target, mirror.name, records, timeout=5)
    except Exception as exc:  # noqa: BLE001 - best effort by design
        log.warning("mirror %s: could not record the run's outcome on %s (%s); lag reports will not show it",
                    mirror.name, f"eosmirror-lag.{mirror.name}.internal", exc)
