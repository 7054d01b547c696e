"""The real Airflow of a soak: `eosmirror airflow standalone` (scheduler, DAG processor, API server,
LocalExecutor, SQLite) on the soak's mirrors file, its mirror DAGs unpaused so the scheduler runs
them on their schedules, and afterwards every run's outcome read from Airflow's own database.

Never `dags test`: the point is what the scheduler does (overlapping follow runs, hand-overs,
max_active_runs, retries)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from eosmirror_tools.kit import measured, waits
from eosmirror_tools.kit.processes import ChildProcess

VENV_BIN = Path(sys.executable).parent


def standalone_env(config_file: Path, api_port: int) -> dict[str, str]:
    """The environment of `eosmirror airflow standalone` for the soak: this process's Airflow
    settings (home.apply ran), the soak's mirrors file and API port, a quick DAG processor."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("AIRFLOW__API__BASE_URL", "AIRFLOW__CORE__EXECUTION_API_SERVER_URL")}
    env.update({"EOSMIRROR_CONFIG": str(config_file), "AIRFLOW__API__PORT": str(api_port),
                "AIRFLOW__API__HOST": "127.0.0.1", "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2"})
    return env


def start(config_file: Path, api_port: int, log_path: Path) -> ChildProcess:
    env = standalone_env(config_file, api_port)
    child = measured.child([str(VENV_BIN / "eosmirror"), "airflow", "standalone"], log_path, env=env, grace=45.0)
    child.__enter__()
    return child


def healthy(api_port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{api_port}/api/v2/monitor/health", timeout=10) as response:
            health = json.loads(response.read().decode())
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
        return False
    return all((health.get(part) or {}).get("status") == "healthy" for part in ("metadatabase", "scheduler"))


def wait_healthy(child: ChildProcess, api_port: int, budget: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < budget:
        if not child.running():
            raise RuntimeError(f"Airflow standalone exited (code {child.proc.returncode if child.proc else None}):\n"
                               f"{child.log_tail(40)}")
        if healthy(api_port):
            return time.monotonic() - started
        time.sleep(2)
    raise TimeoutError(f"Airflow's scheduler was not healthy within {budget:.0f} s ({waits.machine_now()}):\n"
                       f"{child.log_tail(40)}")


def unpause(child: ChildProcess, dag_ids: list[str], budget: float) -> None:
    """Unpause each DAG once the DAG processor has parsed it (the CLI refuses an unknown DAG)."""
    assert child.env is not None
    deadline = time.monotonic() + budget
    for dag_id in dag_ids:
        while True:
            done = subprocess.run([str(VENV_BIN / "airflow"), "dags", "unpause", dag_id], env=child.env,
                                  capture_output=True, text=True, timeout=120)
            if done.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not unpause {dag_id} within {budget:.0f} s: {done.stderr[-1500:]}")
            time.sleep(3)


def runs(dag_id: str, since: float) -> list[dict[str, Any]]:
    """Every run of ``dag_id`` started at or after ``since`` (epoch s): state, times, the copy task's
    tries and what its run report says (slot statuses: handed-over, follow-bound, ...)."""
    from airflow.models import DagRun, TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from eosmirror.airflow import reports
    from eosmirror.core.runreport import RunReport

    out = []
    with create_session() as session:
        rows = session.execute(select(DagRun.run_id, DagRun.run_type, DagRun.state, DagRun.start_date,
                                      DagRun.end_date).where(DagRun.dag_id == dag_id).order_by(DagRun.id)).all()
        tries = dict(session.execute(select(TaskInstance.run_id, TaskInstance.try_number).where(
            TaskInstance.dag_id == dag_id, TaskInstance.task_id == "copy")).all())
    for run_id, run_type, state, started, ended in rows:
        if started is None or started.timestamp() < since:
            continue
        found = reports.run_report(dag_id, run_id)
        report = found if isinstance(found, RunReport) else None
        out.append({"run_id": run_id, "run_type": str(getattr(run_type, "value", run_type)),
                    "state": str(getattr(state, "value", state)),
                    "started": started.timestamp(), "ended": ended.timestamp() if ended else None,
                    "seconds": round(ended.timestamp() - started.timestamp(), 1) if ended else None,
                    "copy_tries": tries.get(run_id), "records": report.records if report else None,
                    "slot_statuses": sorted({s.status.value for s in report.slots} if report else ())})
    return out


def database_bytes(airflow_home: Path) -> int:
    return sum(p.stat().st_size for p in airflow_home.glob("airflow.db*") if p.is_file())
