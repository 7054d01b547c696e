"""Run slots on Spark: one Spark job of one task per slot, submitted concurrently from driver threads.

One job per slot (instead of one job of S tasks) keeps slots independent: a slot whose task fails
after Spark's retries is reported as failed while the others still report their committed work.
Each job carries a description ("eosmirror demo: slot 1 of 2, 3 partitions, 12000 offsets") shown
in the Spark UI.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from eosmirror.core.runreport import SlotResult, SlotStatus
from eosmirror.driver.run import run_in_process
from eosmirror.slot.copier import run_slot
from eosmirror.slot.slotstate import SlotTask

log = logging.getLogger(__name__)


def _slot_job(sc: Any, task: SlotTask, total_slots: int) -> SlotResult:
    # On the executor, run_slot arms the slot's lifeline (abort + exit once this run's JVM is gone).
    pending = sum(max(0, p.end - p.start) for p in task.partitions)
    sc.setJobGroup(f"eosmirror-{task.mirror}-slot-{task.slot}",
                   f"eosmirror {task.mirror}: slot {task.slot} of {total_slots}, {len(task.partitions)} "
                   f"partitions, {pending} offsets to read", interruptOnCancel=True)
    try:
        result: SlotResult = sc.parallelize([task], 1).map(run_slot).collect()[0]
        return result
    except Exception as exc:  # noqa: BLE001 - the task failed after Spark's retries
        text = str(exc).strip().splitlines()
        reason = next((line for line in text if "Error" in line or "Exception" in line), text[0] if text else "")
        return SlotResult.not_started(task.slot, task.transactional_id, SlotStatus.FAILED,
                                      f"Spark task failed: {reason[:500]}", "SparkTaskFailed")


def warm_worker(_: int) -> int:
    """Runs in a Python worker: import what a slot imports, so the slot that reuses this worker
    starts copying at once."""
    import eosmirror.slot.copier  # noqa: F401 - the import is the point

    return os.getpid()


_SLOTS_STARTED = threading.Event()


def _start_spark(workers: int) -> None:
    from pyspark import SparkConf, SparkContext

    started = time.monotonic()
    try:
        sc = SparkContext.getOrCreate(SparkConf())
        ready = time.monotonic()
        if _SLOTS_STARTED.is_set():   # too late: a warm-up job would only queue behind the slots
            workers = 0
        if workers:
            sc.setJobGroup("eosmirror-warm-up", "eosmirror: start the Python workers the slots will reuse")
            sc.parallelize(range(workers), workers).map(warm_worker).collect()
        log.info("Spark started while the driver planned: context %.2f s, %d Python worker(s) warm %.2f s later; "
                 "Spark UI %s", ready - started, workers, time.monotonic() - ready,
                 sc.uiWebUrl or "off")
    except Exception as exc:  # noqa: BLE001 - the slots' own start reports any real problem
        log.warning("starting Spark ahead of the slots failed (%s); the slots start it themselves", exc)


def start_spark_early(workers: int) -> threading.Thread:
    """Start the SparkContext, and ``workers`` Python workers, in a background thread while the
    driver resolves, plans and fences (about 1 s of broker round trips), instead of after it.
    ``run_on_spark``'s ``getOrCreate`` then finds the context (or waits on PySpark's context lock
    for the one being built). Only for runs that will use Spark: the CLI and the Airflow task run
    empty runs without spark-submit."""
    thread = threading.Thread(target=_start_spark, args=(workers,), name="eosmirror-spark-start", daemon=True)
    thread.start()
    return thread


def slots_need_spark(pending: bool, follows: bool) -> bool:
    """Whether a run's slots need Spark executors: only to copy records, or to follow (the rule of
    spark/launch.py, which also decides that a run with nothing to copy needs no Spark at all)."""
    return pending or follows


def runs_on_driver(tasks: list[SlotTask]) -> bool:
    """Nothing to copy and no slot follows: the slots' progress keep-alive runs on the driver."""
    return not slots_need_spark(pending=any(p.end > p.start for t in tasks for p in t.partitions),
                                follows=any(t.follow_until is not None for t in tasks))


def run_on_spark(tasks: list[SlotTask]) -> list[SlotResult]:
    """Runner for ``MirrorRun.execute``: uses the context spark-submit configured.

    A run with nothing to copy still commits every slot's progress (idle partitions' keep-alive),
    but that is a few milliseconds of work per slot: it runs on the driver, and no Spark context is
    started (that alone costs several seconds). Never a follow run: its slots copy for minutes,
    on executors, each with its lifeline (on the driver, a killed spark-submit would leave the
    Python driver following with open transactions; tests/e2e/test_kill.py).
    """
    if not tasks:
        return []
    if runs_on_driver(tasks):
        log.info("nothing to copy: %d slot(s) refresh their progress on the driver, without Spark executors",
                 len(tasks))
        return run_in_process(tasks)
    from pyspark import SparkConf, SparkContext

    # The mirror only uses RDDs: a SparkContext starts seconds faster than a SparkSession. Started
    # early (start_spark_early), this finds it, or waits for it on PySpark's context lock.
    _SLOTS_STARTED.set()
    sc = SparkContext.getOrCreate(SparkConf())
    log.info("running %d slot(s) on %s", len(tasks), sc.master)
    # Named after the calling thread: the run server routes a run's log lines by thread name.
    with ThreadPoolExecutor(max_workers=len(tasks), thread_name_prefix=threading.current_thread().name) as pool:
        return list(pool.map(lambda t: _slot_job(sc, t, len(tasks)), tasks))
