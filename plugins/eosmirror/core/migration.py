"""Taking over progress (migrate) and moving it by hand (reset): the pure half.

A migration or reset sets the mirror's progress of each target partition to a new next SOURCE
offset and writes, in the same transaction, the mapping "source offset <new> -> the current target
end" as the partition's offset sync (an empty sync: nothing was copied by eosmirror below it) and
one :class:`AuditRecord` to the mirror's state topic. The audit record has its own key
(``audit/<ms>/<id>``) so generation reads (key ``generation``) ignore it and compaction keeps every
record.

The decisions here are pure functions over plain values so they are unit-tested without brokers;
``driver/migrate.py`` gathers the values and writes.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

AUDIT_KEY_PREFIX = b"audit/"
DEFAULT_TAIL_CHECK = 100
MM2_CONNECTOR = "MirrorSourceConnector"


class Refusal(ValueError):
    """The change cannot be proven safe; nothing was written. The text says what to do instead."""


@dataclass(frozen=True)
class PartitionChange:
    source_topic: str
    target_topic: str
    partition: int
    old: int | None          # the mirror's progress before (None: it never had any)
    new: int                 # the next source offset eosmirror copies
    target_end: int          # where the first record eosmirror copies lands on the target


@dataclass(frozen=True)
class AuditRecord:
    action: str              # "migrate", "reset", "reverse" (driver/reverse.py) or "resume" (driver/resume.py)
    mirror: str
    origin: str              # what from: "mm2:<alias>", "group:<name>", "earliest", "latest", "offsets"
    who: str                 # the OS user, or the Airflow run id
    at_ms: int
    partitions: tuple[PartitionChange, ...] = field(default=())
    note: str = ""

    def key(self, unique: str) -> bytes:
        return AUDIT_KEY_PREFIX + f"{self.at_ms}/{unique}".encode()

    def encode(self) -> bytes:
        data = asdict(self)
        data["v"] = 1
        return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()

    @staticmethod
    def decode(raw: bytes) -> "AuditRecord":
        data = json.loads(raw)
        changes = tuple(PartitionChange(**c) for c in data.get("partitions", ()))
        return AuditRecord(action=data["action"], mirror=data["mirror"], origin=data["origin"], who=data["who"],
                           at_ms=int(data["at_ms"]), partitions=changes, note=data.get("note", ""))


def is_audit_key(key: bytes | None) -> bool:
    return key is not None and key.startswith(AUDIT_KEY_PREFIX)


def taken_over_at(records: list[AuditRecord], target_topic: str, partition: int) -> AuditRecord | None:
    """The last migration that set this partition's progress (what translation names as the switch)."""
    found = None
    for record in records:
        if record.action == "migrate" and any(c.target_topic == target_topic and c.partition == partition
                                              for c in record.partitions):
            found = record
    return found


def last_change(records: list[AuditRecord], target_topic: str, partition: int, new: int | None = None
                ) -> tuple[AuditRecord, PartitionChange] | None:
    """The last migration or reset that set this partition's progress (to ``new``, when given: the
    one where its offset map restarts), and its change there."""
    found = None
    for record in records:
        for change in record.partitions:
            if change.target_topic == target_topic and change.partition == partition and new in (None, change.new):
                found = (record, change)
    return found


def taken_over_below(records: list[AuditRecord], target_topic: str, partition: int, first_source: int | None
                     ) -> tuple[int, str] | None:
    """(target offset, origin) below which a partition's records were copied before eosmirror took
    over: the last migration of the partition, if the mirror's offset-sync chain starts where it did."""
    record = taken_over_at(records, target_topic, partition)
    if record is None:
        return None
    change = next(c for c in record.partitions if c.target_topic == target_topic and c.partition == partition)
    if first_source is not None and first_source != change.new:
        return None
    return change.target_end, record.origin


# The way back's progress moves (driver/reverse.py, driver/resume.py): each starts a mirror after records
# that are not its to copy, and after records on its target that are that cluster's own.
WAY_BACK_ACTIONS = ("reverse", "resume")


@dataclass(frozen=True)
class WayBackGaps:
    """One partition's ranges that the way back left outside the mirror's copies, for verify: ``own``,
    target offsets [lo, hi) holding that cluster's own records (the old source's before the reverse
    mirror started; what the new primary received while it was the primary, before the resume; what
    the old source received after the switch back, before the next reverse), and ``skipped``, source
    offsets [lo, hi) the mirror did not copy on purpose (what came from the other side, and the
    divergence)."""

    own: tuple[tuple[int, int], ...] = ()
    skipped: tuple[tuple[int, int], ...] = ()

    def own_holds(self, offset: int) -> bool:
        return any(lo <= offset < hi for lo, hi in self.own)

    def skips(self, offset: int) -> bool:
        return any(lo <= offset < hi for lo, hi in self.skipped)


def way_back_gaps(records: list[AuditRecord], target_topic: str, partition: int, ordered: list[Any]) -> WayBackGaps:
    """The gaps before each of the partition's offset syncs (``ordered``: in source order, as
    ``PartitionSyncs.ordered``) that a reverse or resume wrote: its empty sync (source offset ->
    target end) matches the audit record's change (``new``, ``target_end``). The gap runs from the end
    of the syncs before it (target and source; 0 and the boundary itself when none precede it)."""
    marks = {(c.new, c.target_end) for r in records if r.action in WAY_BACK_ACTIONS for c in r.partitions
             if c.target_topic == target_topic and c.partition == partition}
    own, skipped = [], []
    for i, sync in enumerate(ordered):
        if not (sync.is_boundary and (sync.source_start, sync.target_base) in marks):
            continue
        before = ordered[:i]
        low = max((s.target_next for s in before), default=0)
        if low < sync.target_base:
            own.append((low, sync.target_base))
        start = max((s.source_end for s in before), default=sync.source_start)
        if start < sync.source_start:
            skipped.append((start, sync.source_start))
    return WayBackGaps(tuple(own), tuple(skipped))


def parse_origin(text: str, default_alias: str | None) -> tuple[str, str]:
    """``--from`` value -> (kind, argument): ("group", name), ("mm2", alias)."""
    if text.startswith("group:") and text[len("group:"):].strip():
        return "group", text[len("group:"):].strip()
    if text == "mm2" or text.startswith("mm2:"):
        alias = text[len("mm2:"):].strip() if text.startswith("mm2:") else (default_alias or "")
        if not alias:
            raise Refusal("--from mm2 needs the MM2 source cluster alias: the mirror has no `source_alias`, so "
                          "write --from mm2:<alias> (the alias in mm2.properties' `clusters`)")
        return "mm2", alias
    if text == "target-end" or re.fullmatch(r"target-end:\d+", text):
        checked = text.partition(":")[2] or str(DEFAULT_TAIL_CHECK)
        if not 1 <= int(checked) <= 100_000:
            raise Refusal(f"--from {text!r}: the number of records checked must be 1 to 100000")
        return "target-end", checked
    raise Refusal(f"--from {text!r} is not understood; expected group:<consumer group>, mm2 (or mm2:<alias>) or "
                  f"target-end (or target-end:<records checked>)")


def parse_reset_targets(values: list[str]) -> tuple[str, dict[tuple[str, int], int]]:
    """``--to`` values: ("earliest"|"latest", {}) or ("offsets", {(source topic, partition): offset})."""
    if len(values) == 1 and values[0] in ("earliest", "latest"):
        return values[0], {}
    wanted: dict[tuple[str, int], int] = {}
    for value in values:
        match = re.fullmatch(r"(.+):(\d+)=(\d+)", value)
        if not match:
            raise Refusal(f"--to {value!r} is not understood; expected earliest, latest or "
                          f"<source topic>:<partition>=<offset> (one or more)")
        wanted[(match.group(1), int(match.group(2)))] = int(match.group(3))
    return "offsets", wanted


def mm2_offsets(records: list[tuple[bytes | None, bytes | None]], alias: str) -> dict[tuple[str, int], int]:
    """MM2's last copied source offset per source partition, from its Connect offsets topic.

    Format (apache/kafka connect/mirror MirrorSourceTask.convertRecord and MirrorUtils.wrapPartition /
    wrapOffset, Kafka 4.x): key = JSON ``["MirrorSourceConnector", {"cluster": <source alias>,
    "partition": <int>, "topic": <source topic>}]``, value = JSON ``{"offset": <offset of the last
    record copied>}``; on restart MirrorSourceTask seeks to offset + 1. A null value deletes the
    partition's offset. Later records win (it is a compacted log).
    """
    found: dict[tuple[str, int], int] = {}
    for key, value in records:
        try:
            connector, part = json.loads(key or b"null")
        except (TypeError, ValueError):
            continue   # another connector's key shape
        if connector != MM2_CONNECTOR or not isinstance(part, dict) or part.get("cluster") != alias:
            continue
        where = (str(part.get("topic")), int(part.get("partition", -1)))
        if value is None:
            found.pop(where, None)
            continue
        found[where] = int(json.loads(value)["offset"])
    return found


def continuation(tail: list[tuple[Any, ...]], source: list[tuple[int, tuple[Any, ...]]], where: str) -> int:
    """``--from target-end``: the source offset just after the target's last records.

    ``tail``: the contents (key, value, headers) of the target's last committed records, in order;
    ``source``: (offset, content) of committed source records, in order, from a point at or before
    where the tail can start. The tail must match exactly one run of consecutive committed source
    records; the answer is the offset after that run's last record. No match or more than one is a
    refusal: the seam cannot be proven.
    """
    n = len(tail)
    contents = [c for _, c in source]
    starts = [i for i in range(len(source) - n + 1) if contents[i:i + n] == tail]
    if not starts:
        raise Refusal(f"{where}: the target's last {n} records are not a run of consecutive committed source "
                      f"records: the target is not a copy of the source (or the source lost them). Re-copy")
    if len(starts) > 1:
        raise Refusal(f"{where}: the target's last {n} records occur {len(starts)} times in the source: the seam is "
                      f"ambiguous. Check more records (--from target-end:<N> with a larger N)")
    return source[starts[0] + n - 1][0] + 1


def mm2_running(records: list[tuple[bytes | None, bytes | None]]) -> list[str]:
    """MirrorSourceConnector tasks and connectors whose last status (MM2's Connect status topic
    ``mm2-status.<alias>.internal``: key ``status-task-<connector>-<n>`` / ``status-connector-<connector>``,
    value JSON with ``state``) is RUNNING. A worker that stops cleanly writes UNASSIGNED; one that was
    killed leaves RUNNING behind."""
    latest: dict[str, str] = {}
    for key, value in records:
        name = (key or b"").decode(errors="replace")
        if MM2_CONNECTOR not in name:
            continue
        try:
            latest[name] = str(json.loads(value)["state"]) if value else "DELETED"
        except (TypeError, ValueError, KeyError):
            continue
    return sorted(name for name, state in latest.items() if state == "RUNNING")


def moved(first: dict[Any, Any], second: dict[Any, Any]) -> dict[Any, Any]:
    """Entries that differ between two looks (the check window): {key: (first, second)}."""
    return {k: (first.get(k), second.get(k)) for k in set(first) | set(second) if first.get(k) != second.get(k)}


def check_in_source_range(changes: list[PartitionChange], log_start: dict[tuple[str, int], int],
                          last_stable: dict[tuple[str, int], int]) -> None:
    """A new progress must lie in [source log start, source last stable offset]."""
    for c in changes:
        low, high = log_start[(c.source_topic, c.partition)], last_stable[(c.source_topic, c.partition)]
        if not low <= c.new <= high:
            raise Refusal(f"{c.source_topic}[{c.partition}]: the new progress {c.new} lies outside the source "
                          f"partition's committed offsets [{low}, {high}]"
                          + (": the records below it were deleted before eosmirror could copy them"
                             if c.new < low else ""))


def check_counts(counts: dict[tuple[str, int], tuple[int, int]], origin: str) -> None:
    """MM2 was exact only if each target partition holds exactly as many committed records as the
    source holds below MM2's offset ({target partition: (source committed count, target count)})."""
    extra = {tp: c for tp, c in counts.items() if c[0] != c[1]}
    if not extra:
        return
    shown = ", ".join(f"{t}[{p}]: source {s} vs target {n}" for (t, p), (s, n) in sorted(extra.items())[:5])
    raise Refusal(f"{origin}: the target does not hold exactly the committed source records below MM2's offsets "
                  f"({shown}). MM2 ran at-least-once (or something else wrote to the target), so a take-over "
                  f"cannot be proven exact. Either re-copy into fresh target topics (start_from: earliest), or "
                  f"take the target as it is with `eosmirror migrate <mirror> --from target-end[:<N>]`: it continues "
                  f"after the target's last N records, checked record by record against the source (duplicates "
                  f"already on the target stay)")


def format_changes(changes: list[PartitionChange]) -> str:
    lines = [f"  {'source partition':<40} {'old progress':>12} {'new progress':>12} {'target end':>10}"]
    for c in changes:
        old = "-" if c.old is None else str(c.old)
        lines.append(f"  {f'{c.source_topic}[{c.partition}]':<40} {old:>12} {c.new:>12} {c.target_end:>10}")
    return "\n".join(lines)


def format_history(records: list[AuditRecord]) -> str:
    import datetime as dt

    if not records:
        return "no migrations or resets recorded"
    out = []
    for r in records:
        when = dt.datetime.fromtimestamp(r.at_ms / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        out.append(f"{when}  {r.action} from {r.origin} by {r.who}" + (f" ({r.note})" if r.note else ""))
        out.append(format_changes(list(r.partitions)))
    return "\n".join(out)
