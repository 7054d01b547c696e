"""``eosmirror migrate`` and ``eosmirror reset``: the steps of ``driver/migrate.py`` in order, per kind."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Callable

from eosmirror.core import migration
from eosmirror.core.config import MirrorConfig
from eosmirror.core.migration import PartitionChange, Refusal
from eosmirror.driver.migrate import CHECK_WINDOW_SECONDS, Look, Migration, OriginReader, RefusedError
from eosmirror.kafka import readers
from eosmirror.kafka.offsets import list_offsets_of


def _outcome(mig: Migration, action: str, origin: str, changes: list[PartitionChange], dry_run: bool,
             notes: list[str]) -> dict[str, Any]:
    return {"mirror": mig.mirror.name, "action": action, "origin": origin, "who": mig.who, "dry_run": dry_run,
            "partitions": [asdict(c) for c in changes], "notes": notes}


def take_over(mirror: MirrorConfig, origin_text: str, dry_run: bool = False, who: str | None = None,
              window: float = CHECK_WINDOW_SECONDS, mm2_stopped: bool = False) -> dict[str, Any]:
    """Seed the mirror's progress from MM2 (``mm2``, ``mm2:<alias>``), a group (``group:<name>``) or the
    target as it is (``target-end``, ``target-end:<records checked>``)."""
    try:
        kind, argument = migration.parse_origin(origin_text, mirror.source_alias)
    except Refusal as exc:
        raise RefusedError(f"mirror {mirror.name!r}: {exc}") from None
    mig = Migration(mirror, who, window)
    readers_of: dict[str, Callable[[], OriginReader]] = {
        "group": lambda: mig.group_reader(argument), "mm2": lambda: mig.mm2_reader(argument),
        "target-end": lambda: (lambda: {})}
    reader = readers_of[kind]()
    what = {"group": f"a consumer of group {argument}", "mm2": "MirrorMaker 2"}.get(kind, "another copier")
    if kind == "mm2" and not mm2_stopped:
        mig.refuse_if_mm2_runs(argument)
    agreed = mig.steady_look(reader, what)
    notes: list[str] = []
    wanted = {tp: off for tp, off in agreed.origin.items() if tp in mig.target_of}
    if kind == "mm2":
        wanted = _mm2_progress(mig, agreed, wanted, argument, notes)
    elif kind == "target-end":
        wanted = {tp: _continuation(mig, agreed, tp, int(argument), notes) for tp in mig.source_tps}
    elif not wanted:
        raise RefusedError(f"mirror {mirror.name!r}: group {argument} has no committed offset on any partition the "
                           f"mirror copies. Nothing was written.")
    else:
        notes += [f"{t}[{p}]: group {argument} has no committed offset; left as it is"
                  for (t, p) in mig.source_tps if (t, p) not in wanted]
    changes = mig.changes(wanted, agreed)
    _check(mig, changes)
    ahead = [c for c in changes if c.old is not None and c.old != c.new]
    if ahead:
        held = ", ".join(f"{c.source_topic}[{c.partition}]={c.old}" for c in ahead[:4])
        raise RefusedError(f"mirror {mirror.name!r} already has progress ({held}): a migration only seeds a mirror "
                           f"that has not copied these partitions. To move existing progress use `eosmirror reset`. "
                           f"Nothing was written.")
    if kind == "mm2":
        notes += _prove_mm2_exact(mig, changes)
    origin = f"{kind}:{argument}"
    if not dry_run:
        mig.commit("migrate", origin, changes, agreed, reader, note="; ".join(notes[:3]))
    return _outcome(mig, "migrate", origin, changes, dry_run, notes)


def _continuation(mig: Migration, agreed: Look, source_tp: tuple[str, int], checked: int, notes: list[str]) -> int:
    """``--from target-end``: the source offset after the target's last ``checked`` records, proven by
    matching them record by record (key, value, headers) to consecutive committed source records."""
    from confluent_kafka.admin import OffsetSpec

    (source_topic, p), (target_topic, _) = source_tp, mig.target_of[source_tp]
    where = f"{source_topic}[{p}] -> {target_topic}[{p}]"
    if target_topic not in mig.existing:
        raise RefusedError(f"mirror {mig.mirror.name!r}: {where}: the target topic does not exist; nothing to take "
                           f"over. Nothing was written.")
    low, _ = readers.watermarks(mig.target, target_topic, p)
    high = agreed.target_high[(target_topic, p)]
    start = high
    tail: list[readers.Record] = []
    while len(tail) < checked and start > low:
        start = max(low, start - 4 * checked)
        tail = readers.read_range(mig.target, target_topic, p, start, high)[-checked:]
    source_low, source_end = readers.watermarks(mig.source, source_topic, p)
    if not tail:
        notes.append(f"{where}: the target holds no record; starts at the source log start {source_low}")
        return source_low
    at_time = list_offsets_of(mig.source, {source_tp: OffsetSpec.for_timestamp(tail[0].timestamp)})[source_tp]
    found = readers.read_range(mig.source, source_topic, p, at_time if at_time >= 0 else source_low, source_end)
    try:
        new = migration.continuation([(r.key, r.value, r.headers) for r in tail],
                                     [(r.offset, (r.key, r.value, r.headers)) for r in found], where)
    except Refusal as exc:
        raise RefusedError(f"mirror {mig.mirror.name!r}: {exc}. Nothing was written.") from None
    notes.append(f"{where}: the target's last {len(tail)} records match source offsets up to {new - 1} record by "
                 f"record; older target records are taken as they are (not checked)")
    return new


def _check(mig: Migration, changes: list[PartitionChange]) -> None:
    low, high = mig.source_offsets()
    try:
        migration.check_in_source_range(changes, low, high)
    except Refusal as exc:
        raise RefusedError(f"mirror {mig.mirror.name!r}: {exc}. Nothing was written.") from None


def _mm2_progress(mig: Migration, agreed: Look, wanted: dict[tuple[str, int], int], alias: str,
                  notes: list[str]) -> dict[tuple[str, int], int]:
    """MM2's offsets for the mirror's partitions; refuses when MM2's topics are not the mirror's."""
    m = mig.mirror
    if not wanted:
        theirs = sorted({t for t, _ in agreed.origin})
        raise RefusedError(f"mirror {m.name!r}: MirrorMaker 2 ({alias}) copied none of the mirror's source topics "
                           f"({', '.join(sorted(mig.pair_of)) or 'none'}); its offsets name "
                           f"{', '.join(theirs[:6]) or 'no topic'}. Check the mirror's `topics` and the alias. "
                           f"Nothing was written.")
    missing = sorted({mig.target_of[tp][0] for tp in wanted if mig.target_of[tp][0] not in mig.existing})
    if missing:
        raise RefusedError(f"mirror {m.name!r}: MirrorMaker 2 copied {', '.join(sorted({t for t, _ in wanted}))} but "
                           f"the mirror's target topics {', '.join(missing)} do not exist: MM2 named its target "
                           f"topics differently. Set the mirror's replication_policy/source_alias/"
                           f"replication_separator to MM2's (`eosmirror import-mm2` reads them from mm2.properties). "
                           f"Nothing was written.")
    for tp in mig.source_tps:
        if tp not in wanted:
            target_tp = mig.target_of[tp]
            if agreed.target_high.get(target_tp, 0) != 0:
                raise RefusedError(f"mirror {m.name!r}: {target_tp[0]}[{target_tp[1]}] holds records but MirrorMaker 2 "
                                   f"has no offset for {tp[0]}[{tp[1]}]: who wrote them? Nothing was written.")
            notes.append(f"{tp[0]}[{tp[1]}]: MirrorMaker 2 copied nothing; starts at the source log start")
    low, _ = mig.source_offsets()
    return {**{tp: low[tp] for tp in mig.source_tps if tp not in wanted}, **wanted}


def _prove_mm2_exact(mig: Migration, changes: list[PartitionChange]) -> list[str]:
    """Step 5: every target partition holds exactly the committed source records below MM2's offset,
    in order (key, value, headers), or the take-over is refused as not provably exact."""
    source, target = mig.source, mig.target
    counts: dict[tuple[str, int], tuple[int, int]] = {}
    for c in changes:
        source_low, _ = readers.watermarks(source, c.source_topic, c.partition)
        target_low, _ = readers.watermarks(target, c.target_topic, c.partition)
        if source_low != 0 or target_low != 0:
            raise RefusedError(
                f"mirror {mig.mirror.name!r}: {c.source_topic}[{c.partition}] starts at {source_low} on the source "
                f"and {c.target_topic}[{c.partition}] at {target_low} on the target (retention deleted records), so "
                f"MirrorMaker 2's copy cannot be proven exact record by record. Re-copy into fresh target topics, "
                f"or take the target as it is with `eosmirror migrate {mig.mirror.name} --from target-end` (the "
                f"seam is checked record by record on the last records). Nothing was written.")
        copied = readers.read_range(source, c.source_topic, c.partition, 0, c.new,
                                    client_id=f"eosmirror-{mig.mirror.name}-prove")
        held = readers.read_range(target, c.target_topic, c.partition, 0, c.target_end,
                                  client_id=f"eosmirror-{mig.mirror.name}-prove")
        counts[(c.target_topic, c.partition)] = (len(copied), len(held))
        if len(copied) == len(held):
            for a, b in zip(copied, held):
                if (a.key, a.value, a.headers) != (b.key, b.value, b.headers):
                    counts[(c.target_topic, c.partition)] = (len(copied), -1)   # content differs
                    break
    try:
        migration.check_counts(counts, "MirrorMaker 2")
    except Refusal as exc:
        raise RefusedError(f"mirror {mig.mirror.name!r}: {exc}. Nothing was written.") from None
    total = sum(s for s, _ in counts.values())
    return [f"verified: the target holds exactly the {total} committed source records MirrorMaker 2 copied, "
            f"record by record"]


def reset(mirror: MirrorConfig, to: list[str], dry_run: bool = False, who: str | None = None,
          window: float = CHECK_WINDOW_SECONDS) -> dict[str, Any]:
    """Move the mirror's progress by hand: ``earliest``, ``latest`` or ``<topic>:<partition>=<offset>``."""
    try:
        kind, wanted = migration.parse_reset_targets(to)
    except Refusal as exc:
        raise RefusedError(f"mirror {mirror.name!r}: {exc}") from None
    mig = Migration(mirror, who, window)
    unknown = sorted(f"{t}:{p}" for t, p in wanted if (t, p) not in mig.target_of)
    if unknown:
        raise RefusedError(f"mirror {mirror.name!r} does not copy {', '.join(unknown)} (it copies "
                           f"{', '.join(sorted(mig.pair_of))}). Nothing was written.")
    agreed = mig.steady_look(lambda: {}, "a copier")
    low, high = mig.source_offsets()
    chosen = {"earliest": low, "latest": high}.get(kind, wanted)
    changes = [c for c in mig.changes(dict(chosen), agreed) if c.old != c.new]
    _check(mig, changes)
    if changes and not dry_run:
        mig.commit("reset", kind if kind != "offsets" else "offsets", changes, agreed, lambda: {})
    notes = [] if changes else ["every partition is already there: nothing to change"]
    return _outcome(mig, "reset", kind, changes, dry_run, notes)


def format_outcome(outcome: dict[str, Any]) -> str:
    changes = [PartitionChange(**c) for c in outcome["partitions"]]
    head = (f"mirror {outcome['mirror']}: {outcome['action']} from {outcome['origin']} by {outcome['who']}"
            + (" -- DRY RUN, nothing written" if outcome["dry_run"] else " -- committed, audit record written"))
    return "\n".join([head, migration.format_changes(changes)] + [f"  note: {n}" for n in outcome["notes"]])
