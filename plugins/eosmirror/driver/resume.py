"""The end of the way back (`eosmirror resume`; docs/disaster-recovery.md): after the switch back
(`eosmirror switchover <mirror>__reverse` proved the old source holds everything the new primary
received), the forward mirror continues after the records the reverse mirror copied.

Runs for an identity mirror in ``reversed`` whose reverse mirror is ``switched-over`` (or continues a
``resuming`` one). Steps, run by the one transition runner (driver/transition.py), each idempotent, so a
resume that failed half-way is re-triggered and continues:

  1. Refuse what does not fit (exit 2, nothing written): the mirror's state, its reverse mirror's state.
  2. Where the forward mirror continues, per old-source partition, from the reverse mirror's newest offset
     sync (on the old source; exact, not the old source's current end: producers may write there since
     the switch back, and the forward mirror must copy those): the old-source offset right after its
     last copy, and the new primary's offset where it stopped (its progress: the new primary's end at the
     switch back). Record ``resuming`` with them (a re-run uses the recorded points).
  3. The forward mirror's progress on each partition becomes that old-source offset, written as `eosmirror
     reset` writes progress (offset sync "that offset -> the new primary's end" + audit record ``resume``,
     one transaction), where it is not there yet. Records that came from the new primary lie below the
     new progress: they are never copied forward again (no cycle). Refused (before step 2 records
     anything, and again after the check that nothing moves) when the new primary holds committed
     records after the switch-back point (a producer kept writing there: those records are on neither
     side's offset map and not on the old source), unless the operator accepts leaving them there.
  4. Retire the reverse mirror (state ``retired`` on the old source): its runs are refused, and the next
     `eosmirror reverse <mirror>` after a later promotion prepares it again at that promotion's point.
  5. Write rights (with ``sync_topic_acls``; core/writerights.py), from the changes the switch recorded: give
     back on the old source what `reverse` took away (the switch back did it already: found there), and
     take from the target the grants the switchover or promotion made (the mirror alone writes it again).
     Optional by design: without the right to change ACLs the outcome names each change to make by hand
     (exit 6).
  6. Record ``mirroring`` again (since now, by whom, "resumed after the switch back"), with the changes
     still to undo, if any.
"""

from __future__ import annotations

import getpass
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from eosmirror.core import migration, transitions
from eosmirror.core import writerights as rules
from eosmirror.core.config import MirrorConfig
from eosmirror.core.errors import EXIT_OK, ConfigError, EosMirrorError
from eosmirror.core.migration import PartitionChange, Refusal
from eosmirror.core.mirrorstate import MirrorState, PartitionPoint, Phase
from eosmirror.core.transitions import Command, Mode
from eosmirror.driver.migrate import Migration, RefusedError
from eosmirror.driver.transition import Transition
from eosmirror.driver.writerights import Rights
from eosmirror.kafka import offsets, readers, state, syncstore
from eosmirror.kafka.cluster import Cluster

log = logging.getLogger(__name__)
RESUMED_NOTE = "resumed after the switch back"


@dataclass
class ResumeOutcome:
    mirror: str
    reverse_mirror: str
    state: MirrorState
    points: tuple[PartitionPoint, ...]
    progress: list[PartitionChange]
    run: Transition
    notes: list[str] = field(default_factory=list)
    recovery_seconds: float | None = None
    rights: Rights = field(default_factory=Rights)

    @property
    def exit_code(self) -> int:
        """6 when a step optional by design (the write rights) did not run."""
        return self.run.exit_code(EXIT_OK)

    def lines(self) -> list[str]:
        moved = {(c.source_topic, c.partition): c for c in self.progress}
        out = []
        for p in self.points:
            c = moved.get((p.source_topic, p.partition))
            was = f" (was {c.old})" if c is not None and c.old is not None else ""
            out.append(f"  {p.label}: the forward mirror continues at old-source offset {p.progress}{was}, right "
                       f"after the reverse mirror's last copy; its copies land on {p.target_topic}[{p.partition}] "
                       f"from {c.target_end if c is not None else p.target_end}"
                       + ("" if c is not None else " (already there)"))
        out += [f"  {a}" for a in self.notes]
        out += [f"  write rights: {line}" for line in self.rights.lines]
        out += [f"  {s.name} DID NOT RUN: {s.why}" for s in self.run.not_run]
        out.append(f"mirror {self.mirror}: {self.state.phase.value} ({RESUMED_NOTE}); {self.reverse_mirror} retired. "
                   f"Next: `eosmirror run {self.mirror}` (or its DAG eosmirror__{self.mirror}) copies what the old "
                   f"source received since the switch back")
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"mirror": self.mirror, "kind": "resume", "reverse_mirror": self.reverse_mirror,
                "state": self.state.phase.value, "since_ms": self.state.since_ms, "by": self.state.by,
                "steps": self.run.as_list(), "notes": self.notes, "recovery_seconds": self.recovery_seconds,
                "write_rights": self.rights.as_dict(), "not_run": [s.name for s in self.run.not_run],
                "exit_code": self.exit_code,
                "partitions": [{"source_topic": p.source_topic, "target_topic": p.target_topic,
                                "partition": p.partition, "start": p.progress, "target_end": p.target_end}
                               for p in self.points],
                "progress": [{"topic": c.source_topic, "partition": c.partition, "old": c.old, "new": c.new,
                              "target_end": c.target_end} for c in self.progress],
                "report": self.lines()}


def continue_points(old: Cluster, back: MirrorConfig, switched: MirrorState) -> tuple[PartitionPoint, ...]:
    """Step 2: per partition the switch back recorded, the reverse mirror's newest offset sync on the old
    source gives the old-source offset after its last copy (``target_next``; for the empty sync `reverse`
    wrote where nothing was copied since, the old source's end then) and the new-primary offset where it
    stopped (``source_end``: its committed progress, which the switch back proved equal to the new
    primary's end). A partition without any sync received no copy: it continues at 0."""
    newest = syncstore.latest(old, back.name, back.progress_group).newest
    points = []
    for p in switched.points:             # the reverse mirror's points: source = new primary, target = old source
        sync = newest.get((p.target_topic, p.partition))
        stopped = sync.source_end if sync is not None else (p.progress or 0)
        if p.progress is not None and stopped != p.progress:
            raise EosMirrorError(f"{back.name}: the newest offset sync of {p.target_topic}[{p.partition}] ends at "
                                 f"{stopped}, but the switch back recorded progress {p.progress}: the reverse "
                                 f"mirror's offset map is not what the switch back saw; nothing was written")
        points.append(PartitionPoint(source_topic=p.target_topic, target_topic=p.source_topic, partition=p.partition,
                                     target_end=stopped, progress=sync.target_next if sync is not None else 0))
    return tuple(points)


def stray_records(new: Cluster, mirror: MirrorConfig, ends: dict[tuple[str, int], int],
                  points: tuple[PartitionPoint, ...]) -> list[str]:
    """Committed records on the new primary after the switch-back point (``ends``: its high watermarks
    now, past that point): written there after the switch back. Aborted records and markers are no records."""
    ranges = {(p.target_topic, p.partition): (p.target_end, ends[(p.target_topic, p.partition)]) for p in points
              if ends.get((p.target_topic, p.partition), 0) > p.target_end}
    if not ranges:
        return []
    found = readers.read_ranges(new, ranges, client_id=f"eosmirror-{mirror.name}-resume-reader",
                                group_id=mirror.progress_group)
    return [f"{t}[{k}]: {len(found[(t, k)])} record(s) at offsets {found[(t, k)][0].offset}.."
            f"{found[(t, k)][-1].offset}" for (t, k) in sorted(ranges) if found.get((t, k))]


def refuse_stray(stray: list[str], mirror: str, accept: bool) -> list[str]:
    """Records the new primary received after the switch back are on neither side's offset map and not
    on the old source: refused (exit 2) unless the operator accepts leaving them there (``accept``); then
    they are named in the report and the forward mirror's copies land after them."""
    if stray and not accept:
        raise RefusedError(f"mirror {mirror!r}: the new primary received records after the switch back "
                           f"({'; '.join(stray[:5])}): they are not on the old source and no offset map holds them, "
                           f"so they would stay behind unnoticed. Stop every producer of the new primary (the switch "
                           f"back moved them to the old source), produce those records to the old source yourself if "
                           f"they matter, then resume with --accept-records-after-switch-back (DAG Param "
                           f"accept_records_after_switch_back): the forward mirror's copies then land after them. "
                           f"Nothing was written.")
    return [f"left on the new primary, not on the old source (written after the switch back): {line}" for line in stray]


def move_progress(mirror: MirrorConfig, back: MirrorConfig, points: tuple[PartitionPoint, ...], by: str,
                  window: float, accept: bool = False) -> tuple[list[PartitionChange], list[str]]:
    """Step 3: (changes written, notes). Writes nothing when every partition is at its point already."""
    mig = Migration(mirror, who=by, window=window)
    by_source = {(p.source_topic, p.partition): p for p in points}
    notes = [f"{t}[{k}] is not mirrored by {mirror.name} any more: left alone" for t, k in sorted(by_source)
             if (t, k) not in mig.target_of]
    agreed = mig.steady_look(lambda: {}, "a producer of the new primary")
    changes = mig.changes({tp: int(p.progress or 0) for tp, p in by_source.items() if tp in mig.target_of}, agreed)
    backwards = [c for c in changes if c.old is not None and c.old > c.new]
    if backwards:
        raise RefusedError(f"mirror {mirror.name!r}: its progress is already past the reverse mirror's last copy "
                           f"({', '.join(f'{c.source_topic}[{c.partition}] {c.old} > {c.new}' for c in backwards[:5])})"
                           f": a run copied after the switch back; it is never moved back. Nothing was written.")
    todo = [c for c in changes if c.old != c.new]
    if not todo:
        return [], notes + [f"{mirror.name}: progress already after the reverse mirror's last copy"]
    notes += refuse_stray(stray_records(mig.target, mirror, agreed.target_high, points), mirror.name, accept)
    low, high = mig.source_offsets()
    try:
        migration.check_in_source_range(todo, low, high)
    except Refusal as exc:
        raise RefusedError(f"mirror {mirror.name!r}: {exc}. Nothing was written.") from None
    mig.commit("resume", f"switch back of {back.name}", todo, agreed, lambda: {},
               note=f"the forward mirror continues after the records {back.name} copied: they never come forward again")
    return todo, notes


def resume(mirror: MirrorConfig, window: float = 3.0, by: str | None = None, say: Callable[[str], None] = log.info,
           accept_stray: bool = False, started: float | None = None) -> ResumeOutcome:
    """Steps 1-5 of the module doc."""
    if not 0 < window <= 600:   # the "nothing moves" check: a Param or flag error, refused before any broker
        raise ConfigError(f"resume {mirror.name}: check seconds must be in (0, 600] (given {window:g})")
    back = mirror.reverse()                                                              # identity only
    by = by or f"cli:{getpass.getuser()}"
    new = Cluster.resolve("target", mirror.target, mirror.name)
    old = Cluster.resolve("source", mirror.source, mirror.name)
    run = Transition(Command.RESUME, mirror.name, say, started=started, by=by,
                     record_to=state.recorder(new, mirror.name, mirror.transactional_id_prefix), clusters=(old, new))
    current = state.read_mirror_state(new, mirror.name, mirror.progress_group)
    mode = run.check(current)                                                            # 1
    # The reverse mirror's state is on the old source: read only once the forward state may resume
    # (a promoted mirror's old source may well be down, and its refusal must not wait on it).
    back_state = state.read_mirror_state(old, back.name, back.progress_group)
    refused = transitions.resume_refusal(current, back_state, mirror.name)
    if refused:
        raise transitions.StateRefusedError(refused)
    if mode is Mode.CONTINUE:                                                            # 2
        points = current.points
        run.skip("where the forward mirror continues", "recorded by the unfinished resume this one continues")
        run.skip("record resuming", "recorded before")
    else:
        points = run.step("where the forward mirror continues", lambda: continue_points(old, back, back_state)) or ()
        # Before anything is written: records the new primary received after the switch back.
        refuse_stray(stray_records(new, mirror, _ends(new, points), points), mirror.name, accept_stray)
        # ``resuming``, with per partition where the forward mirror continues: ``progress`` the old source
        # offset right after the reverse mirror's last copy, ``target_end`` the new primary's end at the
        # switch back (its records below it went back to the old source and never come forward again).
        current = run.record(Phase.RESUMING, points, f"after the switch back of {back.name} ({back_state.describe()})",
                             current.rights)
    moved, notes = run.step("move the forward progress", lambda: move_progress(                      # 3
        mirror, back, points, by, window, accept_stray)) or ([], [])
    if back_state.phase is Phase.RETIRED:                                                # 4
        run.skip("retire the reverse mirror", f"retired already ({back_state.describe()})")
    else:
        transitions.start(Command.RETIRE, back_state, back.name)
        run.step("retire the reverse mirror", lambda: state.write_mirror_state(
            old, back.name, back.transactional_id_prefix, MirrorState(
                Phase.RETIRED, _now(), by, note=f"retired by `eosmirror resume {mirror.name}`: the forward mirror "
                                                f"continues after its last copy")))
    rights = Rights(audit_to=state.auditor(new, mirror.name, mirror.transactional_id_prefix, rules.AUDIT_ACTION,
                                           "resume", by))
    left = current.rights                                                                # 5
    if not mirror.sync_topic_acls:
        run.skip(rules.GIVE_BACK_STEP, rules.SYNC_OFF)
        run.skip(rules.TAKE_GRANTS_STEP, rules.SYNC_OFF)
    else:
        optional = "resume goes on without it; the outcome names the changes to make by hand"
        if run.step(rules.GIVE_BACK_STEP, lambda: rights.give_back(old, left, rules.OLD_SOURCE), optional) is not None:
            left = rules.without(left, rules.OLD_SOURCE)
        if run.step(rules.TAKE_GRANTS_STEP, lambda: rights.give_back(new, left, rules.NEW_PRIMARY), optional) is not None:
            left = rules.without(left, rules.NEW_PRIMARY)
    done = run.record(Phase.MIRRORING, note=RESUMED_NOTE, rights=left)                   # 6
    return ResumeOutcome(mirror.name, back.name, done, points, moved, run, notes, run.elapsed(), rights)


def _ends(new: Cluster, points: tuple[PartitionPoint, ...]) -> dict[tuple[str, int], int]:
    from confluent_kafka.admin import OffsetSpec

    return offsets.list_offsets_of(new, {(p.target_topic, p.partition): OffsetSpec.latest() for p in points})


def _now() -> int:
    return int(time.time() * 1000)
