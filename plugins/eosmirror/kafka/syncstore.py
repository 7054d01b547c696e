"""Reading the mirror's offset-sync topic (the I/O half of ``offsetsync`` and ``syncscan``).

``load``          every sync, from the topic's start (verification, which checks every mirrored range).
``latest``        each partition's newest sync: the snapshot topic plus the syncs written after its
                  marker (progress recovery, fencing). Cost: the partitions, not the history.
``load_needed``   per asked partition, the chain of syncs from the one holding the asked position to the
                  newest (group failover/failback, ``translate``): ``latest`` and then a backward scan in
                  doubling chunks that stops when every chain reaches back far enough, or back to the
                  partition's last migration/reset sync that moved progress backwards (the chain starts
                  there: ``offsetsync.current_chain``; a forward one is a gap, read past).
                  Cost: how far back the positions lie, not the history's length.
``refresh_snapshot``  folds the syncs written since the snapshot's marker into the snapshot (the
                  driver calls it after every run). The snapshot is a cache, never part of a copy
                  transaction: a stale one costs a longer forward read, a missing one a full read.

Why not partition the sync topic by mirrored partition, or seek by time: both need a new layout and a
migration of every existing mirror, and a time seek still reads from a point that depends on when,
not where, a group committed. The backward scan needs nothing from the writer; see ``core.syncscan``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from eosmirror.core import naming, syncscan
from eosmirror.core.errors import ProgressUnavailableError, TargetMismatchError
from eosmirror.core.offsetsync import OffsetSync, PartitionSyncs, group_by_partition
from eosmirror.core.syncscan import Need
from eosmirror.kafka import clients, readers
from eosmirror.kafka.cluster import Cluster

log = logging.getLogger(__name__)

TP = tuple[str, int]


@dataclass
class ReadStats:
    """What one read cost: records consumed from the sync topic (and from the snapshot), chunks."""

    sync_records: int = 0
    snapshot_records: int = 0
    backward_chunks: int = 0
    full_read: bool = False


def _decode(value: bytes, offset: int, topic: str, cluster_label: str) -> OffsetSync:
    try:
        return OffsetSync.decode(value)
    except (ValueError, KeyError) as exc:
        # Skipping it would make translation silently inexact: refuse instead.
        raise ProgressUnavailableError(
            f"{cluster_label}: record {offset} of {topic} is not an eosmirror offset sync ({exc}); only eosmirror "
            f"may write to that topic") from None


def load(target: Cluster, mirror: str, group: str) -> dict[TP, PartitionSyncs]:
    """All committed offset syncs of a mirror, grouped by target partition."""
    topic = naming.offset_sync_topic(mirror)
    syncs = [_decode(record.value, record.offset, topic, target.label)
             for record in readers.read_all(target, topic, 0,
                                            client_id=f"eosmirror-{mirror}-sync-reader",
                                            timeout=300, missing_ok=True, group_id=group)
             if record.value is not None]
    return group_by_partition(syncs)


def read_snapshot(target: Cluster, mirror: str, group: str, stats: ReadStats | None = None,
                  consumer: Any = None) -> syncscan.Snapshot:
    """The snapshot topic's entries (read by ``consumer``, a ``sync_reader``, when given)."""
    topic = naming.offset_sync_snapshot_topic(mirror)
    if consumer is None:
        records = readers.read_all(target, topic, 0, client_id=f"eosmirror-{mirror}-sync-reader",
                                   timeout=300, missing_ok=True, group_id=group)
    else:
        records = readers.read_all_by(consumer, target, topic, 0, timeout=300, missing_ok=True)
    if stats is not None:
        stats.snapshot_records += len(records)
    try:
        return syncscan.Snapshot.decode([(r.key, r.value) for r in records])
    except (ValueError, KeyError) as exc:
        raise ProgressUnavailableError(f"{target.label}: {topic} holds a record that is not an eosmirror snapshot "
                                       f"entry ({exc}); delete the topic (it is a cache; the next run rewrites "
                                       f"it)") from None


@dataclass
class View:
    """Each partition's newest sync, and for the kept partitions every sync from ``tail_start`` on.

    ``chains`` keep the order the syncs were written (the snapshot's entry, the newest below
    ``tail_start``, comes before the tail; the backward scan puts each older chunk in front):
    ``syncscan.check_chain`` needs it to find the partition's last migration/reset sync."""

    newest: dict[TP, OffsetSync] = field(default_factory=dict)
    chains: dict[TP, list[OffsetSync]] = field(default_factory=dict)
    low: int = 0          # the sync topic's log start
    tail_start: int = 0   # syncs at or above it were read (below it: only the snapshot's newest ones)
    end: int = 0          # the sync topic's end (LSO) when read
    snapshot: syncscan.Snapshot | None = None


def _tail_start(snapshot: syncscan.Snapshot, low: int, end: int, mirror: str, cluster_label: str) -> int:
    """Where the forward read of the history starts: the snapshot's marker, or the log start."""
    topic = naming.offset_sync_topic(mirror)
    if snapshot.upto is None:
        log.info("%s: no snapshot of %s yet: reading it in full once (the next mirror run writes the snapshot)",
                 cluster_label, topic)
        return low
    if snapshot.upto > end:
        raise ProgressUnavailableError(
            f"{cluster_label}: the offset-sync snapshot was folded up to offset {snapshot.upto} of {topic}, beyond its "
            f"end {end}: the sync topic was re-created. Delete the snapshot topic "
            f"{naming.offset_sync_snapshot_topic(mirror)} (a cache) and run the mirror again")
    if snapshot.upto < low:
        raise ProgressUnavailableError(
            f"{cluster_label}: the offset-sync snapshot was folded up to offset {snapshot.upto} of {topic}, but its "
            f"log start is {low}: syncs written in between were deleted by retention before any run folded them in, so "
            f"the newest sync of some partitions may be lost. Run the mirror more often than the sync topic's "
            f"retention; to recover, restore the mirror's committed progress")
    return snapshot.upto


def sync_reader(target: Cluster, mirror: str, group: str) -> Any:
    """The one consumer a read of the sync history uses for the sync topic's ends, the snapshot and the
    tail (each client's start costs its own connections and metadata: round trips on a far target)."""
    return clients.plain_consumer(target.settings, f"eosmirror-{mirror}-sync-reader", group_id=group)


def latest(target: Cluster, mirror: str, group: str, keep: frozenset[TP] = frozenset(),
           stats: ReadStats | None = None, consumer: Any = None) -> View:
    """The snapshot plus the history after its marker (all of it without a snapshot), read by ``consumer``
    (a ``sync_reader``: the caller's, or one of this call's own)."""
    if consumer is None:
        own = sync_reader(target, mirror, group)
        try:
            return latest(target, mirror, group, keep, stats, own)
        finally:
            own.close()
    stats = stats if stats is not None else ReadStats()
    topic = naming.offset_sync_topic(mirror)
    try:
        low, end = readers.ends_by(consumer, target, topic, 0)
    except TargetMismatchError:
        return View()   # no sync topic: nothing was ever mirrored
    snapshot = read_snapshot(target, mirror, group, stats, consumer)
    view = View(newest=dict(snapshot.entries), low=low, end=end, snapshot=snapshot,
                tail_start=_tail_start(snapshot, low, end, mirror, target.label))
    stats.full_read = view.tail_start == low
    for tp in keep:
        if tp in view.newest:
            view.chains[tp] = [view.newest[tp]]
    _read_tail(target, topic, consumer, view, keep, stats)
    return view


def _read_tail(target: Cluster, topic: str, consumer: Any, view: View, keep: frozenset[TP],
               stats: ReadStats) -> None:
    """The syncs from ``view.tail_start`` to the end, folded into ``view``. Only the kept partitions'
    syncs and each other partition's LAST record are decoded: a partition's syncs commit one after
    the other (one slot owns it at a time), so its last record in the topic is its newest sync."""
    keep_keys = {f"{t}\0{p}".encode() for t, p in keep}
    last: dict[bytes, tuple[int, bytes]] = {}
    for record in readers.iter_range(consumer, topic, 0, view.tail_start, view.end, target.label, timeout=300):
        stats.sync_records += 1
        if record.value is None:
            continue
        if record.key in keep_keys or record.key is None:
            sync = _decode(record.value, record.offset, topic, target.label)
            tp = (sync.target_topic, sync.partition)
            view.newest[tp] = syncscan.newer(view.newest.get(tp), sync)
            if tp in keep:
                view.chains.setdefault(tp, []).append(sync)
        else:
            last[record.key] = (record.offset, record.value)
    for offset, value in last.values():
        sync = _decode(value, offset, topic, target.label)
        tp = (sync.target_topic, sync.partition)
        view.newest[tp] = syncscan.newer(view.newest.get(tp), sync)


def _where(cluster_label: str, tp: TP) -> str:
    """A partition as error messages name it (the ChainError of any check of its chain reads the same)."""
    return f"{cluster_label}: {tp[0]}[{tp[1]}]"


def _uncovered(view: View, needs: dict[TP, Need], cluster_label: str) -> dict[bytes, TP]:
    """The asked partitions whose chain does not reach back far enough yet, by sync key: not back to
    the asked position, nor to a migration/reset sync that moved progress backwards (the chain starts
    there). Raises ChainError when a chain read so far overlaps (the caller reports it)."""
    return {f"{tp[0]}\0{tp[1]}".encode(): tp for tp, need in needs.items()
            if tp in view.chains and not syncscan.covered(view.chains[tp], need, _where(cluster_label, tp))}


def _scan_backwards(target: Cluster, mirror: str, group: str, view: View, needs: dict[TP, Need],
                    stats: ReadStats) -> None:
    """Extend the chains from ``view.tail_start`` backwards until every need is covered (or the start)."""
    topic = naming.offset_sync_topic(mirror)
    wanted = _uncovered(view, needs, target.label)
    if not wanted:
        return
    consumer = clients.plain_consumer(target.settings, f"eosmirror-{mirror}-sync-reader", group_id=group)
    try:
        for start, end in syncscan.backward_chunks(view.low, view.tail_start):
            stats.backward_chunks += 1
            older: dict[TP, list[OffsetSync]] = {}
            for record in readers.iter_range(consumer, topic, 0, start, end, target.label, timeout=300):
                stats.sync_records += 1
                tp = wanted.get(record.key or b"")   # the key names the partition: decode only the asked ones
                if tp is not None and record.value is not None:
                    older.setdefault(tp, []).append(_decode(record.value, record.offset, topic, target.label))
            for tp, found in older.items():   # this chunk precedes what was read: chains stay in write order
                view.chains[tp] = found + view.chains[tp]
            wanted = _uncovered(view, {tp: needs[tp] for tp in wanted.values()}, target.label)
            if not wanted:
                return
    finally:
        consumer.close()
    # Reached the topic's start: every chain is now the whole retained history of its partition.


def load_needed(target: Cluster, mirror: str, group: str, needs: dict[TP, Need],
                stats: ReadStats | None = None) -> dict[TP, PartitionSyncs]:
    """Per asked partition that was ever mirrored, its syncs from the one holding the asked position (or
    from its last migration/reset sync that moved progress back, when that comes later) to the newest:
    translating any position at or after the asked one gives what the current chain of the full history
    gives."""
    stats = stats if stats is not None else ReadStats()
    consumer = sync_reader(target, mirror, group)
    try:
        view = latest(target, mirror, group, keep=frozenset(needs), stats=stats, consumer=consumer)
    finally:
        consumer.close()
    try:   # the backward scan checks the chains too: an overlap found there is reported the same way
        _scan_backwards(target, mirror, group, view, needs, stats)
        return {tp: PartitionSyncs(syncscan.check_chain(view.chains[tp], _where(target.label, tp)))
                for tp in needs if tp in view.chains}
    except syncscan.ChainError as exc:
        raise ProgressUnavailableError(str(exc)) from None


def refresh_snapshot(target: Cluster, mirror: str, group: str, transactional_id: str,
                     stats: ReadStats | None = None) -> int:
    """Fold the syncs written since the snapshot's marker into it; returns how many entries were written.

    Invariant: every sync below the last marker is at most as new as its partition's surviving entry.
    One transaction carries the changed entries and the marker, and ``init_transactions`` runs BEFORE
    the snapshot is read: a concurrent refresh (overlapping runs) that read earlier is fenced and can
    no longer commit an entry older than one this refresh relied on (last-write-wins compaction)."""
    topic = naming.offset_sync_snapshot_topic(mirror)
    producer = clients.transactional_producer(target.settings, {}, transactional_id, 60_000,
                                              f"eosmirror-{mirror}-sync-snapshot", where="offset-sync snapshot writer")
    # Built before init_transactions, which it must not read before: its connections and metadata are
    # made while the producer is initialised (round trips on a far target), its reads come after.
    consumer = sync_reader(target, mirror, group)
    try:
        producer.init_transactions(60)
        view = latest(target, mirror, group, stats=stats, consumer=consumer)
        if view.snapshot is None or view.snapshot.upto == view.end:
            return 0
        changed = syncscan.changed_entries(view.snapshot.entries, view.newest)
        producer.begin_transaction()
        for sync in changed:
            producer.produce(topic, key=sync.key(), value=syncscan.encode_entry(sync, view.end), partition=0)
            producer.poll(0)
        producer.produce(topic, key=syncscan.MARKER_KEY, value=syncscan.encode_marker(view.end), partition=0)
        producer.commit_transaction(60)
        return len(changed)
    except ProgressUnavailableError:
        raise
    except Exception as exc:  # noqa: BLE001 - translated: the snapshot is a cache, the caller decides
        raise ProgressUnavailableError(f"{target.label}: could not write the offset-sync snapshot {topic}: {exc} "
                                       f"(it needs Write on that topic and on transactional id "
                                       f"{transactional_id})") from None
    finally:
        consumer.close()
        producer.flush(10)
