"""The configurations: each loads its own fresh topics, runs one system, verifies, cleans up.

A configuration never raises: a failure becomes a result with ``verified: false`` and the error,
and the bench goes on with the next one. Clean-up (delete the configuration's topics and groups)
always runs unless ``--keep-topics``; it only ever touches names that hold this run's unique id.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from eosmirror_tools.bench import ceiling, dataset, jvmcopier, mirror_runs, rawloop
from eosmirror_tools.bench.results import ConfigResult
from eosmirror_tools.bench.settings import PARTITIONS, BenchSettings, SizeClass
from eosmirror_tools.kit import mm2, topics
from eosmirror_tools.kit.counting import count_committed, end_offsets, offset_sum, offsets_admin


@dataclass
class Context:
    settings: BenchSettings
    source_conf: dict[str, Any]
    target_conf: dict[str, Any]
    say: Callable[[str], None]        # one progress line, indented under the configuration's header
    # How the mirror (not the loader, nor the verdict) reaches the source: through a link's proxy in the
    # distance section (distance.py); None: directly, like everything else.
    far_source_conf: dict[str, Any] | None = None

    @property
    def source(self) -> str:
        return self.source_conf["bootstrap.servers"]

    @property
    def mirror_source(self) -> str:
        """The source's address as the system under test reaches it."""
        return (self.far_source_conf or self.source_conf)["bootstrap.servers"]

    def mirror_source_ref(self) -> dict[str, Any]:
        """The source as an eosmirror mirror definition names it."""
        return {"local": "source"} if self.far_source_conf is None else {"config": dict(self.far_source_conf)}

    @property
    def target(self) -> str:
        return self.target_conf["bootstrap.servers"]


class TargetWatcher:
    """Prints how far the target got every few seconds while a child process copies (progress only:
    end offsets include transaction markers)."""

    def __init__(self, ctx: Context, topic: str, expected: int, every: float = 5.0):
        self.ctx, self.topic, self.expected, self.every = ctx, topic, expected, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"watch-{topic}")

    def _loop(self) -> None:
        admin = offsets_admin(self.ctx.target_conf)
        started = time.monotonic()
        while not self._stop.wait(self.every):
            try:
                high = offset_sum(self.ctx.target_conf, self.topic, PARTITIONS, "target", False, admin)
            except Exception:  # noqa: BLE001 - progress is cosmetic
                continue
            self.ctx.say(f"{high:,} offsets on the target ({min(high / max(self.expected, 1), 1):.0%}) "
                         f"after {time.monotonic() - started:.0f} s")

    def __enter__(self) -> "TargetWatcher":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=20)


def _load(ctx: Context, topic: str, size: SizeClass) -> None:
    topics.create_topics(ctx.source_conf, [topic], PARTITIONS, "source")
    ctx.say(f"loading {size.records:,} records of {size.value_bytes} B into {topic}")
    seconds = dataset.load(ctx.source_conf, topic, size)
    ctx.say(f"loaded in {seconds:.1f} s ({size.records / seconds:,.0f} records/s)")


def _verify(ctx: Context, result: ConfigResult, topic: str, counted: tuple[int, int] | None = None) -> None:
    """A read_committed count of the whole target topic (``counted``: one already made after the
    writer stopped, so that 2M records are not read twice)."""
    count, offsets = counted or count_committed(ctx.target_conf, topic, PARTITIONS)
    result.target_count, result.offsets_on_target = count, offsets
    result.verified = result.error is None and count == result.expected_count
    ctx.say(f"verified: {count:,} committed records on the target (expected {result.expected_count:,}), "
            f"{offsets - count:,} other offsets (transaction markers, aborted records) -> "
            f"{'OK' if result.verified else 'FAILED'}")


def _guard(ctx: Context, result: ConfigResult, body: Callable[[], None], cleanup: Callable[[], None]) -> ConfigResult:
    try:
        body()
    except Exception as exc:  # noqa: BLE001 - reported in the result; the bench continues
        result.error = str(exc) if type(exc) is RuntimeError else f"{type(exc).__name__}: {exc}"
        result.verified = False
        ctx.say(f"FAILED: {result.error.splitlines()[0]}")
    finally:
        if not ctx.settings.keep_topics:
            try:
                cleanup()
            except Exception:  # noqa: BLE001 - clean-up is best effort
                pass
    return result


# --- 1. broker ceiling -----------------------------------------------------------------------------

def run_ceiling(ctx: Context, size: SizeClass, transactional: bool) -> ConfigResult:
    slug = f"ceiling-{'txn' if transactional else 'plain'}"
    topic = f"{ctx.settings.topic_prefix(slug)}-{size.slug}"
    label = f"ProducerPerformance {'transactional' if transactional else 'non-transactional'}"
    result = ConfigResult(key=f"{size.name}/{slug}", kind="ceiling", label=label, size_class=size.name,
                          expected=size.records, record_bytes=size.value_bytes,
                          delivery="exactly_once" if transactional else None)

    def body() -> None:
        topics.create_topics(ctx.target_conf, [topic], PARTITIONS, "target")
        log = ctx.settings.work_dir / "logs" / f"{slug}-{size.slug}.log"
        ctx.say(f"ProducerPerformance: {size.records:,} x {size.value_bytes} B into {topic}")
        with TargetWatcher(ctx, topic, size.records):
            done = ceiling.run(ctx.target, topic, size.records, size.value_bytes, log,
                               ctx.settings.copy_timeout(size.records),
                               transactional_id=f"{topic}-tx" if transactional else None,
                               transaction_duration_ms=ctx.settings.transaction_duration_ms)
        result.wall_seconds, result.peak_rss, result.cpu = done.wall_seconds, done.peak.as_dict(), done.cpu
        result.steady_rate_override = done.records_per_second or None
        result.details = {"summary": done.summary_line, "exit_code": done.exit_code, "log": str(log),
                          "producer_props": ceiling.PRODUCER_PROPS, "value_only": True,
                          "transaction_duration_ms": ctx.settings.transaction_duration_ms if transactional else None}
        if done.exit_code != 0 or done.records_sent != size.records:
            raise RuntimeError(f"ProducerPerformance exited {done.exit_code} after {done.records_sent} records; see {log}")
        ctx.say(f"{done.records_per_second:,.0f} records/s ({done.wall_seconds:.1f} s wall incl. JVM start)")
        _verify(ctx, result, topic)

    return _guard(ctx, result, body, lambda: topics.delete_topics(ctx.target_conf, [topic]))


# --- 2. raw copy loop ------------------------------------------------------------------------------

def run_raw(ctx: Context, size: SizeClass) -> ConfigResult:
    topic = f"{ctx.settings.topic_prefix('raw')}-{size.slug}"
    result = ConfigResult(key=f"{size.name}/raw-loop", kind="raw", label="raw copy loop (1 process)",
                          size_class=size.name, expected=size.records, record_bytes=size.record_bytes)

    def body() -> None:
        _load(ctx, topic, size)
        topics.create_topics(ctx.target_conf, [topic], PARTITIONS, "target")
        ends = end_offsets(ctx.source_conf, topic, PARTITIONS, "source", True)
        with TargetWatcher(ctx, topic, size.records):
            done = rawloop.run(ctx.source, ctx.target, topic, PARTITIONS, ends, ctx.settings.work_dir,
                               ctx.settings.copy_timeout(size.records))
        result.wall_seconds, result.peak_rss, result.cpu = done.wall_seconds, done.peak.as_dict(), done.cpu
        result.steady_seconds = done.result.get("seconds")
        result.details = {"exit_code": done.exit_code, "loop": done.result}
        if done.exit_code != 0:
            raise RuntimeError(f"the raw loop exited {done.exit_code}; see {ctx.settings.work_dir / 'logs'}")
        ctx.say(f"{result.records_per_second or 0:,.0f} records/s in the loop ({done.wall_seconds:.1f} s wall)")
        _verify(ctx, result, topic)

    def cleanup() -> None:
        topics.delete_topics(ctx.source_conf, [topic])
        topics.delete_topics(ctx.target_conf, [topic])

    return _guard(ctx, result, body, cleanup)


# --- 2b. the JVM exactly-once copier ------------------------------------------------------------------

def run_jvm_copier(ctx: Context, size: SizeClass, slots: int) -> ConfigResult:
    topic = f"{ctx.settings.topic_prefix(f'jvm{slots}')}-{size.slug}"
    seconds = ctx.settings.mirror_transaction_seconds
    result = ConfigResult(key=f"{size.name}/jvmcopier-{slots}slots", kind="jvmcopier",
                          label=f"JVM exactly-once copier ({slots} slots, {seconds:g} s transactions)",
                          size_class=size.name, expected=size.records, record_bytes=size.record_bytes,
                          delivery="exactly_once", slots=slots)

    def body() -> None:

        _load(ctx, topic, size)
        topics.create_topics(ctx.target_conf, [topic], PARTITIONS, "target")
        ends = end_offsets(ctx.source_conf, topic, PARTITIONS, "source", True)
        with TargetWatcher(ctx, topic, size.records):
            done = jvmcopier.run(ctx.mirror_source, ctx.target, topic, PARTITIONS, slots, int(seconds * 1000), ends,
                                 ctx.settings.work_dir, ctx.settings.copy_timeout(size.records))
        result.wall_seconds, result.peak_rss, result.cpu = done.wall_seconds, done.peak.as_dict(), done.cpu
        result.steady_seconds = done.result.get("seconds")
        result.details = {"exit_code": done.exit_code, "copier": done.result, "source": str(jvmcopier.SOURCE)}
        if done.exit_code != 0 or done.result.get("records") != size.records:
            raise RuntimeError(f"the JVM copier exited {done.exit_code} after {done.result.get('records')} records; "
                               f"see {ctx.settings.work_dir / 'logs'}")
        ctx.say(f"{result.records_per_second or 0:,.0f} records/s copying, {done.wall_seconds:.1f} s wall "
                f"({done.result.get('transactions')} transactions)")
        _verify(ctx, result, topic)

    def cleanup() -> None:
        topics.delete_topics(ctx.source_conf, [topic])
        topics.delete_topics(ctx.target_conf, [topic])
        topics.delete_groups(ctx.source_conf, [f"{topic}-jvmcopier"])

    return _guard(ctx, result, body, cleanup)


# --- 3./4. eosmirror -------------------------------------------------------------------------------

def _fill_mirror(result: ConfigResult, done: mirror_runs.MirrorRunResult) -> None:
    report = done.report
    result.wall_seconds, result.peak_rss, result.cpu = done.wall_seconds, done.peak.as_dict(), done.cpu
    result.steady_seconds = report.get("slot_seconds_max") or None
    result.details.update({
        "exit_code": done.exit_code, "status": report.get("status"), "run_records": report.get("records"),
        "driver_seconds": report.get("seconds"), "in_slot_records_per_second": report.get("records_per_second"),
        "slots_detail": [{k: s.get(k) for k in ("slot", "status", "records", "seconds", "transactions", "aborts",
                                                "step_seconds")}
                         for s in report.get("slots", [])],
        "run_steps": report.get("steps"),
        "log": str(done.log_path), "errors": report.get("errors") or report.get("error")})


def run_eosmirror(ctx: Context, size: SizeClass, delivery: str, slots: int,
                  then_empty_run: bool = False) -> list[ConfigResult]:
    short = "eos" if delivery == "exactly_once" else "alo"
    slug = f"{short}{slots}"
    topic = f"{ctx.settings.topic_prefix(slug)}-{size.slug}"
    name = topic   # the mirror's name; its internal topics and progress group derive from it
    master = ctx.settings.master if slots <= 2 else f"local[{slots}]"   # every slot needs a task thread
    result = ConfigResult(key=f"{size.name}/eosmirror-{delivery}-{slots}slots", kind="eosmirror",
                          label=f"eosmirror {delivery} ({slots} slots, {master})", size_class=size.name,
                          expected=size.records, record_bytes=size.record_bytes, delivery=delivery, slots=slots,
                          details={"master": master})
    empty = ConfigResult(key=f"{size.name}/eosmirror-empty-run", kind="eosmirror-empty",
                         label=f"eosmirror empty run ({slots} slots, nothing to copy)", size_class=size.name,
                         expected=0, record_bytes=size.record_bytes, delivery=delivery, slots=slots,
                         details={"master": master, "expected_target_count": size.records})
    results = [result] + ([empty] if then_empty_run else [])
    work = ctx.settings.work_dir
    config_path = work / "mirrors" / f"{name}.yaml"

    def body() -> None:
        _load(ctx, topic, size)
        mirror_runs.write_definition(config_path, name, [topic], slots, delivery, ctx.mirror_source_ref())
        ctx.say(f"eosmirror run {name} --master {master}")
        with TargetWatcher(ctx, topic, size.records):
            done = mirror_runs.run(name, config_path, master, work, ctx.settings.copy_timeout(size.records), slug + "-" + size.slug)
        _fill_mirror(result, done)
        if not done.ok or done.report.get("records") != size.records:
            raise RuntimeError(f"eosmirror run exited {done.exit_code}, status {done.report.get('status')}, "
                               f"{done.report.get('records')} records; see {done.log_path}")
        ctx.say(f"{result.records_per_second or 0:,.0f} records/s inside the slots, {done.wall_seconds:.1f} s "
                f"end to end ({result.end_to_end_records_per_second or 0:,.0f} records/s)")
        _verify(ctx, result, topic)
        if then_empty_run:
            _guard(ctx, empty, lambda: _empty_run(ctx, empty, name, config_path, master, topic), lambda: None)

    _guard(ctx, result, body, lambda: remove_mirror(ctx, topic, name))
    if then_empty_run and result.error and empty.error is None:
        empty.error = "not run: the copy before it failed"
    return results


def remove_mirror(ctx: Context, topic: str, name: str) -> None:
    """Clean-up of an eosmirror configuration: its source and target topics, internal topics and group."""
    topics.delete_topics(ctx.source_conf, [topic])
    topics.delete_topics(ctx.target_conf, [topic] + mirror_runs.internal_topics(name))
    for conf in (ctx.target_conf, ctx.source_conf):
        topics.delete_groups(conf, [mirror_runs.progress_group(name)])


def _empty_run(ctx: Context, empty: ConfigResult, name: str, config_path: Any, master: str, topic: str) -> None:
    """The same mirror again with nothing new on the source: the fixed cost of one scheduled run."""
    ctx.say("empty run: the same mirror again, nothing new to copy")
    done = mirror_runs.run(name, config_path, master, ctx.settings.work_dir, 300, f"empty-{name}")
    _fill_mirror(empty, done)
    if not done.ok or done.report.get("records") != 0:
        raise RuntimeError(f"the empty run exited {done.exit_code}, status {done.report.get('status')}, "
                           f"{done.report.get('records')} records; see {done.log_path}")
    ctx.say(f"empty run: {done.wall_seconds:.1f} s end to end")
    _verify(ctx, empty, topic)


# --- 5./6. MirrorMaker 2 ---------------------------------------------------------------------------

def run_mm2(ctx: Context, size: SizeClass, exactly_once: bool, tuned: bool = True, tasks: int = 2,
            variant: tuple[str, dict[str, str]] | None = None) -> ConfigResult:
    """MirrorMaker 2 at its defaults or tuned (``mm2.TUNED``); ``variant`` (name, settings) replaces
    both for a sweep."""
    suffix = "-" + re.sub(r"[^A-Za-z0-9]+", "-", variant[0]) if variant else ("-tuned" if tuned else "")
    slug = ("mm2-eos" if exactly_once else "mm2-alo") + suffix
    topic = f"{ctx.settings.topic_prefix(slug)}-{size.slug}"
    delivery = "exactly_once" if exactly_once else "at_least_once"
    how = variant[0] if variant else "tuned: mm2.TUNED" if tuned else "defaults"
    result = ConfigResult(key=f"{size.name}/mm2-{delivery}{suffix}" + (f"-{tasks}tasks" if tasks != 2 else ""),
                          kind="mm2",
                          label=f"MirrorMaker 2 {'exactly-once' if exactly_once else 'at-least-once'} ({tasks} tasks, {how})",
                          size_class=size.name, expected=size.records, record_bytes=size.record_bytes,
                          delivery=delivery, slots=tasks, details={"tuned": tuned or bool(variant)})
    extra = {**(variant[1] if variant else mm2.TUNED if tuned else {}), **ctx.settings.mm2_properties}
    uid = uuid.uuid4().hex[:6]
    source_alias, target_alias = f"src{uid}", f"tgt{uid}"   # fresh aliases: fresh MM2 state
    folder = ctx.settings.mm2_dir / f"{ctx.settings.run_id}-{slug}-{size.slug}"

    def body() -> None:
        _load(ctx, topic, size)
        props = mm2.properties(source_alias, target_alias, ctx.mirror_source, ctx.target, topic, exactly_once,
                               mm2.free_port(), tasks=tasks, extra=extra)
        ctx.say(f"MirrorMaker 2 ({source_alias}->{target_alias}), properties in {folder / 'mm2.properties'}")
        done = mm2.run(props, folder, ctx.target_conf, topic, PARTITIONS, size.records,
                       ctx.settings.copy_timeout(size.records), ctx.say)
        result.peak_rss, result.cpu = done.peak.as_dict(), done.cpu
        eos_on = bool(done.evidence.get("exactly_once_source_tasks")) and bool(done.evidence.get("transactional_ids"))
        result.details = {"tuned": tuned, "settings": extra, "properties": str(folder / "mm2.properties"),
                          "exit_code_after_stop": done.exit_code,
                          "seconds_to_first_record": done.start_to_first, "evidence": done.evidence,
                          "exactly_once_confirmed": eos_on}
        if done.error:
            raise RuntimeError(done.error)
        result.wall_seconds = done.start_to_done
        copying = done.start_to_done - done.start_to_first if done.start_to_first is not None else 0.0
        # Offsets are polled every 0.25 s: a copy shorter than a second cannot be timed from its
        # first record (small N); then only the end-to-end rate is reported.
        if copying >= 1.0:
            result.steady_seconds = copying
        else:
            result.details["steady_note"] = f"copy took {copying:.2f} s after the first record: too short to time"
        first = "-" if done.start_to_first is None else f"{done.start_to_first:.1f} s"
        ctx.say(f"{size.records:,} committed after {done.start_to_done:.1f} s (first record at {first}); "
                f"exactly-once source tasks: {eos_on}")
        _verify(ctx, result, topic, counted=(done.final_count, done.offsets))
        if exactly_once and not eos_on:
            result.verified = False
            result.error = "MirrorMaker 2 did not run exactly-once source tasks (see evidence)"

    def cleanup() -> None:
        for conf in (ctx.source_conf, ctx.target_conf):
            made = [t for t in topics.topics_containing(conf, uid) if source_alias in t or target_alias in t]
            topics.delete_topics(conf, [topic] + made)
        topics.delete_groups(ctx.target_conf, [f"{source_alias}-mm2"])

    return _guard(ctx, result, body, cleanup)
