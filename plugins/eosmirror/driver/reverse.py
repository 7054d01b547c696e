"""The way back after a promotion, first part (`eosmirror reverse`; docs/disaster-recovery.md).

Runs when the old source answers again, for an identity mirror in ``promoted`` or ``switched-over`` (a
planned switchover has the same way back: nothing diverged by construction, and the report shows it).
Steps, run by the one transition runner (driver/transition.py), each idempotent, so a reverse that
failed half-way is re-triggered and continues:

  1. Refuse what does not fit: a prefix mirror (before any broker), a state the table does not allow
     (``reversed`` repeats the steps, writing nothing twice), an unreachable old source.
  2. Wait (bounded, once) until no transaction is open on the old source's partitions of the
     promotion record (a refusal lists every partition still held, each with the command that clears
     it), read their last stable offsets, and record ``reversing`` with them: every later step (and
     a re-run) reads the divergence up to the same ends.
  2b. Write rights (with ``sync_topic_acls``; core/writerights.py): what to take from the old source so that
     only the reverse mirror's principal writes the reversed topics is planned and recorded with
     ``reversing`` (so a re-run, the switch back and `resume` know exactly what was removed), then done:
     each LITERAL ALLOW WRITE removed, a write through ALLOW ALL, a prefixed or a wildcard grant stopped by
     a LITERAL DENY WRITE for that principal. Optional by design: without the right to change ACLs the
     outcome names each change to make by hand (exit 6).
  3. The divergence: per partition, the old source's committed records in [progress, that end).
     ``copy``: one transaction of the transactional id ``<prefix>.<mirror>.diverged`` on the new
     primary writes them to their side topics, after that id fenced any other copier and the side
     topics were read: a copy already there is not written again; other data there is refused.
  4. The reverse mirror ``<mirror>__reverse`` (target -> old source): its progress on each old-source
     partition starts at the promotion record's ``target_end``, written as ``eosmirror reset`` writes
     progress (offset sync + audit record, one transaction), only where it has none yet: a reverse
     mirror that already ran is never moved back (one ``retired`` by `eosmirror resume` is prepared
     again, forwards, at this promotion's point). Then its state record on the old source: from then
     on its runs copy (before, they are refused).
  5. Record ``reversed``.
"""

from __future__ import annotations

import getpass
import logging
import time
from dataclasses import dataclass, field, replace
from typing import AbstractSet, Any, Callable

from eosmirror.core import divergence, migration, mirrorstate, naming, transitions
from eosmirror.core import writerights as rules
from eosmirror.core.config import MirrorConfig
from eosmirror.core.divergence import DivergedPartition, DivergenceReport
from eosmirror.core.errors import EXIT_OK, ConfigError, EosMirrorError
from eosmirror.core.migration import PartitionChange, Refusal
from eosmirror.core.mirrorstate import MirrorState, PartitionPoint, Phase
from eosmirror.core.transitions import Command, Mode
from eosmirror.driver.migrate import Migration, RefusedError
from eosmirror.driver.transition import Transition
from eosmirror.driver.writerights import Rights
from eosmirror.kafka import calls, clients, offsets, readers, state
from eosmirror.kafka.cluster import Cluster

log = logging.getLogger(__name__)
SOURCE_BUDGET_S = 10.0
SETTLE_S = 120.0


class OldSourceUnreachableError(ConfigError):
    """The old source does not answer (exit 2: nothing was written; bring it back, reverse again)."""


@dataclass
class ReverseOutcome:
    mirror: str
    reverse_mirror: str
    state: MirrorState
    divergence: DivergenceReport
    progress: list[PartitionChange]
    run: Transition
    already: list[str] = field(default_factory=list)
    recovery_seconds: float | None = None
    rights: Rights = field(default_factory=Rights)

    @property
    def exit_code(self) -> int:
        """6 when a step optional by design (the write rights) did not run."""
        return self.run.exit_code(EXIT_OK)

    def lines(self) -> list[str]:
        out = self.divergence.lines()
        out += [f"  write rights on the old source: {line}" for line in self.rights.lines]
        out += [f"  {s.name} DID NOT RUN: {s.why}" for s in self.run.not_run]
        out += [f"  reverse mirror {self.reverse_mirror}: {c.source_topic}[{c.partition}] starts at {c.new} (the "
                f"first offset written on the new primary after the promotion) -> old source end {c.target_end}"
                for c in self.progress]
        out += [f"  reverse mirror {self.reverse_mirror}: {a}" for a in self.already]
        out.append(f"mirror {self.mirror}: {self.state.phase.value}; next: `eosmirror run {self.reverse_mirror}` "
                   f"(or its DAG eosmirror__{self.reverse_mirror}) copies what the new primary received since the "
                   f"promotion back to the old source")
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"mirror": self.mirror, "kind": "reverse", "reverse_mirror": self.reverse_mirror,
                "state": self.state.phase.value, "since_ms": self.state.since_ms, "by": self.state.by,
                "divergence": self.divergence.as_dict(), "steps": self.run.as_list(), "already": self.already,
                "recovery_seconds": self.recovery_seconds, "write_rights": self.rights.as_dict(),
                "not_run": [s.name for s in self.run.not_run], "exit_code": self.exit_code,
                "progress": [{"topic": c.source_topic, "partition": c.partition, "start": c.new,
                              "old_source_end": c.target_end} for c in self.progress],
                "report": self.lines()}


def reachable(old: Cluster, mirror: str, budget_s: float) -> None:
    """The old source answers within ``budget_s``, or the reverse is refused (nothing written)."""
    try:
        old.admin.list_topics(timeout=budget_s)
    except Exception as exc:  # noqa: BLE001 - any failure: it does not answer
        raise OldSourceUnreachableError(
            f"mirror {mirror!r}: old source unreachable: bring it back, then reverse again ({old.label}: "
            f"{calls.error_text(exc)}). Nothing was written") from None


def settled_ends(old: Cluster, tps: list[tuple[str, int]], settle_s: float) -> dict[tuple[str, int], int]:
    """The last stable offsets of the old source's partitions once no transaction is open on them (a
    producer killed with the old source leaves one open until its transaction timeout aborts it)."""
    from confluent_kafka.admin import OffsetSpec

    deadline = time.monotonic() + settle_s
    while True:
        high = offsets.list_offsets_of(old, {tp: OffsetSpec.latest() for tp in tps}, read_committed=False)
        stable = offsets.list_offsets_of(old, {tp: OffsetSpec.latest() for tp in tps}, read_committed=True)
        open_now = sorted(tp for tp in tps if stable[tp] < high[tp])
        if not open_now:
            return stable
        if time.monotonic() > deadline:
            raise EosMirrorError(open_transactions_refusal(old, open_now, stable, settle_s))
        time.sleep(1.0)


def open_transactions_refusal(old: Cluster, open_now: list[tuple[str, int]], stable: dict[tuple[str, int], int],
                              settle_s: float) -> str:
    """Every partition still held by an open transaction after the one wait, each with Kafka's command
    that aborts it (a transaction left by a producer that died with the broker stays open)."""
    commands = "\n".join(f"  {t}[{k}] from offset {stable[(t, k)]}: kafka-transactions.sh --bootstrap-server "
                         f"{old.first_bootstrap} abort --topic {t} --partition {k} --start-offset {stable[(t, k)]}"
                         for t, k in open_now)
    return (f"{len(open_now)} partition(s) of the old source ({old.label}) are still held by an open transaction "
            f"after {settle_s:.0f} s: a producer of the old source holds them. Stop the old source's producers; a "
            f"transaction left by a producer that died with the broker (a hanging transaction) is aborted with "
            f"Kafka's tool, one command per partition:\n{commands}\nThen reverse again. Nothing was written")


def with_old_ends(points: tuple[PartitionPoint, ...], old: Cluster, settle_s: float) -> tuple[PartitionPoint, ...]:
    """Step 2: the promotion points with the old source's ends (kept when a previous attempt read them)."""
    if all(p.old_source_end is not None for p in points):
        return points
    stable = settled_ends(old, [(p.source_topic, p.partition) for p in points], settle_s)
    return tuple(replace(p, old_source_end=stable[(p.source_topic, p.partition)]) if p.old_source_end is None
                 else p for p in points)


def read_divergence(mirror: MirrorConfig, old: Cluster, points: tuple[PartitionPoint, ...]
                    ) -> tuple[dict[tuple[str, int], list[Any]], dict[tuple[str, int], tuple[int, int]]]:
    """Step 3: (records, ranges): the committed records of each partition in [progress, old source end),
    read_committed, and each partition's range."""
    from confluent_kafka.admin import OffsetSpec

    tps = [(p.source_topic, p.partition) for p in points]
    low = offsets.list_offsets_of(old, {tp: OffsetSpec.earliest() for tp in tps})
    ranges = {}
    for p in points:
        tp = (p.source_topic, p.partition)
        end = int(p.old_source_end or 0)
        ranges[tp] = (divergence.divergence_start(p.progress, low[tp]), end)   # start > end: the old log lost some
    found = readers.read_ranges(old, {tp: (min(start, end), end) for tp, (start, end) in ranges.items()},
                                client_id=f"eosmirror-{mirror.name}-divergence-reader")
    return found, ranges


def summarize(mirror: MirrorConfig, found: dict[tuple[str, int], list[Any]],
              ranges: dict[tuple[str, int], tuple[int, int]], copied: bool) -> tuple[DivergedPartition, ...]:
    return tuple(divergence.summarize(t, k, start, end, ((r.offset, r.timestamp) for r in found.get((t, k), [])),
                                      naming.diverged_topic(t, mirror.name) if copied else None)
                 for (t, k), (start, end) in sorted(ranges.items()))


def ensure_side_topics(new: Cluster, old: Cluster, mirror: MirrorConfig, topics: list[str]) -> set[str]:
    """Create the side topics on the new primary that do not exist yet, with the old topic's partition count.
    Returns the side topics this call created: empty, since only the copier's transactional id writes there."""
    from confluent_kafka.admin import NewTopic

    counts = {t: len(meta.partitions) for t, meta in old.admin.list_topics(timeout=30).topics.items() if t in topics}
    wanted = [NewTopic(naming.diverged_topic(t, mirror.name), counts[t], mirror.target_replication_factor)
              for t in topics]
    created = set()
    for name, future in new.admin.create_topics(wanted, request_timeout=calls.DEFAULT_TIMEOUT).items():
        try:
            future.result(timeout=calls.DEFAULT_TIMEOUT)
            log.info("created side topic %s", name)
            created.add(name)
        except Exception as exc:  # noqa: BLE001
            if calls.error_name(exc) != "TOPIC_ALREADY_EXISTS":
                raise calls.translate(exc, f"create the side topic {name}", new.label, f"Create on topic {name}") from None
    return created


def still_to_copy(new: Cluster, mirror: MirrorConfig, found: dict[tuple[str, int], list[Any]],
                  just_created: AbstractSet[str] = frozenset()) -> dict[tuple[str, int], list[Any]]:
    """The partitions whose diverged records are not in their side topic yet (read_committed, after the
    copier's id fenced any other copier); a side partition with other data is refused. A side topic this
    run just created is empty and is not read: a broker may not know its partitions yet for a moment
    after CreateTopics ("Unknown partition", seen under load)."""
    todo = {}
    for (topic, k), records in sorted(found.items()):
        if not records:
            continue
        side = naming.diverged_topic(topic, mirror.name)
        there = [] if side in just_created else [dict(r.headers).get(naming.DIVERGED_HEADER) for r in readers.read_all(
            new, side, k, client_id=f"eosmirror-{mirror.name}-side-reader")]
        expected = [naming.diverged_origin(topic, k, r.offset) for r in records]
        if not divergence.side_topic_state(side, k, there, expected):
            todo[(topic, k)] = records
    return todo


def copy_diverged(new: Cluster, old: Cluster, mirror: MirrorConfig, found: dict[tuple[str, int], list[Any]]) -> int:
    """Step 3, ``copy``: the diverged records to their side topics, once. Returns how many this call wrote."""
    if not any(found.values()):
        return 0
    txn_id = naming.diverged_transactional_id(mirror.transactional_id_prefix, mirror.name)
    producer = clients.transactional_producer(new.settings, {}, txn_id, 60000, client_id=f"eosmirror-{mirror.name}-diverged")
    calls.call(producer.init_transactions, "initialise the divergence copier", new.label,
               f"Write on transactional id {txn_id}", 60)    # fences a concurrent copier: one writes
    created = ensure_side_topics(new, old, mirror, sorted({t for (t, _), rs in found.items() if rs}))
    todo = still_to_copy(new, mirror, found, created)
    if not todo:
        return 0
    try:
        producer.begin_transaction()
        for (topic, k), records in sorted(todo.items()):
            for r in records:
                producer.produce(naming.diverged_topic(topic, mirror.name), value=r.value, key=r.key, partition=k,
                                 timestamp=r.timestamp, headers=[*r.headers, (naming.DIVERGED_HEADER,
                                                                             naming.diverged_origin(topic, k, r.offset))])
                producer.poll(0)
        producer.commit_transaction(60)
    except Exception as exc:  # noqa: BLE001 - an open transaction is aborted by the broker
        raise calls.translate(exc, f"copy the diverged records of {mirror.name}", new.label,
                              f"Write on the side topics {naming.diverged_topic('<topic>', mirror.name)}") from None
    return sum(len(rs) for rs in todo.values())


def prepare_reverse_mirror(back: MirrorConfig, points: tuple[PartitionPoint, ...], forward: str, by: str,
                           window: float) -> tuple[list[PartitionChange], list[str]]:
    """Step 4: the reverse mirror's progress at the promotion point where it has none, as `eosmirror
    reset` writes it (offset sync + audit record in one transaction), then its first state record.
    Returns (written, already there). A reverse mirror with a state record has its progress (written
    before it) and may be copying: nothing is looked at or written again. Except a ``retired`` one (the
    resume after the last switch back retired it; it copies nothing): it is prepared again at this
    promotion's point, forwards from where it stopped (what lies between came from the old source)."""
    old = Cluster.resolve("target", back.target, back.name)
    prepared = state.read_mirror_state(old, back.name, back.progress_group)
    retired = prepared.phase is Phase.RETIRED
    if prepared.phase not in transitions.follows(Command.PREPARE):
        return [], [f"prepared already ({prepared.describe()})"]
    mig = Migration(back, who=by, window=window)
    start = {(p.target_topic, p.partition): p.target_end for p in points if (p.target_topic, p.partition) in mig.target_of}
    agreed = mig.steady_look(lambda: {}, "a producer of the old source")
    changes = mig.changes(start, agreed)
    if retired:
        back_moves = [f"{c.source_topic}[{c.partition}] {c.old} > {c.new}" for c in changes
                      if c.old is not None and c.old > c.new]
        if back_moves:
            raise RefusedError(f"mirror {back.name!r}: its progress lies past this promotion's point "
                               f"({', '.join(back_moves[:5])}); a reverse mirror is never moved back. Nothing "
                               f"was written.")
    fresh = [c for c in changes if (c.old != c.new if retired else c.old is None)]
    already = [f"{c.source_topic}[{c.partition}] already has progress {c.old} (its start {c.new}"
               + (": it has copied since)" if c.old > c.new else ")") for c in changes
               if c.old is not None and c not in fresh]
    if fresh:
        low, high = mig.source_offsets()
        try:
            migration.check_in_source_range(fresh, low, high)
        except Refusal as exc:
            raise RefusedError(f"mirror {back.name!r}: {exc}. Nothing was written.") from None
        mig.commit("reverse", f"promotion of {forward}", fresh, agreed, lambda: {},
                   note=f"the reverse of {forward} starts at the promotion point: nothing that came from the old "
                        f"source goes back")
    else:
        mig.run.preflight(check_state=False)
    state.write_mirror_state(old, back.name, back.transactional_id_prefix, MirrorState(
        Phase.MIRRORING, int(time.time() * 1000), by, note=f"{'prepared again' if retired else 'prepared'} by "
                                                             f"`eosmirror reverse {forward}`: it starts at the "
                                                             f"promotion point"))
    return fresh, already


@dataclass(frozen=True)
class ReverseOptions:
    mode: str = "report"
    source_budget_s: float = SOURCE_BUDGET_S
    settle_s: float = SETTLE_S
    window: float = 3.0

    def check(self, mirror: str) -> None:
        if self.mode not in divergence.MODES:
            raise ConfigError(f"reverse {mirror}: divergence {self.mode!r} is not one of {', '.join(divergence.MODES)}")


def reverse(mirror: MirrorConfig, options: ReverseOptions = ReverseOptions(), by: str | None = None,
            say: Callable[[str], None] = log.info, started: float | None = None) -> ReverseOutcome:
    """Steps 1-5 of the module doc."""
    options.check(mirror.name)
    back = mirror.reverse()                                                                   # 1: identity only
    by = by or f"cli:{getpass.getuser()}"
    new = Cluster.resolve("target", mirror.target, mirror.name)
    old = Cluster.resolve("source", mirror.source, mirror.name)
    run = Transition(Command.REVERSE, mirror.name, say, started=started, by=by,
                     record_to=state.recorder(new, mirror.name, mirror.transactional_id_prefix), clusters=(old, new))
    current = state.read_mirror_state(new, mirror.name, mirror.progress_group)
    mode = run.check(current)
    run.step("old source answers", lambda: reachable(old, mirror.name, options.source_budget_s))
    points = run.step("old source ends", lambda: with_old_ends(current.points, old, options.settle_s)) or ()  # 2
    rights = Rights(audit_to=state.auditor(new, mirror.name, mirror.transactional_id_prefix, rules.AUDIT_ACTION,
                                           "reverse", by))
    plan = _plan_takeaway(mirror, old, points, run, rights)                                              # 2b
    taken = current.rights if mode is Mode.DONE else rules.merged(current.rights, plan.changes() if plan else ())
    if mode is Mode.BEGIN or (mode is Mode.CONTINUE and (points != current.points or taken != current.rights)):
        current = run.record(Phase.REVERSING, points, mirrorstate.reverse_note(current), taken)
    else:
        run.skip("record reversing", "recorded before with these ends")
    if plan is not None:
        run.step(rules.TAKE_STEP, lambda: rights.take_from_old_source(old, taken, plan.left), optional=(
            "the reverse goes on without it: others can still write the reversed topics on the old source (the "
            "reverse mirror's runs list them: target_guard)"))
    found, ranges = run.step("read the divergence", lambda: read_divergence(mirror, old, points)) or ({}, {})   # 3
    copied = 0
    if options.mode == "copy":
        copied = run.step("copy the divergence", lambda: copy_diverged(new, old, mirror, found)) or 0
    else:
        run.skip("copy the divergence", "divergence mode report: the records are only reported")
    report = DivergenceReport(mirror.name, options.mode, old.label, summarize(mirror, found, ranges,
                                                                              options.mode == "copy"))
    fresh, already = run.step("prepare the reverse mirror", lambda: prepare_reverse_mirror(               # 4
        back, points, mirror.name, by, options.window)) or ([], [])
    note = f"divergence {report.total} record(s), {options.mode}" + (f", {copied} copied now" if copied else "")
    if mode is Mode.DONE:
        run.skip("record reversed", f"reversed already ({current.describe()})")
    else:
        current = run.record(Phase.REVERSED, points, mirrorstate.reverse_note(current, note), current.rights)
    return ReverseOutcome(mirror.name, back.name, current, report, fresh, run, already, run.elapsed(), rights)


def _plan_takeaway(mirror: MirrorConfig, old: Cluster, points: tuple[PartitionPoint, ...], run: Transition,
                   rights: Rights) -> rules.Takeaway | None:
    """Step 2b's plan (read only): None when ACL sync is off or the plan could not be made (the outcome says)."""
    if not mirror.sync_topic_acls:
        run.skip(rules.TAKE_STEP, rules.SYNC_OFF)
        return None
    topics = sorted({p.source_topic for p in points})
    return run.step(f"plan: {rules.TAKE_STEP}", lambda: rights.plan_takeaway(old, topics, mirror.mirror_principals),
                    optional="the reverse goes on without it: nothing was taken from the old source, and others "
                             "can still write its reversed topics")
