"""Translation cost vs history (issue 11): group failover planning and expired-progress recovery on
offset-sync histories of two sizes (1 M and 10 M records; quick: 20 k and 200 k).

Per size: a synthetic history (``synchistory``) is written to a fresh mirror's sync topic, the snapshot
is refreshed (what the driver does after each run), one more "run" of syncs is appended (so the
snapshot is one run stale, as between two runs), then in a FRESH process (its peak RSS is the reader's):
(i) the plan of 1,000 groups x 20 partitions, 95% of the positions within 3 syncs of the head and 5%
    lagging 500 syncs (50,000 source records) behind: ``driver.groups.plan_offsets`` with the groups'
    offsets given (the Kafka reads of group offsets and the writes are not timed: their cost does
    not depend on the history), every translation checked against the known answer;
(ii) recovery of the idle partition's progress: ``syncstore.latest``, what ``observe`` calls.
At the smaller size, the old full read (``syncstore.load``) is also timed, for comparison.
"""

from __future__ import annotations

import multiprocessing
import random
import resource
import time
import uuid
from typing import Any, Callable

from eosmirror_tools.bench import synchistory
from eosmirror_tools.bench.synchistory import Shape

GROUPS, PARTITIONS_PER_GROUP, LAGGING_SHARE, NEAR_HEAD_OFFSETS = 1000, 20, 0.05, 300
LAG_SYNCS, QUICK_LAG_SYNCS = 500, 50    # quick: the laggers must lie inside the smaller history too
GOAL_SECONDS, GOAL_RATIO, GOAL_RSS_MB = 10.0, 1.5, 500
SIZES, QUICK_SIZES = (1_000_000, 10_000_000), (20_000, 200_000)


def group_offsets(shape: Shape, lag_syncs: int, seed: int = 11) -> dict[str, tuple[dict, dict]]:
    rng = random.Random(seed)
    offsets = {}
    for g in range(GROUPS):
        topic = shape.topic(g % shape.topics)
        committed = {}
        for p in range(min(PARTITIONS_PER_GROUP, shape.partitions)):
            head = shape.syncs_of((topic, p)) * synchistory.SOURCE_PER_SYNC
            lag = lag_syncs * synchistory.SOURCE_PER_SYNC if rng.random() < LAGGING_SHARE else 0
            committed[(topic, p)] = max(0, head - lag - rng.randint(0, NEAR_HEAD_OFFSETS))
        offsets[f"bench-group-{g}"] = (committed, {})
    return offsets


def _plan(conf: dict[str, Any], mirror: str, shape: Shape, lag_syncs: int) -> dict[str, Any]:
    from eosmirror.core import groupfailover
    from eosmirror.driver.groups import plan_offsets
    from eosmirror.kafka import syncstore
    from eosmirror.kafka.cluster import Cluster

    offsets = group_offsets(shape, lag_syncs)
    stats = syncstore.ReadStats()
    started = time.monotonic()
    plans = plan_offsets(offsets, {}, groupfailover.FAILOVER, {shape.topic(t): shape.topic(t) for t in range(shape.topics)},
                         lambda needs: syncstore.load_needed(Cluster.from_settings("target", conf), mirror,
                                                             f"{mirror}.bench", needs, stats),
                         allow_rewind=False)
    seconds = time.monotonic() - started
    wrong = sum(1 for plan in plans for p in plan.partitions
                if p.new_offset != synchistory.expected_target(p.committed))
    return {"seconds": round(seconds, 3), "groups": len(plans), "partitions": sum(len(p.partitions) for p in plans),
            "wrong_translations": wrong, "sync_records_read": stats.sync_records,
            "snapshot_records_read": stats.snapshot_records, "backward_chunks": stats.backward_chunks}


def _recover(conf: dict[str, Any], mirror: str, shape: Shape) -> dict[str, Any]:
    from eosmirror.kafka import syncstore
    from eosmirror.kafka.cluster import Cluster

    stats = syncstore.ReadStats()
    started = time.monotonic()
    newest = syncstore.latest(Cluster.from_settings("target", conf), mirror, f"{mirror}.bench", stats=stats).newest
    seconds = time.monotonic() - started
    progress = newest[shape.idle].source_end
    return {"seconds": round(seconds, 3), "recovered": progress,
            "exact": progress == synchistory.IDLE_SYNCS * synchistory.SOURCE_PER_SYNC,
            "sync_records_read": stats.sync_records, "snapshot_records_read": stats.snapshot_records}


def _full_read(conf: dict[str, Any], mirror: str, shape: Shape) -> dict[str, Any]:
    from eosmirror.kafka import syncstore
    from eosmirror.kafka.cluster import Cluster

    started = time.monotonic()
    history = syncstore.load(Cluster.from_settings("target", conf), mirror, f"{mirror}.bench")
    return {"seconds": round(time.monotonic() - started, 3), "partitions": len(history)}


def peak_rss_mb() -> float:
    """This process's own peak RSS. Not ``getrusage``: on Linux its ru_maxrss survives ``execve``, so a
    spawned child would report at least its parent's RSS at the fork (here: the history writer's)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _child(what: Callable[..., dict[str, Any]], args: tuple, queue: Any) -> None:
    try:
        result = what(*args)
    except Exception as exc:  # noqa: BLE001 - reported, not raised across processes
        result = {"error": f"{type(exc).__name__}: {exc}"}
    result["peak_rss_mb"] = peak_rss_mb()
    queue.put(result)


def in_fresh_process(what: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """Run ``what`` in a new interpreter: its peak RSS is that step's alone (not the writer's)."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=(what, args, queue))
    process.start()
    result = queue.get(timeout=900)
    process.join(60)
    return result


def prepare(conf: dict[str, Any], records: int, say: Callable[[str], None]) -> tuple[str, Shape, dict[str, Any]]:
    """A fresh mirror name whose sync topic holds ``records`` syncs and a one-run-stale snapshot."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from eosmirror.core import naming
    from eosmirror.kafka import syncstore
    from eosmirror.kafka.cluster import Cluster

    mirror = f"bench-{uuid.uuid4().hex[:8]}"
    shape = Shape(records=records)
    sync_topic, snapshot_topic = naming.offset_sync_topic(mirror), naming.offset_sync_snapshot_topic(mirror)
    admin = AdminClient(conf)
    for name, cfg in ((sync_topic, {"retention.ms": "-1", "retention.bytes": "-1"}),
                      (snapshot_topic, {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"})):
        admin.create_topics([NewTopic(name, 1, 1, config=cfg)])[name].result(60)
    started = time.monotonic()
    aborted = synchistory.write(conf, sync_topic, shape, f"{mirror}.writer")
    written = time.monotonic() - started
    say(f"{records:,} sync records (+{aborted:,} aborted) written in {written:.0f} s")
    syncstore.refresh_snapshot(Cluster.from_settings("target", conf), mirror, f"{mirror}.bench", f"{mirror}.snapshot")
    shape = synchistory.append_tail(conf, sync_topic, shape, f"{mirror}.writer", per_partition=5)
    return mirror, shape, {"records": records, "aborted_records": aborted, "write_seconds": round(written, 1),
                           "tail_after_snapshot": shape.records - records}


def cleanup(conf: dict[str, Any], mirror: str) -> None:
    from confluent_kafka.admin import AdminClient

    from eosmirror.core import naming

    topics = [naming.offset_sync_topic(mirror), naming.offset_sync_snapshot_topic(mirror)]
    for future in AdminClient(conf).delete_topics(topics).values():
        try:
            future.result(60)
        except Exception:  # noqa: BLE001 - best effort: the bench's own topics
            pass


def measure_size(conf: dict[str, Any], records: int, with_full_read: bool, keep: bool, lag_syncs: int,
                 say: Callable[[str], None]) -> dict[str, Any]:
    mirror, shape, row = prepare(conf, records, say)
    try:
        row["plan"] = in_fresh_process(_plan, conf, mirror, shape, lag_syncs)
        say(f"plan of {GROUPS:,} groups x {PARTITIONS_PER_GROUP}: {row['plan']}")
        row["recover"] = in_fresh_process(_recover, conf, mirror, shape)
        say(f"recovery of the idle partition: {row['recover']}")
        if with_full_read:
            row["full_read"] = in_fresh_process(_full_read, conf, mirror, shape)
            say(f"old full read of the history: {row['full_read']}")
    finally:
        if not keep:
            cleanup(conf, mirror)
    return row


def run(conf: dict[str, Any], quick: bool, keep: bool, say: Callable[[str], None]) -> dict[str, Any]:
    (small, large), lag = (QUICK_SIZES, QUICK_LAG_SYNCS) if quick else (SIZES, LAG_SYNCS)
    rows = [measure_size(conf, small, True, keep, lag, say), measure_size(conf, large, False, keep, lag, say)]
    return {"groups": GROUPS, "partitions_per_group": PARTITIONS_PER_GROUP, "lagging_share": LAGGING_SHARE,
            "lag_syncs": lag, "timed": "plan/translation step (driver.groups.plan_offsets, group offsets given); "
            "recovery = syncstore.latest", "sizes": rows, "targets": targets(rows)}


def targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for step in ("plan", "recover"):
        small, large = rows[0].get(step, {}), rows[-1].get(step, {})
        for row in rows:
            s = row.get(step, {}).get("seconds")
            out.append({"target": f"{step} at {row['records']:,} syncs (s)", "goal": f"<= {GOAL_SECONDS}",
                        "measured": s, "met": None if s is None else s <= GOAL_SECONDS})
        ratio = round(large["seconds"] / small["seconds"], 2) if small.get("seconds") and large.get("seconds") else None
        out.append({"target": f"{step}: {rows[-1]['records']:,} vs {rows[0]['records']:,} syncs", "goal": f"<= {GOAL_RATIO}x",
                    "measured": ratio, "met": None if ratio is None else ratio <= GOAL_RATIO})
        rss = max((row.get(step, {}).get("peak_rss_mb") or 0) for row in rows)
        out.append({"target": f"{step}: peak RSS (MB)", "goal": f"<= {GOAL_RSS_MB}", "measured": rss,
                    "met": rss <= GOAL_RSS_MB})
    return out
