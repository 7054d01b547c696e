"""One run of one mirror on the driver: resolve, sync, generation, plan, copy, report.

``prepare`` does design steps 1-4 (and writes nothing when ``dry_run`` or ``plan_only``);
``execute`` hands one ``SlotTask`` per slot to a runner (Spark, or a plain function in tests)
and turns the slot results into the run's report.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from eosmirror import clients, connections, generation, naming, observe, permissions, planning, state, topics
from eosmirror.config import MirrorConfig
from eosmirror.planning import SlotPlan
from eosmirror.slotstate import PartitionTask, SlotTask

log = logging.getLogger(__name__)

SlotRunner = Callable[[list[SlotTask]], list[dict[str, Any]]]
OK_STATUSES = ("committed", "nothing-to-do", "dry-run")


@dataclass(frozen=True)
class RunOptions:
    until: dt.datetime | None = None
    dry_run: bool = False
    topics: tuple[str, ...] = ()
    max_records_per_partition: int | None = None
    max_bytes_per_slot: int | None = None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])


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


def cluster_label(role: str, ref: Any, conf: dict[str, Any]) -> str:
    """How errors and reports name a cluster: role, reference and bootstrap (never a secret)."""
    return f"{role} cluster ({ref.describe()}, {conf.get('bootstrap.servers', '?')})"


class MirrorRun:
    def __init__(self, mirror: MirrorConfig, options: RunOptions | None = None):
        self.options = options or RunOptions()
        self.mirror = mirror.with_bounds(self.options.max_records_per_partition, self.options.max_bytes_per_slot)
        where = f"mirror {mirror.name!r}"
        self.source_conf = connections.resolve(mirror.source, f"{where}: source")
        self.target_conf = connections.resolve(mirror.target, f"{where}: target")
        self.source_label = cluster_label("source", mirror.source, self.source_conf)
        self.target_label = cluster_label("target", mirror.target, self.target_conf)

    def preflight(self) -> dict[str, Any]:
        """Config resolved, both clusters answer, target topics created/grown/in sync (Airflow's first task)."""
        m = self.mirror
        source_admin = clients.admin_client(self.source_conf, f"{m.name}-source")
        target_admin = clients.admin_client(self.target_conf, f"{m.name}-target")
        topics.list_topic_names(target_admin, self.target_label)
        pairs = topics.resolve(m, source_admin, self.source_label, list(self.options.topics) or None)
        report = topics.sync_targets(m, pairs, source_admin, target_admin, self.source_label, self.target_label)
        topics.ensure_internal_topics(m, target_admin, self.target_label)
        return {"mirror": m.name, "source": self.source_label, "target": self.target_label,
                "topics": [{"source": p.source, "target": p.target, "partitions": p.partitions} for p in pairs],
                "topic_sync": report.summary(), "warnings": report.warnings}

    def prepare(self, plan_only: bool = False) -> Prepared:
        """Steps 1-4. Everything that can refuse the run (truncation, re-created topics, lost
        progress, a target that cannot be grown) is checked before the first write."""
        m, opts = self.mirror, self.options
        started, started_at = time.monotonic(), dt.datetime.now(dt.timezone.utc).isoformat()
        writes = not (plan_only or opts.dry_run)
        source_admin = clients.admin_client(self.source_conf, f"{m.name}-source")
        target_admin = clients.admin_client(self.target_conf, f"{m.name}-target")
        # Both clusters answer (and accept our credentials) before anything else is asked of them.
        topics.list_topic_names(target_admin, self.target_label)
        # 1. Resolve topics.
        pairs = topics.resolve(m, source_admin, self.source_label, list(opts.topics) or None)
        existing = topics.describe(target_admin, [p.target for p in pairs], self.target_label)
        target_ids = {t: tid for t, (tid, _) in existing.items()}
        permissions.check(m, [p.source for p in pairs], [p.target for p in pairs], source_admin, target_admin,
                          self.source_label, self.target_label)
        # 4 (observe and plan first: pure checks before any write).
        observations = observe.observe(m, pairs, source_admin, target_admin, self.target_conf, target_ids,
                                       self.source_label, self.target_label, until=opts.until)
        slots = planning.plan_run(observations, m.slots, m.transactional_id_prefix, m.name,
                                  on_truncation=m.on_truncation, max_records=m.max_records_per_partition)
        # 2. Sync topics (report only, when not writing).
        report = topics.sync_targets(m, pairs, source_admin, target_admin, self.source_label, self.target_label,
                                     dry_run=not writes)
        if writes:
            topics.ensure_internal_topics(m, target_admin, self.target_label)
            limits, target_ids = report.max_message_bytes, report.target_topic_ids
            # Topics this run just created were not checked above: check them before the first write.
            permissions.check(m, [p.source for p in pairs], [p.target for p in pairs], source_admin, target_admin,
                              self.source_label, self.target_label)
        else:
            limits = topics.target_limits(target_admin, pairs, self.target_label)
        # 3. Generation and fencing (exactly_once only: at_least_once has no transactional ids).
        fenced: list[str] = []
        if m.delivery == "exactly_once" and writes:
            current, fenced = state.establish_generation(self.target_conf, m.name, m.transactional_id_prefix,
                                                         m.slots, self.target_label, m.progress_group)
            number, changed = current.number, bool(fenced)
        else:
            current = state.read_generation(self.target_conf, m.name, self.target_label, m.progress_group)
            upcoming = generation.next_generation(current, m.slots, 0, "")
            number = upcoming.number if upcoming else current.number  # type: ignore[union-attr]
            changed = upcoming is not None
        return Prepared(mirror=m, options=opts, pairs=pairs, slots=slots, generation=number,
                        generation_changed=changed, fenced=fenced, topic_sync=report.summary(), limits=limits,
                        target_topic_ids=target_ids, started=started, started_at=started_at)

    def slot_tasks(self, prepared: Prepared) -> list[SlotTask]:
        m = prepared.mirror
        ids = {p.source: p.source_topic_id for p in prepared.pairs}
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
                partitions=parts, source_conf=self.source_conf, target_conf=self.target_conf,
                source_overrides=dict(m.source_consumer), target_overrides=dict(m.target_producer),
                max_transaction_seconds=m.max_transaction_seconds, transaction_timeout_ms=m.transaction_timeout_ms,
                max_bytes=m.max_bytes_per_slot, source_label=self.source_label, target_label=self.target_label,
                run_id=prepared.options.run_id, offset_sync_topic=naming.offset_sync_topic(m.name)))
        return tasks

    def execute(self, prepared: Prepared, runner: SlotRunner) -> dict[str, Any]:
        if prepared.options.dry_run:
            results = [{"slot": s.slot, "transactional_id": s.transactional_id, "status": "dry-run", "records": 0,
                        "bytes": 0, "partitions": [], "error": None} for s in prepared.slots]
        else:
            tasks = [t for t in self.slot_tasks(prepared) if t.partitions]
            results = runner(tasks) if tasks else []
            missing = {s.slot for s in prepared.slots} - {r["slot"] for r in results}
            results += [{"slot": k, "transactional_id": naming.slot_transactional_id(
                prepared.mirror.transactional_id_prefix, prepared.mirror.name, k), "status": "nothing-to-do",
                "records": 0, "bytes": 0, "partitions": [], "error": None} for k in sorted(missing)]
        first_server = str(self.target_conf.get("bootstrap.servers", "")).split(",")[0].strip()
        return build_report(prepared, sorted(results, key=lambda r: r["slot"]), self.source_label, self.target_label,
                            first_server)


def build_report(prepared: Prepared, results: list[dict[str, Any]], source_label: str,
                 target_label: str, target_bootstrap: str = "") -> dict[str, Any]:
    """The run report. ``target_bootstrap`` (first bootstrap server) names the target in asset URIs."""
    m = prepared.mirror
    seconds = time.monotonic() - prepared.started
    records = sum(r.get("records", 0) for r in results)
    size = sum(r.get("bytes", 0) for r in results)
    copy_seconds = max([r.get("seconds", 0.0) for r in results] or [0.0])
    ok = all(r.get("status") in OK_STATUSES for r in results)
    return {
        "mirror": m.name, "run_id": prepared.options.run_id, "status": "ok" if ok else "failed",
        "dry_run": prepared.options.dry_run, "delivery": m.delivery,
        "started_at": prepared.started_at, "finished_at": dt.datetime.now(dt.timezone.utc).isoformat(),
        "until": prepared.options.until.isoformat() if prepared.options.until else None,
        "source": source_label, "target": target_label, "target_bootstrap": target_bootstrap,
        "generation": prepared.generation, "generation_changed": prepared.generation_changed,
        "fenced_transactional_ids": prepared.fenced, "topic_sync": prepared.topic_sync,
        "topics": [{"source": p.source, "target": p.target, "partitions": p.partitions} for p in prepared.pairs],
        "records": records, "bytes": size, "seconds": round(seconds, 3),
        "slot_seconds_max": copy_seconds,
        "records_per_second": round(records / copy_seconds, 1) if copy_seconds else 0.0,
        "mb_per_second": round(size / 1e6 / copy_seconds, 3) if copy_seconds else 0.0,
        "plan": [{"source_topic": p.source_topic, "target_topic": p.target_topic, "partition": p.partition,
                  "start": p.start, "end": p.end, "pending": p.pending, "origin": p.origin, "slot": p.slot,
                  "lost": p.lost} for s in prepared.slots for p in s.partitions],
        "slots": results,
        "errors": [f"slot {r['slot']}: {r['error']}" for r in results if r.get("error")],
    }


def run_in_process(tasks: list[SlotTask]) -> list[dict[str, Any]]:
    """Runner without Spark: slots in threads of this process (tests, and `--runner inprocess`)."""
    from concurrent.futures import ThreadPoolExecutor

    from eosmirror.copy import run_slot

    if not tasks:
        return []
    with ThreadPoolExecutor(max_workers=len(tasks)) as pool:
        return list(pool.map(run_slot, tasks))
