"""One run of one mirror on the driver: resolve, observe and plan, sync, generation, copy, report.

``prepare`` does everything before the slots start, in the numbered order of its docstring (and
writes nothing when ``dry_run`` or ``plan_only``); ``execute`` hands one ``SlotTask`` per slot to a
runner (Spark, or threads of this process) and turns the slot results into the run's report.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from eosmirror.core import bandwidth, generation, naming, planning, transitions
from eosmirror.core.config import MirrorConfig
from eosmirror.core.errors import ConfigError, EosMirrorError
from eosmirror.core.planning import SlotPlan
from eosmirror.core.runreport import ReportTopic, RunReport, RunStatus, SlotResult, SlotStatus
from eosmirror.core.steptimes import StepTimes, process_age
from eosmirror.driver import foreigncheck, minimums, observe, permissions, topics, writerights
from eosmirror.kafka import clients, state, syncstore
from eosmirror.kafka.cluster import Cluster
from eosmirror.slot.copier import run_slot
from eosmirror.slot.slotstate import PartitionTask, SlotTask

log = logging.getLogger(__name__)

SlotRunner = Callable[[list[SlotTask]], list[SlotResult]]


@dataclass(frozen=True)
class RunOptions:
    until: dt.datetime | None = None
    dry_run: bool = False
    topics: tuple[str, ...] = ()
    max_records_per_partition: int | None = None
    max_bytes_per_slot: int | None = None
    max_bytes_per_second: int | None = None   # overrides the mirror's bandwidth cap (--max-bytes-per-second)
    # Follow run: after the bound, keep copying until the next run takes over or this time passes.
    follow_until: dt.datetime | None = None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    # The final run of `eosmirror switchover`: it copies while the mirror is switching-over (recorded
    # before it, so every other run is refused from then on; core/transitions.check_may_copy).
    final_of_switchover: bool = False
    # The operator accepted the foreign records on the target (`--accept-foreign`, core/foreign.py): the
    # run logs them instead of refusing and the mirror copies on after them.
    accept_foreign: bool = False


@dataclass
class Planned:
    """Steps 1 and 2 of a run: the mirrored topics, the run's one description of the target, the plan."""
    pairs: list[topics.TopicPair]
    existing: dict[str, topics.TopicState]
    slots: list[SlotPlan]
    started: float
    started_at: str
    writers: list[str] = field(default_factory=list)   # who else can write the target topics (target_guard)


@dataclass
class Prepared:
    mirror: MirrorConfig
    options: RunOptions
    pairs: list[topics.TopicPair]
    slots: list[SlotPlan]
    generation: int
    generation_changed: bool
    fenced: list[str]
    topic_sync: str
    limits: dict[str, int]
    target_topic_ids: dict[str, str]
    started: float
    started_at: str
    steps: StepTimes = field(default_factory=StepTimes)
    writers: list[str] = field(default_factory=list)


class MirrorRun:
    def __init__(self, mirror: MirrorConfig, options: RunOptions | None = None, command: str = "run"):
        self.steps = StepTimes()
        age = process_age()   # the interpreter's start, imports and the config, before any step
        if age is not None:
            self.steps.add("process start", age)
        self.options = options or RunOptions()
        self.command = command   # what the brokers' minimums are checked for: run, or migrate (and reset)
        self.broker_notes: list[str] = []   # what the clusters' brokers leave out (driver/minimums), once resolved
        self.mirror = mirror.with_bounds(self.options.max_records_per_partition, self.options.max_bytes_per_slot,
                                         self.options.max_bytes_per_second)
        self.source = Cluster.resolve("source", mirror.source, mirror.name)
        self.target = Cluster.resolve("target", mirror.target, mirror.name)

    def preflight(self, check_state: bool = True) -> dict[str, Any]:
        """Config resolved, both clusters answer, target topics created/grown/in sync (Airflow's first
        task; ``check_state=False``: a migration or reverse that prepares the mirror before it copies)."""
        m = self.mirror
        pairs, existing = self.resolve()
        # A switched-over or promoted mirror's DAG run stops here, before Spark, naming the state (the
        # planner refuses a run outside Airflow the same way, before any slot starts).
        if check_state:
            transitions.check_may_copy(state.read_mirror_state(self.target, m.name, m.progress_group), m.name,
                                       self.options.final_of_switchover)
        report = topics.prepare_targets(m, pairs, self.source, self.target, existing)
        topics.ensure_internal_topics(m, self.target, existing)
        return {"mirror": m.name, "source": self.source.label, "target": self.target.label,
                "topics": [{"source": p.source, "target": p.target, "partitions": p.partitions} for p in pairs],
                "topic_sync": report.summary(), "warnings": report.warnings + self.broker_notes}

    def resolve(self) -> tuple[list[topics.TopicPair], dict[str, topics.TopicState]]:
        """Both clusters answer; the mirrored topics; the run's one description of the target; ACLs."""
        clients.check_slot_settings(self.source.settings, self.target.settings, self.mirror,
                                    f"mirror {self.mirror.name!r}")   # before anything is written
        # The brokers' minimums first (one ApiVersions round trip, both clusters at once): a too-old broker is
        # refused before the first request it might answer wrongly, and a refusal never waits on a read.
        self.broker_notes = minimums.require(self.command, (self.source, self.target), self.mirror.sync_topic_acls)
        topics.list_topic_names(self.target)   # the target answers (and accepts our credentials) first
        pairs = topics.resolve(self.mirror, self.source, list(self.options.topics) or None)
        existing = topics.describe_targets(self.mirror, pairs, self.target)
        permissions.check(self.mirror, pairs, existing)
        return pairs, existing

    def prepare(self, plan_only: bool = False) -> Prepared:
        """Everything before the slots start, in this order (nothing is written before step 3):

        1. Resolve: both clusters answer, the mirrored topics, one description of the target, ACLs.
        1b. Target guard: who other than the mirror can write the target topics (``target_guard``: report
           them, or refuse the run).
        2. Observe and plan: source offsets, committed progress (or its recovery from the offset
           syncs), the bounded range and slot of every partition. Everything that can refuse the
           run (truncation, re-created topics, lost progress) is checked here.
        2b. Target check (exactly_once): a target partition holding records the mirror did not write
           refuses the run (driver/foreigncheck.py); the slots check again after fencing.
        3. Sync the target: create/grow topics, sync configs, create the internal topics (a dry run
           only reports); then check the ACLs of what was just created.
        4. Generation: record the slot count; if it changed, fence every old slot's transactional id.
        """
        return self.complete(self.plan(), plan_only)

    def plan(self) -> Planned:
        """Steps 1 and 2 of ``prepare``: they write nothing."""
        m, opts, steps = self.mirror, self.options, self.steps
        started, started_at = time.monotonic(), dt.datetime.now(dt.timezone.utc).isoformat()
        with steps.step("resolve"):
            pairs, existing = self.resolve()                                                          # 1
        with steps.step("target guard"):                                                              # 1b
            writers = writerights.guard(m, self.target, [p.target for p in pairs])
        target_ids = {name: state.topic_id for name, state in existing.items()}
        with steps.step("observe and plan"):                                                          # 2
            observations = observe.observe(m, pairs, self.source, self.target, target_ids, until=opts.until)
            slots = planning.plan_run(observations, m.slots, m.transactional_id_prefix, m.name,
                                      on_truncation=m.on_truncation, max_records=m.max_records_per_partition)
        if m.delivery == "exactly_once":
            with steps.step("target check"):   # before anything is copied: foreign writes (core/foreign.py)
                self.check_targets(observations)
        return Planned(pairs=pairs, existing=existing, slots=slots, started=started, started_at=started_at,
                       writers=writers)

    def check_targets(self, observations: list[planning.PartitionObservation]) -> None:
        """Refuse the run (ForeignWriteError) when a mirrored target partition holds records the mirror
        did not write (driver/foreigncheck.py); the slots check again, exactly, after fencing."""
        m = self.mirror
        outcome = foreigncheck.check(self.target, m.progress_group,
                                     [(o.target_topic, o.partition) for o in observations],
                                     {(o.target_topic, o.partition): o.accounting for o in observations},
                                     client_id=f"eosmirror-{m.name}-target-check")
        log.info("mirror %s: target check: %s", m.name, outcome.summary())
        if outcome.foreign:
            # A mirror that may not copy (switched over, promoted, retired) is refused for that first: after a
            # switch its target is written by the producers on purpose (one state read, on this path only).
            transitions.check_may_copy(state.read_mirror_state(self.target, m.name, m.progress_group), m.name,
                                       self.options.final_of_switchover)
        foreigncheck.refuse_or_accept(self.target, m, outcome, self.options.accept_foreign)

    def complete(self, planned: Planned, plan_only: bool = False) -> Prepared:
        """Steps 3 and 4 of ``prepare`` after ``planned`` (this run's steps 1 and 2): a run that found
        nothing to copy without Spark completes the plan it decided on instead of planning again."""
        m, opts, steps = self.mirror, self.options, self.steps
        pairs, existing = planned.pairs, planned.existing
        writes = not (plan_only or opts.dry_run)
        with steps.step("target sync"):                                                               # 3
            report = topics.prepare_targets(m, pairs, self.source, self.target, existing, dry_run=not writes)
            if writes:
                created = report.created + topics.ensure_internal_topics(m, self.target, existing)
                if created:
                    permissions.check(m, pairs, existing, only=set(created))
                limits, target_ids = report.max_message_bytes, report.target_topic_ids
            else:
                limits = topics.target_limits(self.target, pairs, existing)
                target_ids = {name: state.topic_id for name, state in existing.items()}
            check_cap(m, planned.slots, limits)   # before the generation step fences anything
        with steps.step("generation"):                                                                # 4
            number, changed, fenced = self._generation(writes)
        return Prepared(mirror=m, options=opts, pairs=pairs, slots=planned.slots, generation=number,
                        generation_changed=changed, fenced=fenced, topic_sync=report.summary(), limits=limits,
                        target_topic_ids=target_ids, started=planned.started, started_at=planned.started_at,
                        steps=steps, writers=planned.writers)

    def _generation(self, writes: bool) -> tuple[int, bool, list[str]]:
        """(generation number, whether it changes, transactional ids fenced). exactly_once only: the
        at_least_once mode has no transactional ids; a run that writes nothing only predicts."""
        m = self.mirror
        if m.delivery == "exactly_once" and writes:
            established, fenced = state.establish_generation(self.target, m.name, m.transactional_id_prefix,
                                                             m.slots, m.progress_group,
                                                             final_of_switchover=self.options.final_of_switchover)
            return established.number, bool(fenced), fenced
        current = state.read_generation(self.target, m.name, m.progress_group)
        upcoming = generation.next_generation(current, m.slots, 0, "")
        if upcoming is not None:
            return upcoming.number, True, []
        assert current is not None   # next_generation answers None only for a current generation that fits
        return current.number, False, []

    def slot_tasks(self, prepared: Prepared) -> list[SlotTask]:
        m = prepared.mirror
        ids = {p.source: p.source_topic_id for p in prepared.pairs}
        cap = slot_cap(m, prepared.slots)
        tasks = []
        for slot in prepared.slots:
            parts = tuple(PartitionTask(
                source_topic=p.source_topic, target_topic=p.target_topic, partition=p.partition, start=p.start,
                end=p.end, had_progress=p.origin in (planning.ORIGIN_PROGRESS, planning.ORIGIN_TRUNCATED),
                skip_truncated=p.origin == planning.ORIGIN_TRUNCATED,
                source_topic_id=ids.get(p.source_topic, ""), target_topic_id=prepared.target_topic_ids.get(p.target_topic, ""),
                max_message_bytes=prepared.limits.get(p.target_topic, topics.DEFAULT_MAX_MESSAGE_BYTES))
                for p in slot.partitions)
            tasks.append(SlotTask(
                mirror=m.name, slot=slot.slot, transactional_id=slot.transactional_id,
                generation=prepared.generation, delivery=m.delivery, progress_group=m.progress_group,
                partitions=parts, source_conf=self.source.settings, target_conf=self.target.settings,
                source_overrides=dict(m.source_consumer), target_overrides=dict(m.target_producer),
                max_transaction_seconds=m.max_transaction_seconds, transaction_timeout_ms=m.transaction_timeout_ms,
                max_partitions_per_transaction=m.max_partitions_per_transaction,
                max_bytes=m.max_bytes_per_slot, source_label=self.source.label, target_label=self.target.label,
                run_id=prepared.options.run_id, offset_sync_topic=naming.offset_sync_topic(m.name),
                follow_until=prepared.options.follow_until.timestamp() if prepared.options.follow_until else None,
                final_of_switchover=prepared.options.final_of_switchover, cap=cap,
                accept_foreign=prepared.options.accept_foreign))
        return tasks

    def refresh_sync_snapshot(self) -> None:
        """Fold this run's offset syncs into the snapshot (a cache: a failure costs later readers a longer
        read, never exactness, so it is logged as an error and the run's outcome stands)."""

        try:
            syncstore.refresh_snapshot(self.target, self.mirror.name,
                                       self.mirror.progress_group,
                                       naming.snapshot_transactional_id(self.mirror.transactional_id_prefix,
                                                                        self.mirror.name))
        except EosMirrorError as exc:
            log.error("%s: the offset-sync snapshot was not refreshed (progress recovery and group syncs will "
                      "read more of the sync history until it is): %s", self.mirror.name, exc)

    def execute(self, prepared: Prepared, runner: SlotRunner) -> RunReport:
        if prepared.options.dry_run:
            results = [SlotResult.not_started(s.slot, s.transactional_id, SlotStatus.DRY_RUN) for s in prepared.slots]
        else:
            tasks = [t for t in self.slot_tasks(prepared) if t.partitions]
            with prepared.steps.step("slots"):   # Spark start (when there is work), fencing, copy, commits
                results = runner(tasks) if tasks else []
            missing = {s.slot for s in prepared.slots} - {r.slot for r in results}
            results += [SlotResult.not_started(k, naming.slot_transactional_id(
                prepared.mirror.transactional_id_prefix, prepared.mirror.name, k), SlotStatus.NOTHING_TO_DO)
                for k in sorted(missing)]
            # A run with nothing pending moved no progress, so it wrote no offset sync: nothing to fold.
            if any(p.pending for s in prepared.slots for p in s.partitions):
                with prepared.steps.step("snapshot"):
                    self.refresh_sync_snapshot()
        return build_report(prepared, sorted(results, key=lambda r: r.slot), self.source.label, self.target.label,
                            self.target.first_bootstrap)


def build_report(prepared: Prepared, results: list[SlotResult], source_label: str,
                 target_label: str, target_bootstrap: str = "") -> RunReport:
    """The run report. ``target_bootstrap`` (first bootstrap server) names the target in asset URIs."""
    m = prepared.mirror
    seconds = time.monotonic() - prepared.started
    records = sum(r.records for r in results)
    size = sum(r.bytes for r in results)
    copy_seconds = max([r.seconds for r in results] or [0.0])
    ok = all(r.status.ok for r in results)
    return RunReport(
        mirror=m.name, run_id=prepared.options.run_id, status=RunStatus.OK if ok else RunStatus.FAILED,
        dry_run=prepared.options.dry_run, delivery=m.delivery,
        started_at=prepared.started_at, finished_at=dt.datetime.now(dt.timezone.utc).isoformat(),
        until=prepared.options.until.isoformat() if prepared.options.until else None,
        follow_until=prepared.options.follow_until.isoformat() if prepared.options.follow_until else None,
        source=source_label, target=target_label, target_bootstrap=target_bootstrap,
        generation=prepared.generation, generation_changed=prepared.generation_changed,
        fenced_transactional_ids=list(prepared.fenced), topic_sync=prepared.topic_sync,
        topics=[ReportTopic(p.source, p.target, p.partitions) for p in prepared.pairs],
        records=records, bytes=size, seconds=round(seconds, 3), slot_seconds_max=copy_seconds,
        records_per_second=round(records / copy_seconds, 1) if copy_seconds else 0.0,
        mb_per_second=round(size / 1e6 / copy_seconds, 3) if copy_seconds else 0.0,
        plan=[p for s in prepared.slots for p in s.partitions], slots=results,
        errors=[f"slot {r.slot}: {r.error}" for r in results if r.error],
        steps=prepared.steps.as_dict(), writers=list(prepared.writers), max_bytes_per_second=m.max_bytes_per_second,
        catch_up_bytes_per_second=m.catch_up_bytes_per_second)


def working_slots(slots: list[SlotPlan]) -> int:
    """The slots that hold partitions this run: a mirror's cap is split over them."""
    return sum(1 for s in slots if s.partitions)


def slot_cap(m: MirrorConfig, slots: list[SlotPlan]) -> bandwidth.SlotCap | None:
    """Each working slot's share of the mirror's cap and catch-up rate (None: the mirror has neither)."""
    if m.max_bytes_per_second is None and m.catch_up_bytes_per_second is None:
        return None
    working = working_slots(slots)
    return bandwidth.SlotCap(bandwidth.slot_share(m.max_bytes_per_second, working),
                             bandwidth.slot_share(m.catch_up_bytes_per_second, working), m.catch_up_lag_seconds)


def check_cap(m: MirrorConfig, slots: list[SlotPlan], limits: dict[str, int]) -> None:
    """Refuse (exit 2, before anything is fenced or copied) a cap whose share in some slot cannot carry
    the largest record that slot's target topics accept (``limits``: max.message.bytes by target topic)
    once a second."""
    working = working_slots(slots)
    for slot in slots:
        if not slot.partitions:
            continue
        largest, topic = max((limits.get(p.target_topic, topics.DEFAULT_MAX_MESSAGE_BYTES), p.target_topic)
                             for p in slot.partitions)
        for name in ("max_bytes_per_second", "catch_up_bytes_per_second"):
            problem = bandwidth.share_problem(name, getattr(m, name), working, largest, topic)
            if problem:
                raise ConfigError(f"mirror {m.name!r}: field `{name}`: {problem}")


def run_in_process(tasks: list[SlotTask]) -> list[SlotResult]:
    """Runner without Spark: slots in threads of this process (tests, and `--runner inprocess`)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    if not tasks:
        return []
    # Named after the calling thread: the run server routes a run's log lines by thread name.
    with ThreadPoolExecutor(max_workers=len(tasks), thread_name_prefix=threading.current_thread().name) as pool:
        return list(pool.map(run_slot, tasks))
