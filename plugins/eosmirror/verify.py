"""``eosmirror verify``: compare source and target over the mirrored ranges, record by record.

For every mirrored partition: the committed source records in [first mirrored offset, progress)
must equal the target records the offset syncs map them to, in the same order, with identical key,
value, headers (order and duplicates included) and timestamp; and ``translate(o)`` of every source
record must be exactly the target offset holding its copy. Reads only; writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eosmirror import clients, connections, progress, readers, syncstore, topics
from eosmirror.config import MirrorConfig
from eosmirror.driver import cluster_label


@dataclass
class PartitionCheck:
    source_topic: str
    target_topic: str
    partition: int
    source_range: tuple[int, int]
    records: int = 0
    differences: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences


def _describe(rec: readers.Record | None) -> str:
    if rec is None:
        return "missing"
    value = rec.value if rec.value is None or len(rec.value) <= 40 else rec.value[:40] + b"..."
    return f"offset {rec.offset} key={rec.key!r} value={value!r} headers={list(rec.headers)} ts={rec.timestamp}"


def check_partition(source_conf: dict[str, Any], target_conf: dict[str, Any], source_topic: str, target_topic: str,
                    partition: int, syncs: Any, committed: int | None, source_label: str, target_label: str,
                    max_differences: int = 10, compacted: bool = False,
                    group: str | None = None) -> PartitionCheck | None:
    if syncs is None or syncs.mirrored_from is None:
        return None   # never copied anything: nothing to compare
    start = syncs.mirrored_from
    end = committed if committed is not None else syncs.progress
    check = PartitionCheck(source_topic, target_topic, partition, (start, end))
    source = readers.read_range(source_conf, source_topic, partition, start, end, source_label,
                                client_id="eosmirror-verify-source", group_id=group)
    ordered = syncs.ordered()
    target_start = syncs.translate(start)
    target_end = ordered[-1].target_next
    target = readers.read_range(target_conf, target_topic, partition, target_start, target_end, target_label,
                                client_id="eosmirror-verify-target", group_id=group)
    check.records = len(source)

    def differ(text: str) -> None:
        if len(check.differences) < max_differences:
            check.differences.append(text)

    if compacted:
        _compare_compacted(source, target, syncs, differ)
        return check
    if len(source) != len(target):
        differ(f"{len(source)} committed source records in [{start}, {end}) but {len(target)} target records in "
               f"[{target_start}, {target_end})")
    for i in range(max(len(source), len(target))):
        s = source[i] if i < len(source) else None
        t = target[i] if i < len(target) else None
        if s is None or t is None or not s.same_content(t):
            differ(f"record #{i}: source {_describe(s)} vs target {_describe(t)}")
            continue
        expected = syncs.translate(s.offset)
        if expected != t.offset:
            differ(f"translate({s.offset}) = {expected}, but its copy is at target offset {t.offset}")
    return check


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
    source_conf = connections.resolve(mirror.source, f"mirror {mirror.name!r}: source")
    target_conf = connections.resolve(mirror.target, f"mirror {mirror.name!r}: target")
    source_label = cluster_label("source", mirror.source, source_conf)
    target_label = cluster_label("target", mirror.target, target_conf)
    source_admin = clients.admin_client(source_conf, f"{mirror.name}-verify")
    pairs = topics.resolve(mirror, source_admin, source_label)
    source_policies = topics.cleanup_policies(source_admin, [p.source for p in pairs], source_label)
    target_admin = clients.admin_client(target_conf, f"{mirror.name}-verify")
    target_policies = topics.cleanup_policies(target_admin, [p.target for p in pairs], target_label)
    compacted = {p.source for p in pairs if "compact" in source_policies.get(p.source, "")
                 or "compact" in target_policies.get(p.target, "")}
    history = syncstore.load(target_conf, mirror.name, target_label, mirror.progress_group)
    committed = progress.read(target_conf, [(p.target, k) for p in pairs for k in range(p.partitions)], target_label,
                              mirror.progress_group, stable=False)
    checks = []
    for pair in pairs:
        for k in range(pair.partitions):
            done = committed.get((pair.target, k))
            check = check_partition(source_conf, target_conf, pair.source, pair.target, k, history.get((pair.target, k)),
                                    done.offset if done else None, source_label, target_label,
                                    compacted=pair.source in compacted, group=mirror.progress_group)
            if check is not None:
                checks.append(check)
    return checks


def format_checks(checks: list[PartitionCheck]) -> str:
    lines = []
    for c in checks:
        state = "OK" if c.ok else "DIFFERENT"
        lines.append(f"{c.source_topic}[{c.partition}] -> {c.target_topic}[{c.partition}]  source offsets "
                     f"{c.source_range[0]}..{c.source_range[1]}  {c.records} records  {state}")
        lines += [f"    {d}" for d in c.differences]
    total = sum(c.records for c in checks)
    bad = [c for c in checks if not c.ok]
    lines.append(f"verified {len(checks)} partitions, {total} records: "
                 + ("all identical" if not bad else f"{len(bad)} partition(s) differ"))
    return "\n".join(lines)
