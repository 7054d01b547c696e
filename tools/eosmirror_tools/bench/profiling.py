"""Optional profiles (``--profile``): where eosmirror's time goes, with pyinstrument.

  copy loop   one slot (all 8 partitions, exactly_once) run by ``copy.run_slot`` in the bench's
              main thread: pyinstrument samples only the thread that started it, and
              ``eosmirror run --inprocess`` runs its slots in worker threads.
  empty run   ``eosmirror run`` of a mirror with nothing to copy, with Spark's driver Python started
              under pyinstrument (``spark.pyspark.driver.python`` points at a wrapper script): the
              fixed cost of a run, minus the JVM launch before Python starts.

Outputs: build/bench/profile-copy.txt and profile-empty-run.txt, plus a "self time by function"
summary in report.json (C calls such as ``Producer.produce`` show up as functions of their own).
"""

from __future__ import annotations

import re
import stat
import sys
from typing import Any

from eosmirror_tools.bench import dataset, mirror_runs
from eosmirror_tools.bench.configurations import Context
from eosmirror_tools.bench.settings import PARTITIONS, SizeClass
from eosmirror_tools.kit import topics

PROFILE_RECORDS_MAX = 200_000   # enough for a stable profile; pyinstrument slows the loop a little


def _self_time_by_function(root: Any, top: int = 15) -> list[dict[str, Any]]:
    totals: dict[str, float] = {}
    todo = [root]
    while todo:
        frame = todo.pop()
        todo.extend(frame.children)
        if frame.is_synthetic:   # "[self]" frames: their time is already the parent's self time
            continue
        name = f"{frame.function} ({frame.file_path_short}:{frame.line_no})" if frame.file_path_short else frame.function
        totals[name] = totals.get(name, 0.0) + frame.total_self_time
    whole = root.time or 1.0
    ranked = sorted(totals.items(), key=lambda kv: kv[1], reverse=True)[:top]
    return [{"function": name, "seconds": round(sec, 3), "share": round(sec / whole, 3)} for name, sec in ranked]


def profile_copy(ctx: Context, records: int) -> dict[str, Any]:
    from pyinstrument import Profiler

    from eosmirror import driver
    from eosmirror.core import config
    from eosmirror.slot.copier import run_slot

    size = SizeClass("200B", 200, records)
    topic = f"{ctx.settings.topic_prefix('profile-copy')}-200b"
    path = ctx.settings.out_dir / "profile-copy.txt"
    try:
        topics.create_topics(ctx.source_conf, [topic], PARTITIONS, "source")
        dataset.load(ctx.source_conf, topic, size)
        mirror = config.parse({"mirrors": [{"name": topic, "source": {"local": "source"}, "target": {"local": "target"},
                                            "topics": [re.escape(topic)], "slots": 1,
                                            "target_replication_factor": 1}]}, ctx.settings.work_dir / "profile.yaml"
                              ).mirrors[0]
        mirror_run = driver.MirrorRun(mirror)
        prepared = mirror_run.prepare()
        (task,) = [t for t in mirror_run.slot_tasks(prepared) if t.partitions]
        profiler = Profiler(interval=0.001)
        profiler.start()
        result = run_slot(task)
        profiler.stop()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(profiler.output_text(unicode=False, color=False, show_all=False))
        session = profiler.last_session
        rate = result.records / result.seconds if result.seconds else None
        ctx.say(f"copy loop: {result.records:,} records in {result.seconds:.2f} s under the profiler "
                f"({rate or 0:,.0f} records/s); {path}")
        return {"path": str(path), "records": result.records, "slot_seconds": result.seconds,
                "status": result.status.value, "profiled_duration": round(session.duration, 3),
                "summary": f"one slot, {result.records:,} records, {rate or 0:,.0f} records/s under the profiler",
                "self_time_by_function": _self_time_by_function(session.root_frame())}
    finally:
        if not ctx.settings.keep_topics:
            topics.delete_topics(ctx.source_conf, [topic])
            topics.delete_topics(ctx.target_conf, [topic] + mirror_runs.internal_topics(topic))
            topics.delete_groups(ctx.target_conf, [mirror_runs.progress_group(topic)])


def _driver_wrapper(ctx: Context, outfile: str) -> str:
    """A script Spark starts instead of the driver Python: the same interpreter under pyinstrument."""
    wrapper = ctx.settings.work_dir / "pyinstrument-driver.sh"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pyinstrument --no-color --no-unicode -r text '
                       f'-o "{outfile}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


def profile_empty_run(ctx: Context) -> dict[str, Any]:
    import yaml

    size = SizeClass("200B", 200, 1000)
    topic = f"{ctx.settings.topic_prefix('profile-empty')}-200b"
    path = ctx.settings.out_dir / "profile-empty-run.txt"
    config_path = ctx.settings.work_dir / "mirrors" / f"{topic}.yaml"
    work = ctx.settings.work_dir
    try:
        topics.create_topics(ctx.source_conf, [topic], PARTITIONS, "source")
        dataset.load(ctx.source_conf, topic, size)
        mirror_runs.write_definition(config_path, topic, [topic], 2, "exactly_once")
        first = mirror_runs.run(topic, config_path, ctx.settings.master, work, 300, "profile-fill")
        if not first.ok:
            raise RuntimeError(f"the run before the profiled one failed; see {first.log_path}")
        # Same mirror, now with the driver under pyinstrument.
        document = yaml.safe_load(config_path.read_text())
        document["mirrors"][0]["spark_conf"] = {"spark.pyspark.driver.python": _driver_wrapper(ctx, str(path))}
        config_path.write_text(yaml.safe_dump(document, sort_keys=False))
        done = mirror_runs.run(topic, config_path, ctx.settings.master, work, 300, "profile-empty")
        text = path.read_text() if path.exists() else ""
        found = re.search(r"Duration: ([\d.]+)", text)
        driver_seconds = float(found.group(1)) if found else None
        ctx.say(f"empty run: {done.wall_seconds:.1f} s wall, driver Python {driver_seconds or 0:.1f} s of it; {path}")
        return {"path": str(path), "wall_seconds": round(done.wall_seconds, 2), "driver_python_seconds": driver_seconds,
                "exit_code": done.exit_code, "records": done.report.get("records"),
                "summary": f"wall {done.wall_seconds:.1f} s, of which driver Python {driver_seconds or 0:.1f} s "
                           f"(the rest: JVM launch before and teardown after Python)"}
    finally:
        if not ctx.settings.keep_topics:
            topics.delete_topics(ctx.source_conf, [topic])
            topics.delete_topics(ctx.target_conf, [topic] + mirror_runs.internal_topics(topic))
            topics.delete_groups(ctx.target_conf, [mirror_runs.progress_group(topic)])


def run_all(ctx: Context) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, job in (("copy_loop", lambda: profile_copy(ctx, min(ctx.settings.records, PROFILE_RECORDS_MAX))),
                      ("empty_run", lambda: profile_empty_run(ctx))):
        try:
            out[name] = job()
        except Exception as exc:  # noqa: BLE001 - a profile is extra information, never a failure
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
            ctx.say(f"{name} profile failed: {exc}")
    return out
