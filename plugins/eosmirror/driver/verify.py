"""``eosmirror verify``: compare source and target over the mirrored ranges, record by record.

For every mirrored partition:
* the committed source records of the mirrored range [first mirrored offset, last sync's end) equal
  the target records the offset syncs map them to, in the same order, with identical key, value,
  headers (order and duplicates included) and timestamp, and ``translate(o)`` of every source record
  is exactly the target offset holding its copy;
* nothing else is on the target: every committed target record lies in a range an offset sync
  accounts for. A record before the first copy, between copies or after the last copy (the target's
  end must be the last sync's end) was written by another producer; each is named (the list capped,
  the count exact). Aborted records and transaction markers are invisible to read_committed consumers
  and are not records of the topic;
* a mirrored range the source (or the target) no longer holds - retention or delete-records ran since
  the copy - is reported as not checkable, with its size, and the rest is still checked.
``exit_code`` turns the checks into the CLI's exit code. Reads only; writes nothing.

Races with a run that commits while verify reads: the target's end is fixed BEFORE the offset syncs
are read, so every mirror record below it has its sync among those read (they commit in one
transaction), and only syncs wholly below that end are checked. The transaction's markers reach the
target partition and the sync topic independently, so a partition with foreign records is checked
once more with freshly read syncs before they are reported.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, Callable

from eosmirror.core import migration, naming
from eosmirror.core.config import MirrorConfig
from eosmirror.core.errors import EXIT_FAILED, EXIT_INCOMPLETE, EXIT_OK, EosMirrorError
from eosmirror.core.offsetsync import PartitionSyncs
from eosmirror.driver import topics
from eosmirror.driver.observe import PROGRESS_SETTLE_SECONDS, settle_bound_seconds
from eosmirror.kafka import offsets, readers, state, syncstore
from eosmirror.kafka.cluster import Cluster
from eosmirror.kafka.offsets import list_offsets_of

MAX_LISTED = 20        # foreign offsets named per partition (the count is always exact)


@dataclass
class PartitionCheck:
    source_topic: str
    target_topic: str
    partition: int
    source_range: tuple[int, int]   # mirrored source offsets [first, end) per the offset syncs; (0, 0): none
    records: int = 0                # source records compared with their copies
    differences: list[str] = field(default_factory=list)
    foreign: int = 0                # committed target records that no offset sync accounts for
    unchecked: list[str] = field(default_factory=list)   # mirrored ranges no longer readable, and why
    source_gone: int = 0            # mirrored source offsets deleted on the source since they were copied
    target_gone: int = 0            # mirrored target offsets deleted on the target since
    before_take_over: int = 0       # target records copied by the copier eosmirror took over from (migrate)

    @property
    def ok(self) -> bool:
        return not self.differences

    @property
    def complete(self) -> bool:
        return not self.unchecked


def _describe(rec: readers.Record | None) -> str:
    if rec is None:
        return "missing"
    value = rec.value if rec.value is None or len(rec.value) <= 40 else rec.value[:40] + b"..."
    return f"offset {rec.offset} key={rec.key!r} value={value!r} headers={list(rec.headers)} ts={rec.timestamp}"


def _read_held(cluster: Cluster, topic: str, partition: int, start: int, end: int, client_id: str,
               group: str | None) -> tuple[int, list[readers.Record]]:
    """(first offset of [start, end) the partition still holds, its committed records from there).

    Retention or delete-records may have moved the log start past ``start``, even while reading
    (the read then fails with an offset out of range): ask for the log start again, a few times."""
    for attempt in range(3):
        low = readers.watermarks(cluster, topic, partition, client_id=client_id, group_id=group)[0]
        held = min(max(start, low), end)
        try:
            return held, readers.read_range(cluster, topic, partition, held, end, client_id=client_id, group_id=group)
        except EosMirrorError as exc:
            if "_AUTO_OFFSET_RESET" not in str(exc) or attempt == 2:
                raise
    raise AssertionError("not reached")


def settled(syncs: PartitionSyncs | None, target_end: int) -> PartitionSyncs:
    """The syncs whose copies lie wholly below ``target_end`` (a chain prefix, in source order):
    what was committed when the target's end was read. A later sync belongs to a run that committed
    after it; its records are beyond the part of the target that is read."""
    kept = []
    for sync in (syncs.ordered() if syncs is not None else []):
        if sync.target_next > target_end:
            break
        kept.append(sync)
    return PartitionSyncs(kept)


def split_foreign(target: list[readers.Record], syncs: PartitionSyncs,
                  ) -> tuple[list[readers.Record], list[readers.Record]]:
    """(records inside a range some offset sync accounts for, every other record: foreign)."""
    spans = sorted((s.target_base, s.target_next) for s in syncs.syncs if s.count)
    bases = [b for b, _ in spans]
    mirrored, foreign = [], []
    for rec in target:
        i = bisect.bisect_right(bases, rec.offset) - 1
        (mirrored if i >= 0 and rec.offset < spans[i][1] else foreign).append(rec)
    return mirrored, foreign


def foreign_summary(foreign: list[readers.Record], syncs: PartitionSyncs, target_end: int) -> str:
    """One line: how many foreign records, where they lie relative to the mirrored range, which offsets."""
    spans = sorted((s.target_base, s.target_next) for s in syncs.syncs if s.count)
    listed = ", ".join(str(r.offset) for r in foreign[:MAX_LISTED])
    if len(foreign) > MAX_LISTED:
        listed += f", ... ({len(foreign) - MAX_LISTED} more)"
    if not spans:
        where = "the mirror has copied no record into this partition"
    else:
        first, last = spans[0][0], spans[-1][1]
        before = sum(1 for r in foreign if r.offset < first)
        after = sum(1 for r in foreign if r.offset >= last)
        where = (f"{before} before the first mirrored record (target offset {first}), "
                 f"{len(foreign) - before - after} between mirrored records, {after} after the last one "
                 f"(the mirrored records end at {last}, the target at {target_end})")
    return (f"{len(foreign)} record(s) on the target that no offset sync of the mirror accounts for: {where}; "
            f"target offsets {listed}. eosmirror must be the only writer of its target topics")


def _gone_on_target(check: PartitionCheck, syncs: PartitionSyncs, target_low: int) -> None:
    """Mirrored target offsets below the target's log start: deleted there (target retention)."""
    spans = sorted((s.target_base, s.target_next) for s in syncs.syncs if s.count)
    gone = sum(min(end, target_low) - base for base, end in spans if base < target_low)
    if gone:
        check.target_gone = gone
        check.unchecked.append(
            f"target offsets {spans[0][0]}..{target_low - 1} are no longer on the target (retention or "
            f"delete-records on {check.target_topic}): {gone} mirrored offsets cannot be compared")


def check_partition(source: Cluster, target: Cluster, source_topic: str, target_topic: str, partition: int,
                    syncs: Any, committed: int | None, max_differences: int = 10, compacted: bool = False,
                    group: str | None = None, target_end: int | None = None,
                    taken_over_below: int = 0) -> PartitionCheck | None:
    """Check one partition; None when the mirror never copied it and the target partition holds nothing.

    ``target_end``: the target's read_committed end, read before ``syncs`` (read now if None).
    ``committed`` (the committed progress) is not needed: the offset syncs commit with the progress
    and bound the mirrored range; kept for callers that pass it. ``taken_over_below``: target records
    below it were copied before eosmirror took over (``eosmirror migrate``); they are not eosmirror's
    to check, and are counted, not reported as foreign."""
    del committed
    if target_end is None:
        target_end = readers.watermarks(target, target_topic, partition, client_id="eosmirror-verify-target",
                                        group_id=group)[1]
    chain = settled(syncs, target_end)
    target_low, records = _read_held(target, target_topic, partition, 0, target_end, "eosmirror-verify-target", group)
    return judge(source_topic, target_topic, partition, chain, target_end, target_low, records,
                 lambda start, end: _read_held(source, source_topic, partition, start, end,
                                               "eosmirror-verify-source", group),
                 max_differences, compacted, taken_over_below)


def judge(source_topic: str, target_topic: str, partition: int, chain: PartitionSyncs, target_end: int,
          target_low: int, target: list[readers.Record],
          read_source: Callable[[int, int], tuple[int, list[readers.Record]]], max_differences: int = 10,
          compacted: bool = False, taken_over_below: int = 0) -> PartitionCheck | None:
    """The checks of one partition over records already read: ``target`` holds the target's committed
    records from ``target_low`` (its log start) to ``target_end``; ``read_source(start, end)`` gives
    (first offset of [start, end) the source still holds, its committed records from there)."""
    mirrored, foreign = split_foreign(target, chain)
    earlier = [r for r in foreign if r.offset < taken_over_below]
    foreign = foreign[len(earlier):] if earlier else foreign
    if not chain.syncs and not foreign:
        return None
    start, end = (chain.mirrored_from, chain.progress) if chain.syncs else (0, 0)
    check = PartitionCheck(source_topic, target_topic, partition, (start, end), foreign=len(foreign),
                           before_take_over=len(earlier))

    def differ(text: str) -> None:
        if len(check.differences) < max_differences:
            check.differences.append(text)

    if foreign:
        check.differences.append(foreign_summary(foreign, chain, target_end))
        for rec in foreign[:3]:
            differ(f"foreign record {_describe(rec)}")
    if not chain.syncs:
        return check
    held, source = read_source(start, end)
    if held > start:
        check.source_gone = held - start
        check.unchecked.append(
            f"source offsets {start}..{held - 1} are no longer on the source (retention or delete-records on "
            f"{source_topic}): {held - start} mirrored offsets cannot be compared")
    _gone_on_target(check, chain, target_low)
    cut = chain.translate(held)      # copies of records the source no longer holds lie below it
    mirrored = [t for t in mirrored if t.offset >= cut]
    if check.target_gone:
        source = [s for s in source if chain.translate(s.offset) >= target_low]
    check.records = len(source)
    compare = _compare_compacted if compacted else _compare_in_order
    compare(source, mirrored, chain, differ)
    return check


def _compare_in_order(source: list[readers.Record], target: list[readers.Record], syncs: Any,
                      differ: Callable[[str], None]) -> None:
    if len(source) != len(target):
        span = (f"[{source[0].offset}, {source[-1].offset}]" if source else "(none)",
                f"[{target[0].offset}, {target[-1].offset}]" if target else "(none)")
        differ(f"{len(source)} committed source records at offsets {span[0]} but {len(target)} mirrored target "
               f"records at offsets {span[1]}")
    for i in range(max(len(source), len(target))):
        s = source[i] if i < len(source) else None
        t = target[i] if i < len(target) else None
        if s is None or t is None or not s.same_content(t):
            differ(f"record #{i}: source {_describe(s)} vs target {_describe(t)}")
            continue
        expected = syncs.translate(s.offset)
        if expected != t.offset:
            differ(f"translate({s.offset}) = {expected}, but its copy is at target offset {t.offset}")


def _superseded(records: list[readers.Record], index: int) -> bool:
    """A later record with the same key exists: log compaction may legitimately drop this one."""
    key = records[index].key
    return key is not None and any(r.key == key for r in records[index + 1:])


def _compare_compacted(source: list[readers.Record], target: list[readers.Record], syncs: Any, differ: Any) -> None:
    """Both logs are compacted on their own schedules. Every record present on both sides must be
    identical at its translated offset; a record present on one side only must be superseded (a later
    record with the same key) on the other, or it was lost or duplicated."""
    by_offset = {t.offset: (i, t) for i, t in enumerate(target)}
    matched = set()
    for i, s in enumerate(source):
        hit = by_offset.get(syncs.translate(s.offset))
        if hit is not None and hit[1].same_content(s):
            matched.add(hit[1].offset)
        elif hit is not None:
            differ(f"source {_describe(s)} vs target {_describe(hit[1])}")
        elif not _superseded(source, i):
            differ(f"source {_describe(s)} has no copy on the target (and no later record with its key)")
    for j, t in enumerate(target):
        if t.offset not in matched and not _superseded(target, j):
            differ(f"target {_describe(t)} matches no source record (and no later record with its key)")


def verify(mirror: MirrorConfig) -> list[PartitionCheck]:
    from confluent_kafka.admin import OffsetSpec

    source, target = Cluster.resolve("source", mirror.source, mirror.name), Cluster.resolve("target", mirror.target, mirror.name)
    pairs = topics.resolve(mirror, source)
    source_policies = topics.cleanup_policies(source, [p.source for p in pairs])
    target_policies = topics.cleanup_policies(target, [p.target for p in pairs])
    compacted = {p.source for p in pairs if "compact" in source_policies.get(p.source, "")
                 or "compact" in target_policies.get(p.target, "")}
    existing = topics.describe(target, [p.target for p in pairs])
    partitions = [(pair, k) for pair in pairs if pair.target in existing
                  for k in range(min(pair.partitions, existing[pair.target].partitions))]
    # Right after a run the broker may still be writing its commit markers (issue #44): an end read
    # now would leave the last copies "committed after verify read the target's end" (exit 3), and a
    # copy whose sync is not visible yet would look foreign. Wait while they land, as the planner does.
    offsets.settle_ends(target, [(pair.target, k) for pair, k in partitions] + [(naming.offset_sync_topic(mirror.name), 0)],
                        PROGRESS_SETTLE_SECONDS, settle_bound_seconds(mirror), "the target's end")
    # The target's ends first, the offset syncs after: see the module docstring.
    ends = list_offsets_of(target, {(pair.target, k): OffsetSpec.latest() for pair, k in partitions})

    audit = state.read_audit(target, mirror.name, mirror.progress_group)

    def check_all(batch: list[tuple[topics.TopicPair, int]], history: dict[tuple[str, int], PartitionSyncs],
                  ) -> dict[tuple[str, int], PartitionCheck | None]:
        from eosmirror.driver import verifybatch  # here: verifybatch builds on this module's checks (a cycle)

        jobs = []
        for pair, k in batch:
            syncs = history.get((pair.target, k))
            switch = migration.taken_over_below(audit, pair.target, k, syncs.mirrored_from if syncs else None)
            jobs.append(verifybatch.Job(pair.source, pair.target, k, settled(syncs, ends[(pair.target, k)]),
                                        ends[(pair.target, k)], compacted=pair.source in compacted,
                                        taken_over_below=switch[0] if switch else 0))
        return verifybatch.check_many(source, target, jobs, mirror.progress_group)

    history = syncstore.load(target, mirror.name, mirror.progress_group)
    checks = check_all(partitions, history)
    suspects = [(pair, k) for pair, k in partitions if getattr(checks[(pair.target, k)], "foreign", 0)]
    if suspects:   # a sync committed with its records may have become visible after them: ask once more
        history = syncstore.load(target, mirror.name, mirror.progress_group)
        checks.update(check_all(suspects, history))
    for pair, k in partitions:
        _report_committed_after(checks, pair, k, history.get((pair.target, k)), ends[(pair.target, k)])
    return [c for c in checks.values() if c is not None]


def _report_committed_after(checks: dict[tuple[str, int], PartitionCheck | None], pair: topics.TopicPair, k: int,
                            syncs: PartitionSyncs | None, target_end: int) -> None:
    """Copies committed after the target's end was read (a run committing meanwhile) are not checked:
    say so, for a partition with nothing settled too, so that verify never calls a partition it did
    not read identical, nor leaves it out (exit 3, as for any mirrored range it could not check)."""
    late = [sync for sync in (syncs.ordered() if syncs is not None else []) if sync.target_next > target_end]
    if not late or not any(sync.count for sync in late):
        return
    check = checks.get((pair.target, k))
    if check is None:
        check = checks[(pair.target, k)] = PartitionCheck(pair.source, pair.target, k, (0, 0))
    check.unchecked.append(
        f"source offsets {late[0].source_start}..{late[-1].source_end - 1} were committed after verify read the "
        f"target's end ({target_end}): not checked (a run was committing; verify again once it has ended)")


def exit_code(checks: list[PartitionCheck]) -> int:
    """0: all identical and nothing foreign; 1: a difference or a foreign record; 3 (EXIT_INCOMPLETE):
    no difference, but some mirrored ranges are gone from the source or the target and were not checked."""
    if not all(c.ok for c in checks):
        return EXIT_FAILED
    return EXIT_OK if all(c.complete for c in checks) else EXIT_INCOMPLETE


def format_checks(checks: list[PartitionCheck]) -> str:
    lines = []
    for c in checks:
        state = ("OK" if c.complete else "OK WHERE CHECKABLE") if c.ok else "DIFFERENT"
        mirrored = (f"source offsets {c.source_range[0]}..{c.source_range[1]}" if c.source_range != (0, 0)
                    else "nothing mirrored")
        lines.append(f"{c.source_topic}[{c.partition}] -> {c.target_topic}[{c.partition}]  {mirrored}  "
                     f"{c.records} records  {state}")
        lines += [f"    {d}" for d in c.differences]
        lines += [f"    not checkable: {u}" for u in c.unchecked]
        if c.before_take_over:
            lines.append(f"    {c.before_take_over} earlier target record(s) were copied before eosmirror took over "
                         f"(`eosmirror history`); not checked here")
    total = sum(c.records for c in checks)
    bad = [c for c in checks if not c.ok]
    foreign = sum(c.foreign for c in checks)
    verdict = "all identical" if not bad else f"{len(bad)} partition(s) differ"
    if foreign:
        verdict += f" ({foreign} foreign record(s) on the target)"
    gone = sum(c.source_gone + c.target_gone for c in checks)
    if gone:
        verdict += (f"; {gone} mirrored offsets could not be checked: deleted on the source or the target since "
                    f"they were copied")
    lines.append(f"verified {len(checks)} partitions, {total} records: {verdict}")
    return "\n".join(lines)
