"""``eosmirror verify``: compare source and target over the mirrored ranges, record by record, and name every
target record no offset sync accounts for; reads only. The target's end is read before the offset syncs, so a
run committing meanwhile is never half-seen. The CLI then keeps the result on the mirror's lag topic
(``record``: the readiness report's "last verify"), the only thing it writes. What is checked and why: docs/architecture.md, "What `eosmirror
verify` checks". The verdict of one partition: ``partitioncheck``; many partitions' reads at once: ``verifybatch``.
"""

from __future__ import annotations

from typing import Any

from eosmirror.core import migration, naming
from eosmirror.core.config import MirrorConfig
from eosmirror.core.errors import EXIT_FAILED, EXIT_INCOMPLETE, EXIT_OK, EosMirrorError
from eosmirror.core.offsetsync import PartitionSyncs
from eosmirror.core.readiness import VERIFY_KEY, VerifyResult
from eosmirror.driver import minimums, topics, verifybatch
from eosmirror.driver.observe import progress_settle_seconds, settle_bound_seconds
from eosmirror.driver.partitioncheck import PartitionCheck, judge, settled
from eosmirror.kafka import lagstore, offsets, readers, state, syncstore
from eosmirror.kafka.cluster import Cluster
from eosmirror.kafka.offsets import list_offsets_of


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
    target_low, records = readers.read_held(target, target_topic, partition, 0, target_end,
                                            "eosmirror-verify-target", group)
    return judge(source_topic, target_topic, partition, chain, target_end, target_low, records,
                 lambda start, end: readers.read_held(source, source_topic, partition, start, end,
                                                      "eosmirror-verify-source", group),
                 max_differences, compacted, taken_over_below)


def verify(mirror: MirrorConfig) -> list[PartitionCheck]:
    from confluent_kafka.admin import OffsetSpec

    source, target = Cluster.resolve("source", mirror.source, mirror.name), Cluster.resolve("target", mirror.target, mirror.name)
    minimums.require("verify", (source, target))
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
                        progress_settle_seconds(), settle_bound_seconds(mirror), "the target's end")
    # The target's ends first, the offset syncs after: see the module docstring.
    ends = list_offsets_of(target, {(pair.target, k): OffsetSpec.latest() for pair, k in partitions})

    audit = state.read_audit(target, mirror.name, mirror.progress_group)

    def check_all(batch: list[tuple[topics.TopicPair, int]], history: dict[tuple[str, int], PartitionSyncs],
                  ) -> dict[tuple[str, int], PartitionCheck | None]:
        jobs = []
        for pair, k in batch:
            syncs = history.get((pair.target, k))
            switch = migration.taken_over_below(audit, pair.target, k, syncs.mirrored_from if syncs else None)
            chain = settled(syncs, ends[(pair.target, k)])
            jobs.append(verifybatch.Job(pair.source, pair.target, k, chain, ends[(pair.target, k)],
                                        compacted=pair.source in compacted, taken_over_below=switch[0] if switch else 0,
                                        gaps=migration.way_back_gaps(audit, pair.target, k, chain.ordered())))
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


def record(mirror: MirrorConfig, checks: list[PartitionCheck], now_ms: int) -> str:
    """Keep the result on the mirror's lag topic (the readiness report's "last verify"); returns the line
    that says where, or why it could not be kept (the comparison itself stands either way)."""
    target = Cluster.resolve("target", mirror.target, mirror.name)
    result = VerifyResult(now_ms, len(checks), sum(c.records for c in checks),
                          tuple(f"{c.source_topic}[{c.partition}]" for c in checks if not c.ok),
                          tuple(f"{c.source_topic}[{c.partition}]" for c in checks if c.ok and not c.complete))
    try:
        lagstore.ensure_topic(target, mirror.name, mirror.lag.history_days, mirror.target_replication_factor)
        lagstore.append(target, mirror.name, VERIFY_KEY, [result.encode()])
    except EosMirrorError as exc:
        return f"verify result NOT recorded (the readiness report will not see it): {exc}"
    return f"verify result recorded on {naming.lag_topic(mirror.name)} (the readiness report's last verify)"


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
        if c.way_back_own or c.way_back_skipped:
            lines.append(f"    the way back (reverse, resume: `eosmirror history`): {c.way_back_own} target record(s) "
                         f"are the target cluster's own and {c.way_back_skipped} source record(s) came from it or "
                         f"diverged; not the mirror's copies, not compared")
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
