"""``eosmirror verify`` over many partitions at once: the same checks as ``verify.check_partition``, with the
reads batched (one ListOffsets per cluster, then chunks of about ``CHUNK_OFFSETS`` offsets, each read by one
consumer per cluster) so that its cost follows the records it reads, not the partitions. A partition whose log
start moved past its range while it was read is read again alone, as check_partition reads."""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass
from typing import Callable, Iterator

from eosmirror.core.migration import WayBackGaps
from eosmirror.core.offsetsync import PartitionSyncs
from eosmirror.driver.partitioncheck import PartitionCheck, judge
from eosmirror.kafka import readers
from eosmirror.kafka.cluster import Cluster
from eosmirror.kafka.offsets import list_offsets_of

# Source + target offsets per chunk, held in memory at once: a chunk costs 2 consumers, a larger one more
# memory (figures: docs/results.md, "Figures behind the code").
CHUNK_OFFSETS = 100_000


@dataclass(frozen=True)
class Job:
    """One partition to check: the settled offset syncs, and the target's end read before them."""

    source_topic: str
    target_topic: str
    partition: int
    chain: PartitionSyncs
    target_end: int
    compacted: bool = False
    taken_over_below: int = 0
    gaps: WayBackGaps = WayBackGaps()

    @property
    def target_tp(self) -> tuple[str, int]:
        return self.target_topic, self.partition

    @property
    def source_tp(self) -> tuple[str, int]:
        return self.source_topic, self.partition

    @property
    def source_range(self) -> tuple[int, int]:
        return self.chain.mirrored_range() or (0, 0)


def _log_starts(cluster: Cluster, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    from confluent_kafka.admin import OffsetSpec

    found = list_offsets_of(cluster, {tp: OffsetSpec.earliest() for tp in tps})
    return {tp: max(offset, 0) for tp, offset in found.items()}


def _chunks(jobs: list[Job], sizes: dict[tuple[str, int], int]) -> Iterator[list[Job]]:
    chunk: list[Job] = []
    total = 0
    for job in jobs:
        if chunk and total + sizes[job.target_tp] > CHUNK_OFFSETS:
            yield chunk
            chunk, total = [], 0
        chunk.append(job)
        total += sizes[job.target_tp]
    if chunk:
        yield chunk


def _read(cluster: Cluster, ranges: dict[tuple[str, int], tuple[int, int]], client_id: str, group: str | None,
          ) -> dict[tuple[str, int], tuple[int, list[readers.Record]]]:
    """{tp: (first offset read, records)} of every [start, end) in ``ranges``; a range whose log start
    moved past ``start`` meanwhile is asked again alone (readers.read_held), which starts it later."""
    moved: set[tuple[str, int]] = set()
    offsets = sum(end - start for start, end in ranges.values())
    records = readers.read_ranges(cluster, ranges, client_id, group, timeout=120.0 + offsets / 2_000, moved=moved)
    out = {tp: (ranges[tp][0], records[tp]) for tp in ranges if tp not in moved}
    for topic, partition in moved:
        start, end = ranges[(topic, partition)]
        out[(topic, partition)] = readers.read_held(cluster, topic, partition, start, end, client_id, group)
    return out


def check_many(source: Cluster, target: Cluster, jobs: list[Job], group: str | None,
               ) -> dict[tuple[str, int], PartitionCheck | None]:
    """{target partition: its check (None: never mirrored and empty)}, as check_partition decides."""
    target_lows = _log_starts(target, [job.target_tp for job in jobs])
    copied = [job for job in jobs if job.chain.syncs]
    source_lows = _log_starts(source, [job.source_tp for job in copied])
    target_from = {job.target_tp: min(target_lows[job.target_tp], job.target_end) for job in jobs}
    source_from = {job.target_tp: min(max(job.source_range[0], source_lows[job.source_tp]), job.source_range[1])
                   for job in copied}
    sizes = {job.target_tp: job.target_end - target_from[job.target_tp]
             + (job.source_range[1] - source_from[job.target_tp] if job.chain.syncs else 0) for job in jobs}
    checks: dict[tuple[str, int], PartitionCheck | None] = {}
    # Both clusters at once: most of a read is waiting on fetches, and librdkafka releases the GIL.
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for chunk in _chunks(jobs, sizes):
            wanted = {job.source_tp: (source_from[job.target_tp], job.source_range[1]) for job in chunk
                      if job.chain.syncs}
            reading = pool.submit(_read, source, wanted, "eosmirror-verify-source", group)
            held = _read(target, {job.target_tp: (target_from[job.target_tp], job.target_end) for job in chunk},
                         "eosmirror-verify-target", group)
            checks.update(_judge_chunk(chunk, held, reading.result()))
    return checks


def _already_read(sources: dict[tuple[str, int], tuple[int, list[readers.Record]]], tp: tuple[str, int],
                  ) -> Callable[[int, int], tuple[int, list[readers.Record]]]:
    """``judge``'s ``read_source`` for ``tp``: the chunk's one read of the source, whatever range it asks."""
    return lambda _start, _end: sources[tp]


def _judge_chunk(chunk: list[Job], held: dict[tuple[str, int], tuple[int, list[readers.Record]]],
                 sources: dict[tuple[str, int], tuple[int, list[readers.Record]]],
                 ) -> dict[tuple[str, int], PartitionCheck | None]:
    checks: dict[tuple[str, int], PartitionCheck | None] = {}
    for job in chunk:
        low, target_records = held[job.target_tp]
        checks[job.target_tp] = judge(
            job.source_topic, job.target_topic, job.partition, job.chain, job.target_end, low, target_records,
            _already_read(sources, job.source_tp), compacted=job.compacted,
            taken_over_below=job.taken_over_below, gaps=job.gaps)
    return checks
