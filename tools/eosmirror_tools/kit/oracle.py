"""The exactly-once oracle: a whole read of both logs after a run (the chaos rounds, the deploy drill).

Per partition, a fresh read_committed read of the whole target topic is compared with the source's
committed records (the ground truth):
  duplicates         a source record copied more than once
  losses             a committed source record missing on the target
  order violations   target records out of the source's order
  aborted leaks      a record of an aborted source transaction on the target
  unknown records    target records that match no source record
  content mismatches key, value, headers or timestamp differ
  progress mismatches the mirror's committed progress is not the source's end offset
  hanging transactions the target's last stable offset is below its high watermark
  translate errors   for sampled source offsets, translate() does not point at the copy
Stronger than Kafka's own test, which stops reading at "at least N" records: we read to the end.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from eosmirror.core.config import MirrorConfig
from eosmirror.kafka import readers, syncstore
from eosmirror.kafka.cluster import Cluster
from eosmirror_tools.kit import counting

COUNTERS = ("records_checked", "duplicates", "losses", "order_violations", "aborted_leaks", "unknown_records",
            "content_mismatches", "progress_mismatches", "hanging_transactions", "translate_errors")


@dataclass
class Verdict:
    counts: dict[str, int] = field(default_factory=lambda: {c: 0 for c in COUNTERS})
    examples: list[str] = field(default_factory=list)

    def add(self, counter: str, n: int = 1, example: str | None = None) -> None:
        self.counts[counter] += n
        if example and n and len(self.examples) < 12:
            self.examples.append(example)

    @property
    def ok(self) -> bool:
        return all(v == 0 for k, v in self.counts.items() if k != "records_checked")


def _seq(record: readers.Record) -> int:
    return int(dict(record.headers)["seq"])


def _txn(record: readers.Record) -> bytes | None:
    return dict(record.headers).get("txn")


def check_partition(verdict: Verdict, source: list[readers.Record], target: list[readers.Record], where: str) -> None:
    verdict.add("records_checked", len(source))
    leaks = [r for r in target if _txn(r) == b"aborted"]
    verdict.add("aborted_leaks", len(leaks), f"{where}: aborted record seq={_seq(leaks[0])} on the target" if leaks else None)
    by_seq = {_seq(r): r for r in source}
    seen: dict[int, int] = {}
    for r in target:
        seen[_seq(r)] = seen.get(_seq(r), 0) + 1
    dups = sum(n - 1 for n in seen.values() if n > 1)
    verdict.add("duplicates", dups, f"{where}: {dups} duplicate(s), e.g. seq={next((s for s, n in seen.items() if n > 1), None)}")
    lost = sorted(set(by_seq) - set(seen))
    verdict.add("losses", len(lost), f"{where}: {len(lost)} committed record(s) missing, e.g. seq={lost[:5]}")
    unknown = [s for s in seen if s not in by_seq and _txn_of(target, s) != b"aborted"]
    verdict.add("unknown_records", len(unknown), f"{where}: target records match no source record: seq={unknown[:5]}")
    order = [_seq(r) for r in target if _seq(r) in by_seq]
    inversions = sum(1 for a, b in zip(order, order[1:]) if b <= a)
    verdict.add("order_violations", inversions, f"{where}: {inversions} record(s) out of source order")
    mismatched = 0
    for r in target:
        s = by_seq.get(_seq(r))
        if s is not None and not s.same_content(r):
            mismatched += 1
    verdict.add("content_mismatches", mismatched, f"{where}: {mismatched} record(s) differ in key/value/headers/timestamp")


def _txn_of(records: list[readers.Record], seq: int) -> bytes | None:
    return next((_txn(r) for r in records if _seq(r) == seq), None)


def _read_whole(cluster: Cluster, topic: str, partitions: int) -> tuple[dict[tuple[str, int], list[readers.Record]],
                                                                     dict[tuple[str, int], int]]:
    """(records, last stable offset) of every partition, from its log start to its last stable offset."""
    from confluent_kafka.admin import OffsetSpec

    from eosmirror.kafka.offsets import list_offsets_of

    tps = [(topic, p) for p in range(partitions)]
    starts = list_offsets_of(cluster, {tp: OffsetSpec.earliest() for tp in tps})
    ends = list_offsets_of(cluster, {tp: OffsetSpec.latest() for tp in tps}, read_committed=True)
    ranges = {tp: (max(starts[tp], 0), ends[tp]) for tp in tps}
    return readers.read_ranges(cluster, ranges, client_id="eosmirror-chaos-oracle", timeout=300), ends


def check_round(mirror: MirrorConfig, topic: str, partitions: int, source_conf: dict[str, Any],
                target_conf: dict[str, Any], rng: random.Random, samples: int = 10) -> Verdict:
    from eosmirror.kafka import progress

    verdict = Verdict()
    committed = progress.read(Cluster.from_settings("target", target_conf), [(topic, p) for p in range(partitions)],
                              mirror.progress_group,
                              stable=False)
    # An abort/commit marker of the last fenced zombie may still be on its way: 30 s for it.
    hanging = counting.still_open(*counting.settle(target_conf, topic, partitions, "target", timeout=30))
    verdict.add("hanging_transactions", len(hanging), f"open transaction left on {[(topic, p) for p in hanging[:3]]}")
    history = syncstore.load(Cluster.from_settings("target", target_conf), mirror.name, mirror.progress_group)
    # Every partition of both clusters in one read_committed consumer each: a consumer per partition
    # cost about 0.2 s, minutes for the 1,000-partition round.
    sources, source_ends = _read_whole(Cluster.from_settings("source", source_conf), topic, partitions)
    targets, _ = _read_whole(Cluster.from_settings("target", target_conf), topic, partitions)
    for p in range(partitions):
        where = f"{topic}[{p}]"
        source, target = sources[(topic, p)], targets[(topic, p)]
        check_partition(verdict, source, target, where)
        source_end = source_ends[(topic, p)]
        done = committed.get((topic, p))
        if done is None or done.offset != source_end:
            verdict.add("progress_mismatches", 1, f"{where}: progress {done.offset if done else None} != source end {source_end}")
        syncs = history.get((topic, p))
        if syncs is None or not source:
            continue
        start, end = syncs.mirrored_from, syncs.progress
        target_offsets = [r.offset for r in target]
        for x in rng.sample(range(start, end + 1), min(samples, end + 1 - start)):
            want = next((r for r in source if r.offset >= x), None)
            got_offset = syncs.translate(x)
            got = next((r for r in target if r.offset >= got_offset), None)
            if (want is None) != (got is None) or (want is not None and not want.same_content(got)):
                verdict.add("translate_errors", 1, f"{where}: translate({x}) = {got_offset} is not the copy of "
                                                   f"source offset {want.offset if want else None}")
        del target_offsets
    return verdict
