"""Costs that grow with the partition count (issues #23, #44): a mirror of many partitions holding few records.

Per shape (``topics`` topics x ``partitions`` partitions, ``RECORDS`` records of 200 B each, 4 slots),
each step timed as a user starts it (``python -m eosmirror.cli ...``, process start to exit, RSS of the
process tree sampled): the first run (copies everything; its target topic creation, the run's "target
sync" step, is reported apart), then at once, with no wait for the first run's commits to land (issue
#44), an empty run (copies nothing), ``verify`` and ``lag`` each right after the one before, then
``groups sync`` of consumer groups committed on the source (each on ``group_partitions`` partitions,
offset ``RECORDS // 2``). From the first run's end, beside those steps, the target is polled until
every copied record is visible to read_committed consumers (``visible_seconds``: every last stable offset
at its high watermark). A shape is verified when every step exited as it should, the first run copied
every record, the empty run none, verify found every record identical, and groups sync wrote every group.

Full size only: MirrorMaker 2 exactly-once, tuned as in the bench's mm2 rows (``mm2.TUNED``, 2 tasks),
copies the same 5,000-partition source topic (into ``<alias>.<topic>``: the identity name is eosmirror's),
timed from its process start until a read_committed count on the target reaches every record; beside it
eosmirror's end to end: the first run plus the time until its records were visible.
Rows go to build/bench/scale.json and the report; the issue's goals are the targets (full size only).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from eosmirror_tools.kit import measured, topics

RECORDS = 200                 # per partition
VALUE_BYTES = 200
SLOTS = 4
PYTHON_ROLES = ("eosmirror CLI", "python driver", "python workers")


@dataclass(frozen=True)
class Shape:
    topics: int
    partitions: int            # per topic
    groups: int
    group_partitions: int

    @property
    def total(self) -> int:
        return self.topics * self.partitions

    @property
    def slug(self) -> str:
        return f"{self.topics}x{self.partitions}"


FULL = (Shape(1, 500, 1_000, 20), Shape(1, 5_000, 1_000, 20), Shape(1_000, 5, 1_000, 5))
QUICK = (Shape(1, 50, 20, 10), Shape(1, 500, 50, 10), Shape(20, 5, 20, 5))   # about 70 s in all
# (shape slug, column, goal in seconds): the goals on a quiet machine.
GOALS = (("1x5000", "visible_after_first_run_s", 5), ("1x5000", "empty_run_s", 8), ("1x5000", "first_run_s", 30), ("1x5000", "verify_s", 30),
         ("1x5000", "groups_sync_s", 30), ("1x5000", "lag_s", 2), ("1000x5", "empty_run_s", 8),
         ("1000x5", "first_run_s", 30), ("1000x5", "verify_s", 30), ("1000x5", "lag_s", 2))
RSS_GOAL_MB = 500
MM2_SHAPE = "1x5000"          # full size: MirrorMaker 2 exactly-once copies this shape's data too
MM2_GOAL_RATIO = 1.5          # eosmirror end to end at least this many times faster than tuned MM2 EOS
FEW_PARTITIONS = 8            # issue #44: the same records over this many partitions, the first run's reference
FEW_GOAL_RATIO = 2.0          # the first run's copy at 5,000 partitions at most this many times the reference's


def _create(conf: dict[str, Any], names: list[str], partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(conf)
    for at in range(0, len(names), 200):   # a few CreateTopics of 200: one huge request times out
        futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names[at:at + 200]], request_timeout=120)
        for future in futures.values():
            future.result(180)


def _produce(conf: dict[str, Any], names: list[str], partitions: int, records: int = RECORDS) -> None:
    from confluent_kafka import Producer

    producer = Producer({**conf, "linger.ms": 20, "batch.num.messages": 10_000, "queue.buffering.max.messages":
                         1_000_000, "compression.type": "none"})
    value = b"v" * VALUE_BYTES
    for name in names:
        for p in range(partitions):
            for i in range(records):
                producer.produce(name, key=b"%016d" % i, value=value, partition=p, headers=[("bench", b"1")])
                if i % 10_000 == 9_999:
                    producer.poll(0)
            producer.poll(0)
    if producer.flush(300) != 0:
        raise RuntimeError("the scale data set was not fully produced within 300 s")


def _commit_groups(conf: dict[str, Any], prefix: str, names: list[str], shape: Shape) -> list[str]:
    """``shape.groups`` groups on the source, each committed at RECORDS // 2 on its partitions."""
    from confluent_kafka import Consumer, TopicPartition

    every = [(n, p) for n in names for p in range(shape.partitions)]
    groups = [f"{prefix}-g{g}" for g in range(shape.groups)]

    def commit(index: int) -> None:
        tps = [every[(index * shape.group_partitions + j) % len(every)] for j in range(shape.group_partitions)]
        consumer = Consumer({**conf, "group.id": groups[index], "enable.auto.commit": False})
        try:
            consumer.commit(offsets=[TopicPartition(t, p, RECORDS // 2) for t, p in tps], asynchronous=False)
        finally:
            consumer.close()

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(commit, range(len(groups))))
    return groups


def _definition(path: Path, name: str, prefix: str) -> Path:
    import yaml

    mirror = {"name": name, "source": {"local": "source"}, "target": {"local": "target"},
              "topics": [f"{prefix}-t.*"], "slots": SLOTS, "delivery": "exactly_once",
              "target_replication_factor": 1, "groups": {"include": [f"{prefix}-g.*"]}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"mirrors": [mirror]}, sort_keys=False))
    return path


def _step(work: Path, label: str, args: list[str], timeout: float) -> dict[str, Any]:
    log_path = work / "logs" / f"{label}.log"
    with measured.child([sys.executable, "-m", "eosmirror.cli", *args], log_path) as child:
        code = child.wait(timeout)
    lines = log_path.read_text(errors="replace")
    # Per process, not summed per role: forked slot workers share their parent's pages.
    rss = {role: round(mb, 1) for role, mb in child.peak.largest_by_role_mb.items() if role in PYTHON_ROLES}
    return {"exit_code": code, "seconds": round(child.seconds, 2), "python_rss_mb": rss, "log": str(log_path),
            "tail": lines[-2000:]}


def _json_of(log_path: str) -> Any:
    """The JSON document a `--json` command printed (its log also holds librdkafka and Python logs)."""
    text = "\n" + Path(log_path).read_text(errors="replace")
    start, end = text.find("\n{\n"), text.rfind("\n}")
    try:
        return json.loads(text[start:end + 2]) if 0 <= start < end else None
    except ValueError:
        return None


def visible_seconds(target_conf: dict[str, Any], keys: list[tuple[str, int]], since: float,
                    budget: float = 300.0, every: float = 0.5) -> dict[str, Any]:
    """From ``since`` (time.monotonic() at a run's end), poll the target partitions ``keys`` (ListOffsets
    read_committed against read_uncommitted) until every last stable offset has reached its high
    watermark: every record copied is then visible to read_committed consumers (the markers of the
    run's commits are written). Returns the seconds from ``since`` (None: not within ``budget``), how
    many partitions were pending at the first poll, and the polls' (seconds, pending) curve."""
    from confluent_kafka.admin import AdminClient, OffsetSpec

    from eosmirror.kafka.offsets import list_offsets

    admin = AdminClient(target_conf)
    latest = {k: OffsetSpec.latest() for k in keys}
    curve: list[tuple[float, int]] = []
    while True:
        # As of the read_committed answer: a last stable offset equal to a high watermark read after it was at
        # the high watermark of its own time (a poll of 5,000 partitions takes seconds under load).
        committed = list_offsets(admin, latest, "target")
        now = time.monotonic() - since
        uncommitted = list_offsets(admin, latest, "target", read_committed=False)
        pending = sum(1 for k in keys if committed.get(k) != uncommitted.get(k))
        curve.append((round(now, 2), pending))
        if not pending:
            return {"seconds": round(now, 2), "pending_at_first_poll": curve[0][1], "curve": curve}
        if time.monotonic() - since > budget:
            return {"seconds": None, "pending_at_first_poll": curve[0][1], "curve": curve}
        time.sleep(every)


def run_shape(source_conf: dict[str, Any], target_conf: dict[str, Any], shape: Shape, run_id: str, work: Path,
              say: Callable[[str], None]) -> dict[str, Any]:
    prefix = f"scale-{run_id}-{shape.slug}"
    names = [f"{prefix}-t{i}" for i in range(shape.topics)]
    started = time.monotonic()
    _create(source_conf, names, shape.partitions)
    _produce(source_conf, names, shape.partitions)
    groups = _commit_groups(source_conf, prefix, names, shape)
    say(f"{shape.slug}: {shape.total:,} partitions x {RECORDS} records and {len(groups)} groups ready "
        f"({time.monotonic() - started:.0f} s)")
    config = str(_definition(work / f"{shape.slug}.yaml", prefix, prefix))
    budget = 600.0 + shape.total / 10
    result = work / "results" / f"{shape.slug}-first.json"
    result.parent.mkdir(parents=True, exist_ok=True)
    run_args = ["run", prefix, "--config", config, "--master", "local[2]"]
    steps = {"first_run": _step(work, f"{shape.slug}-first", run_args + ["--result-json", str(result)], budget)}
    ended = time.monotonic()
    first = json.loads(result.read_text()) if result.exists() else {}
    keys = [(n, p) for n in names for p in range(shape.partitions)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        # Beside the next steps, which start at once (issue #44: right after a run, everything works).
        visible = pool.submit(visible_seconds, target_conf, keys, ended)
        result_empty = work / "results" / f"{shape.slug}-empty.json"
        steps["empty_run"] = _step(work, f"{shape.slug}-empty", run_args + ["--result-json", str(result_empty)],
                                   budget)
        steps["verify"] = _step(work, f"{shape.slug}-verify", ["verify", prefix, "--config", config], budget)
        steps["lag"] = _step(work, f"{shape.slug}-lag", ["lag", prefix, "--config", config, "--json"], budget)
        seen = visible.result()
    empty = json.loads(result_empty.read_text()) if result_empty.exists() else {}
    steps["groups_sync"] = _step(work, f"{shape.slug}-groups", ["groups", "sync", prefix, "--config", config,
                                                                 "--json"], budget)
    synced = _json_of(steps["groups_sync"]["log"]) or {}
    written = sum(1 for g in synced.get("groups", []) if g.get("written"))
    checks = {"first_run_copied_all": first.get("records") == shape.total * RECORDS,
              "empty_run_copied_none": steps["empty_run"]["exit_code"] == 0 and empty.get("records") == 0,
              "verify_identical": steps["verify"]["exit_code"] == 0 and
              f"verified {shape.total} partitions, {shape.total * RECORDS} records: all identical"
              in steps["verify"]["tail"],
              "groups_written": written == len(groups), "lag_read": steps["lag"]["exit_code"] in (0, 1),
              "all_visible": seen["seconds"] is not None}
    creation = (first.get("steps") or {}).get("target sync")
    rss = [mb for step in steps.values() for mb in step["python_rss_mb"].values()]
    row = {"shape": shape.slug, "topics": shape.topics, "partitions": shape.total, "records": shape.total * RECORDS,
           "groups": len(groups), "group_partitions": shape.group_partitions,
           **{f"{name}_s": step["seconds"] for name, step in steps.items()},
           "first_run_target_topics_s": creation,
           "first_run_copy_s": round(steps["first_run"]["seconds"] - creation, 2) if creation is not None else None,
           "visible_after_first_run_s": seen["seconds"], "pending_at_first_run_end": seen["pending_at_first_poll"],
           "end_to_end_s": round(steps["first_run"]["seconds"] + seen["seconds"], 2)
           if seen["seconds"] is not None and checks["first_run_copied_all"] else None,
           "exit_codes": {name: step["exit_code"] for name, step in steps.items()},
           "peak_rss_mb": round(max(rss), 1) if rss else None,
           "peak_rss_by_step_mb": {name: step["python_rss_mb"] for name, step in steps.items()},
           "first_run_steps": first.get("steps"), "empty_run_steps": empty.get("steps"),
           "checks": checks, "verified": all(checks.values()),
           "failed_logs": {name: step["log"] for name, step in steps.items() if step["exit_code"] not in (0, 1)}}
    say(f"{shape.slug}: first {row['first_run_s']} s (target topics {creation} s of it; every record visible "
        f"{seen['seconds']} s after its end, {seen['pending_at_first_poll']} partitions pending then), right "
        f"after it: empty run {row['empty_run_s']} s (exit {steps['empty_run']['exit_code']}), verify "
        f"{row['verify_s']} s (exit {steps['verify']['exit_code']}), lag {row['lag_s']} s (exit "
        f"{steps['lag']['exit_code']}); groups sync {row['groups_sync_s']} s, peak RSS {row['peak_rss_mb']} MB; "
        f"load {', '.join(f'{x:.1f}' for x in os.getloadavg())}"
        + ("" if row["verified"] else f"  NOT VERIFIED: {[k for k, ok in checks.items() if not ok]}"))
    return row


def mm2_beside(source_conf: dict[str, Any], target_conf: dict[str, Any], names: list[str], shape: Shape,
               row: dict[str, Any], folder: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """MirrorMaker 2 exactly-once, tuned as the bench's mm2 rows (mm2.TUNED, 2 tasks), copies the shape's
    source topic (one topic) into ``<source alias>.<topic>`` (DefaultReplicationPolicy: the identity name
    holds eosmirror's copy); timed from its process start until a read_committed count on the target
    reaches every record, beside eosmirror's end to end (first run + until its records were visible)."""
    import re
    import uuid

    from eosmirror_tools.kit import mm2

    (topic,) = names
    uid = uuid.uuid4().hex[:6]
    source_alias, target_alias = f"src{uid}", f"tgt{uid}"
    extra = {**mm2.TUNED, "replication.policy.class": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"}
    props = mm2.properties(source_alias, target_alias, source_conf["bootstrap.servers"],
                           target_conf["bootstrap.servers"], re.escape(topic), True, mm2.free_port(), tasks=2,
                           extra=extra)
    say(f"{shape.slug}: MirrorMaker 2 exactly-once (2 tasks, mm2.TUNED) on the same {shape.total * RECORDS:,} "
        f"records, properties in {folder / 'mm2.properties'}")
    try:
        done = mm2.run(props, folder, target_conf, f"{source_alias}.{topic}", shape.partitions, shape.total * RECORDS,
                       1800.0, lambda text: say(f"{shape.slug}: MirrorMaker 2: {text}"))
    finally:
        for conf in (source_conf, target_conf):
            topics.delete_topics(conf, topics.topics_containing(conf, uid))
        topics.delete_groups(target_conf, [f"{source_alias}-mm2"])
    eos_on = bool(done.evidence.get("exactly_once_source_tasks")) and bool(done.evidence.get("transactional_ids"))
    ours = row.get("end_to_end_s")
    out = {"tasks": 2, "settings": "mm2.TUNED", "records": shape.total * RECORDS, "error": done.error,
           "start_to_done_s": round(done.start_to_done, 2) if not done.error else None,
           "start_to_first_record_s": round(done.start_to_first, 2) if done.start_to_first is not None else None,
           "read_committed_count": done.final_count, "exactly_once_confirmed": eos_on,
           "eosmirror_end_to_end_s": ours, "load_average_after": os.getloadavg()}
    out["verified"] = not done.error and eos_on and done.final_count == shape.total * RECORDS
    out["eosmirror_speedup"] = (round(out["start_to_done_s"] / ours, 2)
                                if out["verified"] and ours else None)
    say(f"{shape.slug}: MirrorMaker 2 exactly-once: {out['start_to_done_s']} s from its start until "
        f"{out['read_committed_count']:,} records were counted read_committed (first record at "
        f"{out['start_to_first_record_s']} s; exactly-once tasks: {eos_on}); eosmirror end to end {ours} s: "
        f"x{out['eosmirror_speedup']}" + (f"  FAILED: {done.error}" if done.error else ""))
    return out


def few_partitions_beside(source_conf: dict[str, Any], target_conf: dict[str, Any], shape: Shape, run_id: str,
                          row: dict[str, Any], work: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """The first run's reference (issue #44): the shape's records (RECORDS x partitions, 200 B each) in one
    topic of FEW_PARTITIONS partitions, copied by a first run of the same mirror definition (4 slots,
    ``local[2]``); its copy (the run minus its target sync step) beside the shape's copy."""
    prefix = f"scale-{run_id}-few"
    name = f"{prefix}-t0"
    per_partition = shape.total * RECORDS // FEW_PARTITIONS
    try:
        _create(source_conf, [name], FEW_PARTITIONS)
        _produce(source_conf, [name], FEW_PARTITIONS, per_partition)
        config = str(_definition(work / "few.yaml", prefix, prefix))
        result = work / "results" / "few-first.json"
        result.parent.mkdir(parents=True, exist_ok=True)
        step = _step(work, "few-first", ["run", prefix, "--config", config, "--master", "local[2]",
                                         "--result-json", str(result)], 600.0)
        report = json.loads(result.read_text()) if result.exists() else {}
    finally:
        _cleanup(source_conf, target_conf, prefix)
    creation = (report.get("steps") or {}).get("target sync")
    copy_s = round(step["seconds"] - creation, 2) if creation is not None else None
    ours = row.get("first_run_copy_s")
    out = {"partitions": FEW_PARTITIONS, "records": per_partition * FEW_PARTITIONS, "first_run_s": step["seconds"],
           "target_topics_s": creation, "copy_s": copy_s, "exit_code": step["exit_code"],
           "verified": step["exit_code"] == 0 and report.get("records") == per_partition * FEW_PARTITIONS}
    out["copy_ratio"] = round(ours / copy_s, 2) if out["verified"] and ours and copy_s else None
    say(f"{shape.slug}: the same {out['records']:,} records over {FEW_PARTITIONS} partitions: first run "
        f"{step['seconds']} s (target topics {creation} s of it), copy {copy_s} s; the {shape.total:,}-partition "
        f"copy {ours} s: x{out['copy_ratio']}" + ("" if out["verified"] else "  NOT VERIFIED"))
    return out


def _cleanup(source_conf: dict[str, Any], target_conf: dict[str, Any], prefix: str) -> None:
    """Best effort: the shape's topics (``prefix``-*) and its mirror's internal topics on both clusters."""
    from confluent_kafka.admin import AdminClient

    for conf in (source_conf, target_conf):
        admin = AdminClient(conf)
        try:
            names = [t for t in admin.list_topics(timeout=30).topics
                     if t.startswith(prefix + "-") or f".{prefix}." in t]
            if names:
                for future in admin.delete_topics(names, request_timeout=120).values():
                    future.exception(180)
        except Exception:  # noqa: BLE001 - cleanup only
            pass


def growth(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """first/last ratio of each time between the one-topic shapes (issue: 500 -> 5,000 partitions)."""
    single = sorted((r for r in rows if r["topics"] == 1), key=lambda r: r["partitions"])
    if len(single) < 2:
        return {}
    low, high = single[0], single[-1]
    out: dict[str, float | None] = {"from_partitions": low["partitions"], "to_partitions": high["partitions"]}
    for column in ("empty_run_s", "first_run_s", "verify_s", "groups_sync_s", "lag_s"):
        out[column] = round(high[column] / low[column], 2) if low[column] else None
    return out


def targets(section: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not section or section.get("quick"):
        return []
    rows = {r["shape"]: r for r in section["rows"]}
    out = [{"target": f"scale {shape}: {column[:-2].replace('_', ' ')} (s)", "goal": f"<= {goal}",
            "measured": rows[shape][column], "met": rows[shape][column] is not None and rows[shape][column] <= goal}
           for shape, column, goal in GOALS if shape in rows]
    grow = section.get("growth") or {}
    for column, limit in (("empty_run_s", 2.0), ("first_run_s", 3.0)):
        if grow.get(column) is not None:
            out.append({"target": f"scale growth 500 -> 5,000 partitions: {column[:-2].replace('_', ' ')}",
                        "goal": f"<= {limit}x", "measured": grow[column], "met": grow[column] <= limit})
    out += [{"target": f"scale {r['shape']}: eosmirror end to end (first run + visible) vs tuned MirrorMaker 2 "
                       f"exactly-once", "goal": f">= {MM2_GOAL_RATIO}x", "measured": r["mm2"]["eosmirror_speedup"],
             "met": r["mm2"]["eosmirror_speedup"] is not None and r["mm2"]["eosmirror_speedup"] >= MM2_GOAL_RATIO}
            for r in section["rows"] if r.get("mm2")]
    out += [{"target": f"scale {r['shape']}: the first run's copy vs the same records over {FEW_PARTITIONS} "
                       f"partitions", "goal": f"<= {FEW_GOAL_RATIO}x", "measured": r["few_partitions"]["copy_ratio"],
             "met": r["few_partitions"]["copy_ratio"] is not None
             and r["few_partitions"]["copy_ratio"] <= FEW_GOAL_RATIO}
            for r in section["rows"] if r.get("few_partitions")]
    out += [{"target": f"scale {r['shape']}: peak RSS of a Python process (MB)", "goal": f"< {RSS_GOAL_MB}",
             "measured": r["peak_rss_mb"], "met": r["peak_rss_mb"] is not None and r["peak_rss_mb"] < RSS_GOAL_MB}
            for r in section["rows"] if r["partitions"] >= 5_000]
    return out


def run(source_conf: dict[str, Any], target_conf: dict[str, Any], quick: bool, keep_topics: bool, run_id: str,
        work: Path, say: Callable[[str], None]) -> dict[str, Any]:
    from eosmirror.kafka import clients

    quiet = {"log_level": clients.librdkafka_log_level()}
    source_conf, target_conf = {**source_conf, **quiet}, {**target_conf, **quiet}
    rows = []
    for shape in QUICK if quick else FULL:
        try:
            rows.append(run_shape(source_conf, target_conf, shape, run_id, work, say))
            if not quick and shape.slug == MM2_SHAPE:
                names = [f"scale-{run_id}-{shape.slug}-t{i}" for i in range(shape.topics)]
                rows[-1]["mm2"] = mm2_beside(source_conf, target_conf, names, shape, rows[-1],
                                             work / f"mm2-{shape.slug}", say)
                rows[-1]["few_partitions"] = few_partitions_beside(source_conf, target_conf, shape, run_id,
                                                                   rows[-1], work, say)
        finally:   # a shape's topics go before the next: the brokers carry one shape at a time
            if not keep_topics:
                _cleanup(source_conf, target_conf, f"scale-{run_id}-{shape.slug}")
    return {"quick": quick, "records_per_partition": RECORDS, "slots": SLOTS, "rows": rows, "growth": growth(rows),
            "load_average_after": os.getloadavg(),
            "verified": all(r["verified"] and (r.get("mm2") or {}).get("verified", True)
                            and (r.get("few_partitions") or {}).get("verified", True) for r in rows)}


def write(section: dict[str, Any], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "scale.json"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(section, indent=2) + "\n")
    tmp.replace(path)
    return path
