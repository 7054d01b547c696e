"""``eosmirror migrate`` and ``eosmirror reset``: the steps of ``driver/migrate.py`` in order, per kind."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from eosmirror.core import migration
from eosmirror.core.config import MirrorConfig
from eosmirror.core.migration import PartitionChange, Refusal
from eosmirror.driver.migrate import CHECK_WINDOW_SECONDS, Migration, RefusedError
from eosmirror.kafka import readers


def _outcome(mig: Migration, action: str, origin: str, changes: list[PartitionChange], dry_run: bool,
             notes: list[str]) -> dict[str, Any]:
    return {"mirror": mig.mirror.name, "action": action, "origin": origin, "who": mig.who, "dry_run": dry_run,
            "partitions": [asdict(c) for c in changes], "notes": notes}


def take_over(mirror: MirrorConfig, origin_text: str, dry_run: bool = False, who: str | None = None,
              window: float = CHECK_WINDOW_SECONDS) -> dict[str, Any]:
    """Seed the mirror's progress from MM2 (``mm2``, ``mm2:<alias>``) or a group (``group:<name>``)."""
    try:
        kind, argument = migration.parse_origin(origin_text, mirror.source_alias)
    except Refusal as exc:
        raise RefusedError(f"mirror {mirror.name!r}: {exc}") from None
    mig = Migration(mirror, who, window)
    reader = mig.group_reader(argument) if kind == "group" else mig.mm2_reader(argument)
    what = f"a consumer of group {argument}" if kind == "group" else "MirrorMaker 2"
    if kind == "mm2":
        mig.refuse_if_mm2_runs(argument)
    agreed = mig.steady_look(reader, what)
    notes: list[str] = []
    wanted = {tp: off for tp, off in agreed.origin.items() if tp in mig.target_of}
    if kind == "mm2":
        wanted = _mm2_progress(mig, agreed, wanted, argument, notes)
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


def _check(mig: Migration, changes: list[PartitionChange]) -> None:
    low, high = mig.source_offsets()
    try:
        migration.check_in_source_range(changes, low, high)
    except Refusal as exc:
        raise RefusedError(f"mirror {mig.mirror.name!r}: {exc}. Nothing was written.") from None


def _mm2_progress(mig: Migration, agreed: Any, wanted: dict[tuple[str, int], int], alias: str,
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
        source_low, _ = readers.watermarks(source.settings, c.source_topic, c.partition, source.label)
        target_low, _ = readers.watermarks(target.settings, c.target_topic, c.partition, target.label)
        if source_low != 0 or target_low != 0:
            raise RefusedError(
                f"mirror {mig.mirror.name!r}: {c.source_topic}[{c.partition}] starts at {source_low} on the source "
                f"and {c.target_topic}[{c.partition}] at {target_low} on the target (retention deleted records), so "
                f"MirrorMaker 2's copy cannot be proven exact record by record. Re-copy into fresh target topics, "
                f"or accept the target as it is with `eosmirror reset {mig.mirror.name} --to "
                f"{c.source_topic}:{c.partition}={c.new}` after checking the last records by hand. Nothing was written.")
        copied = readers.read_range(source.settings, c.source_topic, c.partition, 0, c.new, source.label,
                                    client_id=f"eosmirror-{mig.mirror.name}-prove")
        held = readers.read_range(target.settings, c.target_topic, c.partition, 0, c.target_end, target.label,
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
