"""Costs that grow with the partition count (issue #23): a mirror of many partitions holding few records.

Per shape (``topics`` topics x ``partitions`` partitions, ``RECORDS`` records of 200 B each, 4 slots),
each step timed as a user starts it (``python -m eosmirror.cli ...``, process start to exit, RSS of the
process tree sampled): the first run (copies everything), an empty run right after (copies nothing),
``verify``, ``groups sync`` of consumer groups committed on the source (each on ``group_partitions``
partitions, offset ``RECORDS // 2``) and ``lag``. A shape is verified when the first run copied every
record, the empty run none, verify found every record identical, and groups sync wrote every group.
Rows go to build/bench/scale.json and the report; the issue's goals are the targets (full size only).
"""

from __future__ import annotations

import concurrent.futures
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from eosmirror_tools.bench import mirror_runs
from eosmirror_tools.bench.measure import ChildProcess

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
GOALS = (("1x5000", "empty_run_s", 8), ("1x5000", "first_run_s", 30), ("1x5000", "verify_s", 30),
         ("1x5000", "groups_sync_s", 30), ("1x5000", "lag_s", 2), ("1000x5", "empty_run_s", 8),
         ("1000x5", "first_run_s", 30), ("1000x5", "verify_s", 30), ("1000x5", "lag_s", 2))
RSS_GOAL_MB = 500


def _create(conf: dict[str, Any], names: list[str], partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(conf)
    for at in range(0, len(names), 200):   # a few CreateTopics of 200: one huge request times out
        futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names[at:at + 200]], request_timeout=120)
        for future in futures.values():
            future.result(180)


def _produce(conf: dict[str, Any], names: list[str], partitions: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({**conf, "linger.ms": 20, "batch.num.messages": 10_000, "queue.buffering.max.messages":
                         1_000_000, "compression.type": "none"})
    value = b"v" * VALUE_BYTES
    for name in names:
        for p in range(partitions):
            for i in range(RECORDS):
                producer.produce(name, key=b"%016d" % i, value=value, partition=p, headers=[("bench", b"1")])
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
    with ChildProcess([sys.executable, "-m", "eosmirror.cli", *args], log_path) as child:
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


def _settle(target_conf: dict[str, Any], mirror: str, names: list[str], partitions: int) -> float | None:
    """Seconds until the first run's transactions are complete: its commit_transaction() returned once
    the commit was decided, and the broker then writes a marker into every partition the transactions
    touched (5,000 here). Until the marker reaches the progress group, require_stable waits; until
    every marker is written, the transaction is not complete, and the next run's slots wait in
    init_transactions() (their fence) for it. A run started at once waits there (an empty run right
    after a first run of 5,000 partitions: 29.5 s with nothing settled, 6.0 s with only the progress
    settled, of which 3.9 s in the slots' fence). The empty run is timed after this wait, which is
    reported on its own: the progress reads stable and every target partition's last stable offset
    has reached its high watermark (its marker is written)."""
    from confluent_kafka.admin import AdminClient, OffsetSpec

    from eosmirror.kafka import progress
    from eosmirror.kafka.cluster import Cluster
    from eosmirror.kafka.offsets import list_offsets

    started = time.monotonic()
    keys = [(n, p) for n in names for p in range(partitions)]
    try:
        progress.read(Cluster.from_settings("target", target_conf), keys, mirror_runs.progress_group(mirror),
                      stable=True, timeout=300)
        admin = AdminClient(target_conf)
        while time.monotonic() - started < 300:
            latest = {k: OffsetSpec.latest() for k in keys}
            stable = list_offsets(admin, latest, "target")
            if stable == list_offsets(admin, latest, "target", read_committed=False):
                break
            time.sleep(0.2)
        else:
            return None
    except Exception:  # noqa: BLE001 - reported as not measured
        return None
    return round(time.monotonic() - started, 2)


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
    first = json.loads(result.read_text()) if result.exists() else {}
    settle_s = _settle(target_conf, prefix, names, shape.partitions)
    result_empty = work / "results" / f"{shape.slug}-empty.json"
    steps["empty_run"] = _step(work, f"{shape.slug}-empty", run_args + ["--result-json", str(result_empty)], budget)
    empty = json.loads(result_empty.read_text()) if result_empty.exists() else {}
    steps["verify"] = _step(work, f"{shape.slug}-verify", ["verify", prefix, "--config", config], budget)
    steps["groups_sync"] = _step(work, f"{shape.slug}-groups", ["groups", "sync", prefix, "--config", config,
                                                                 "--json"], budget)
    steps["lag"] = _step(work, f"{shape.slug}-lag", ["lag", prefix, "--config", config, "--json"], budget)
    synced = _json_of(steps["groups_sync"]["log"]) or {}
    written = sum(1 for g in synced.get("groups", []) if g.get("written"))
    checks = {"first_run_copied_all": first.get("records") == shape.total * RECORDS,
              "empty_run_copied_none": empty.get("records") == 0,
              "verify_identical": steps["verify"]["exit_code"] == 0 and
              f"verified {shape.total} partitions, {shape.total * RECORDS} records: all identical"
              in steps["verify"]["tail"],
              "groups_written": written == len(groups), "lag_read": steps["lag"]["exit_code"] in (0, 1)}
    rss = [mb for step in steps.values() for mb in step["python_rss_mb"].values()]
    row = {"shape": shape.slug, "topics": shape.topics, "partitions": shape.total, "records": shape.total * RECORDS,
           "groups": len(groups), "group_partitions": shape.group_partitions,
           **{f"{name}_s": step["seconds"] for name, step in steps.items()}, "markers_settle_s": settle_s,
           "peak_rss_mb": round(max(rss), 1) if rss else None,
           "peak_rss_by_step_mb": {name: step["python_rss_mb"] for name, step in steps.items()},
           "first_run_steps": first.get("steps"), "empty_run_steps": empty.get("steps"),
           "checks": checks, "verified": all(checks.values()),
           "failed_logs": {name: step["log"] for name, step in steps.items() if step["exit_code"] not in (0, 1)}}
    say(f"{shape.slug}: first {row['first_run_s']} s (markers settled {settle_s} s later), empty "
        f"{row['empty_run_s']} s, verify {row['verify_s']} s, groups sync {row['groups_sync_s']} s, "
        f"lag {row['lag_s']} s, peak RSS {row['peak_rss_mb']} MB"
        + ("" if row["verified"] else f"  NOT VERIFIED: {[k for k, ok in checks.items() if not ok]}"))
    return row


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
            "measured": rows[shape][column], "met": rows[shape][column] <= goal}
           for shape, column, goal in GOALS if shape in rows]
    grow = section.get("growth") or {}
    for column, limit in (("empty_run_s", 2.0), ("first_run_s", 3.0)):
        if grow.get(column) is not None:
            out.append({"target": f"scale growth 500 -> 5,000 partitions: {column[:-2].replace('_', ' ')}",
                        "goal": f"<= {limit}x", "measured": grow[column], "met": grow[column] <= limit})
    out += [{"target": f"scale {r['shape']}: peak RSS of a Python process (MB)", "goal": f"< {RSS_GOAL_MB}",
             "measured": r["peak_rss_mb"], "met": r["peak_rss_mb"] is not None and r["peak_rss_mb"] < RSS_GOAL_MB}
            for r in section["rows"] if r["partitions"] >= 5_000]
    return out


def run(source_conf: dict[str, Any], target_conf: dict[str, Any], quick: bool, keep_topics: bool, run_id: str,
        work: Path, say: Callable[[str], None]) -> dict[str, Any]:
    import os

    from eosmirror.kafka import clients

    quiet = {"log_level": clients.librdkafka_log_level()}
    source_conf, target_conf = {**source_conf, **quiet}, {**target_conf, **quiet}
    rows = []
    for shape in QUICK if quick else FULL:
        try:
            rows.append(run_shape(source_conf, target_conf, shape, run_id, work, say))
        finally:   # a shape's topics go before the next: the brokers carry one shape at a time
            if not keep_topics:
                _cleanup(source_conf, target_conf, f"scale-{run_id}-{shape.slug}")
    return {"quick": quick, "records_per_partition": RECORDS, "slots": SLOTS, "rows": rows, "growth": growth(rows),
            "load_average_after": os.getloadavg(), "verified": all(r["verified"] for r in rows)}


def write(section: dict[str, Any], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "scale.json"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(section, indent=2) + "\n")
    tmp.replace(path)
    return path
