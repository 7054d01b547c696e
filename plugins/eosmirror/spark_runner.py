"""Run slots on Spark: one Spark job of one task per slot, submitted concurrently from driver threads.

One job per slot (instead of one job of S tasks) keeps slots independent: a slot whose task fails
after Spark's retries is reported as failed while the others still report their committed work.
Each job carries a description ("eosmirror demo: slot 1 of 2, 3 partitions, 12000 offsets") shown
in the Spark UI.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from eosmirror.slotstate import SlotTask

log = logging.getLogger(__name__)


def _slot_job(spark: Any, task: SlotTask, total_slots: int) -> dict[str, Any]:
    from eosmirror.copy import run_slot

    sc = spark.sparkContext
    pending = sum(max(0, p.end - p.start) for p in task.partitions)
    sc.setJobGroup(f"eosmirror-{task.mirror}-slot-{task.slot}",
                   f"eosmirror {task.mirror}: slot {task.slot} of {total_slots}, {len(task.partitions)} "
                   f"partitions, {pending} offsets to read", interruptOnCancel=True)
    try:
        return sc.parallelize([task], 1).map(run_slot).collect()[0]
    except Exception as exc:  # noqa: BLE001 - the task failed after Spark's retries
        text = str(exc).strip().splitlines()
        reason = next((line for line in text if "Error" in line or "Exception" in line), text[0] if text else "")
        return {"slot": task.slot, "transactional_id": task.transactional_id, "status": "failed", "records": 0,
                "bytes": 0, "partitions": [], "error": f"Spark task failed: {reason[:500]}",
                "error_type": "SparkTaskFailed"}


def run_on_spark(tasks: list[SlotTask]) -> list[dict[str, Any]]:
    """Runner for ``MirrorRun.execute``: uses the session spark-submit configured."""
    from pyspark.sql import SparkSession

    if not tasks:
        return []
    spark = SparkSession.builder.getOrCreate()
    spark.sparkContext.setLocalProperty("callSite.short", "eosmirror")
    log.info("running %d slot(s) on %s", len(tasks), spark.sparkContext.master)
    with ThreadPoolExecutor(max_workers=len(tasks)) as pool:
        return list(pool.map(lambda t: _slot_job(spark, t, len(tasks)), tasks))


def executor_environment() -> dict[str, str]:
    """Environment an executor's Python worker sees (used by tests to prove the interpreter)."""
    import sys

    return {"python": sys.executable, "pid": str(os.getpid())}
