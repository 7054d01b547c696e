"""eosmirror through the run server (``eosmirror run --server``; plugins/eosmirror/spark/server.py).

The server is started before the configuration, like the brokers, and is not timed: it is the
long-lived part of this run shape. What is timed is what a scheduled run pays: the client command,
process start to exit. Its cost is counted in full: the CPU of the client's tree plus what the
server's whole tree (its JVM, Python driver, daemon and workers) spent while the client ran, and
peak RSS of both trees. Then the same mirror runs again with nothing new (the empty run).
"""

from __future__ import annotations

import time
from typing import Any

from eosmirror_tools.bench import mirror_runs
from eosmirror_tools.bench.configurations import (
    Context,
    TargetWatcher,
    _fill_mirror,
    _guard,
    _load,
    _verify,
    remove_mirror,
)
from eosmirror_tools.bench.results import ConfigResult
from eosmirror_tools.bench.settings import SizeClass
from eosmirror_tools.kit.processes import CLOCK_TICKS, TreeSampler, cpu_ticks, process_tree


def _ensure_server(ctx: Context) -> tuple[dict[str, Any], bool]:
    """(the server's ping answer, whether this call started it)."""
    from eosmirror.spark import serverclient

    answer = serverclient.status()
    if answer:
        return answer, False
    ctx.say("starting the run server (eosmirror server start; not timed, like the brokers)")
    started = serverclient.start()
    ctx.say(f"run server ready in {started['seconds']} s (master {started['master']})")
    return started, True


def _served_run(ctx: Context, result: ConfigResult, server: dict[str, Any], name: str, config_path: Any,
                timeout: float, label: str) -> mirror_runs.MirrorRunResult:
    """One ``eosmirror run --server``, with the server tree's CPU and RSS added to the client's."""
    root = server["jvm_pid"]
    baseline = sum(cpu_ticks(pid) for pid in process_tree(root)) / CLOCK_TICKS
    sampler = TreeSampler(root).start()
    try:
        done = mirror_runs.run(name, config_path, None, ctx.settings.work_dir, timeout, label)
    finally:
        peak = sampler.stop()
    _fill_mirror(result, done)
    spent = max(peak.cpu_seconds - baseline, 0.0)
    cpu = dict(result.cpu)
    if cpu:
        cpu["run_server_seconds"] = round(spent, 2)
        cpu["program_seconds"] = round(cpu.get("program_seconds", 0.0) + spent, 2)
        cpu["program_by_role_seconds"] = {**cpu.get("program_by_role_seconds", {}), "run server": round(spent, 2)}
        cpu["other_seconds"] = round(max(cpu.get("other_seconds", 0.0) - spent, 0.0), 2)
    result.cpu = cpu
    rss = dict(result.peak_rss)
    rss["total_mb"] = round(rss.get("total_mb", 0.0) + peak.total_mb, 1)
    rss["by_role_mb"] = {**rss.get("by_role_mb", {}), "run server": round(peak.total_mb, 1)}
    result.peak_rss = rss
    result.details["run_server"] = {"pid": server["pid"], "master": server["master"], "cpu_seconds": round(spent, 2),
                                    "peak_rss_mb": round(peak.total_mb, 1)}
    return done


def run_eosmirror_served(ctx: Context, size: SizeClass, slots: int, then_empty_run: bool = False,
                         delivery: str = "exactly_once") -> list[ConfigResult]:
    from eosmirror.spark import serverclient

    slug = f"srv{'' if delivery == 'exactly_once' else 'alo'}{slots}"
    topic = f"{ctx.settings.topic_prefix(slug)}-{size.slug}"
    name = topic
    result = ConfigResult(key=f"{size.name}/eosmirror-served-{delivery}-{slots}slots", kind="eosmirror-served",
                          label=f"eosmirror {delivery} in the run server ({slots} slots)", size_class=size.name,
                          expected=size.records, record_bytes=size.record_bytes, delivery=delivery,
                          slots=slots, details={"master": "run server"})
    empty = ConfigResult(key=f"{size.name}/eosmirror-served-empty-run", kind="eosmirror-served-empty",
                         label=f"eosmirror empty run in the run server ({slots} slots)", size_class=size.name,
                         expected=0, record_bytes=size.record_bytes, delivery="exactly_once", slots=slots,
                         details={"master": "run server", "expected_target_count": size.records})
    results = [result] + ([empty] if then_empty_run else [])
    config_path = ctx.settings.work_dir / "mirrors" / f"{name}.yaml"
    started_here = [False]

    def body() -> None:
        _load(ctx, topic, size)
        mirror_runs.write_definition(config_path, name, [topic], slots, delivery, ctx.mirror_source_ref())
        server, started_here[0] = _ensure_server(ctx)
        time.sleep(1)   # the server's own start (class loading, warm workers) settles before the clock runs
        ctx.say(f"eosmirror run {name} --server")
        with TargetWatcher(ctx, topic, size.records):
            done = _served_run(ctx, result, server, name, config_path, ctx.settings.copy_timeout(size.records),
                               f"{slug}-{size.slug}")
        if not done.ok or done.report.get("records") != size.records:
            raise RuntimeError(f"eosmirror run --server exited {done.exit_code}, status {done.report.get('status')}, "
                               f"{done.report.get('records')} records; see {done.log_path}")
        ctx.say(f"{result.records_per_second or 0:,.0f} records/s inside the slots, {done.wall_seconds:.1f} s "
                f"end to end ({result.end_to_end_records_per_second or 0:,.0f} records/s)")
        _verify(ctx, result, topic)
        if then_empty_run:
            def empty_run() -> None:
                ctx.say("empty run in the run server: the same mirror again, nothing new to copy")
                again = _served_run(ctx, empty, server, name, config_path, 300, f"empty-{name}")
                if not again.ok or again.report.get("records") != 0:
                    raise RuntimeError(f"the empty run exited {again.exit_code}, {again.report.get('records')} "
                                       f"records; see {again.log_path}")
                ctx.say(f"empty run in the run server: {again.wall_seconds:.2f} s end to end")
                _verify(ctx, empty, topic)
            _guard(ctx, empty, empty_run, lambda: None)

    def cleanup() -> None:
        if started_here[0]:
            serverclient.stop()
        remove_mirror(ctx, topic, name)

    _guard(ctx, result, body, cleanup)
    if then_empty_run and result.error and empty.error is None:
        empty.error = "not run: the copy before it failed"
    return results
