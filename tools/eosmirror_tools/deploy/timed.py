"""deploy-test --timed-runs N: what a small scheduled run costs on the deployment, per run shape.

Each round seeds about 10,000 records and runs the mirror DAG once through spark-submit and, with
--run-server, once through the run servers of the Celery workers (docker/eosmirror/entrypoint.sh),
switching `airflow.run_server` in the mounted mirrors file between the two (the copy task reads it
at run time). Times come from Airflow (the DAG run's queued_at to end_date; the copy task's
duration), not from this harness's polling. A served run is checked to have been served: the run
servers' count of runs served must grow by one.
"""

from __future__ import annotations

import json
import statistics
import subprocess
from datetime import datetime
from typing import Any

import yaml

from eosmirror_tools.deploy import runs
from eosmirror_tools.deploy.shell import log, wait_for
from eosmirror_tools.deploy.stack import Stack
from eosmirror_tools.deploy.tester import Tester

RECORDS_PER_ROUND = 10_002   # 1,667 per partition of 6
WORKERS = ("airflow-worker-1", "airflow-worker-2")
SERVER_BUDGET = 240          # the run servers start beside the workers; seconds after healthy
# One run server per Celery worker, each one executor of 3 cores and 512 MB on the Spark workers,
# which then offer 5 task slots each: 3 + 3 for the servers and 3 for a spark-submit run, spread.
SERVER_ENV = {"EOSMIRROR_RUN_SERVER_MASTER": "spark://spark-master:7077",
              "EOSMIRROR_RUN_SERVER_ARGS": "--workers 3 --conf spark.executor.memory=512m "
                                           "--conf spark.executor.cores=3 --conf spark.cores.max=3",
              "EOSMIRROR_SPARK_WORKER_CORES": "5"}


def served_counts(stack: Stack) -> dict[str, int | None]:
    """Runs served so far by each Celery worker's run server (None: none answers there)."""
    counts: dict[str, int | None] = {}
    for service in WORKERS:
        out = subprocess.run(["docker", "exec", stack.container(service), "python", "-c",
                              "import json; from eosmirror.spark import serverclient; "
                              "print(json.dumps(serverclient.status()))"], capture_output=True, timeout=60)
        answer = json.loads(out.stdout.decode().strip().splitlines()[-1] or "null") if out.returncode == 0 else None
        counts[service] = answer.get("served") if answer else None
    return counts


def wait_servers(stack: Stack) -> dict[str, int | None]:
    return wait_for(lambda: (None not in (c := served_counts(stack)).values(), c),
                    "a run server answering on every Celery worker", SERVER_BUDGET, 5)


def set_run_server(stack: Stack, on: bool) -> None:
    """Rewrite the mounted mirrors file in place (same inode: the bind mount sees it). The faults'
    pacing (a sleep in every transaction, tester.py) goes too: served runs would not have it (a
    mirror's spark_conf is not the run server's), and it is no cost of a real run."""
    data = yaml.safe_load(stack.mirrors_file.read_text())
    data["mirrors"][0]["airflow"]["run_server"] = on
    data["mirrors"][0].get("spark_conf", {}).pop("spark.executorEnv.EOSMIRROR_FAULTS", None)
    with open(stack.mirrors_file, "r+") as f:
        f.seek(0)
        f.truncate()
        f.write(yaml.safe_dump(data, sort_keys=False))


def _seconds(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return round((datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds(), 2)


def one_run(stack: Stack, tester: Tester, topic: str, partitions: int, served: bool, tag: str) -> dict[str, Any]:
    set_run_server(stack, served)
    tester.probe("seed", topic, partitions, RECORDS_PER_ROUND // partitions, tag, timeout=600)
    before = served_counts(stack) if served else {}
    ran = runs.run_once(tester)
    copy = runs.task(ran, "copy")
    row = {"shape": "run server" if served else "spark-submit", "state": ran["state"],
           "trigger_to_end": _seconds(ran.get("queued_at"), ran.get("end_date")),
           "copy_task": round(copy["duration"], 2) if copy.get("duration") is not None else None,
           "copy_host": copy.get("hostname"), "records": (ran.get("copy") or {}).get("records"),
           "steps": (ran.get("copy") or {}).get("steps")}
    if served:
        after = served_counts(stack)
        row["served_by"] = [s for s in WORKERS if (after.get(s) or 0) > (before.get(s) or 0)]
    log.info("timed run (%s): %s, trigger to end %s s, copy task %s s on %s", row["shape"], row["state"],
             row["trigger_to_end"], row["copy_task"], row["copy_host"])
    return row


def scenario(stack: Stack, tester: Tester, topic: str, partitions: int, rounds: int,
             run_server: bool) -> dict[str, Any]:
    if run_server:
        log.info("run servers: %s runs served so far", wait_servers(stack))
    rows = []
    for k in range(rounds):
        rows.append(one_run(stack, tester, topic, partitions, False, f"timed-submit-{k}"))
        if run_server:
            rows.append(one_run(stack, tester, topic, partitions, True, f"timed-served-{k}"))
    set_run_server(stack, False)
    medians = {}
    for shape in ("spark-submit", "run server"):
        mine = [r for r in rows if r["shape"] == shape and r["state"] == "success"]
        if mine:
            medians[shape] = {key: statistics.median(r[key] for r in mine if r[key] is not None)
                              for key in ("trigger_to_end", "copy_task")}
    unserved = [r for r in rows if r["shape"] == "run server" and not r.get("served_by")]
    failed = [r for r in rows if r["state"] != "success"]
    if unserved:
        log.error("timed runs: %d run(s) meant for the run server went through spark-submit", len(unserved))
    return {"name": f"timed runs ({rounds} per shape, {RECORDS_PER_ROUND} records each)", "rows": rows,
            "medians": medians, "state": "checked", "ok": not failed and not unserved}

