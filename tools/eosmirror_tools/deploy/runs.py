"""One mirror DAG run through Airflow's REST API, from trigger to its final state."""

from __future__ import annotations

import time
from typing import Any, Callable

from eosmirror_tools.deploy.shell import DeployError, log, wait_for
from eosmirror_tools.deploy.tester import Tester

DAG_ID = "eosmirror__deploy"
RUN_BUDGET = 900


def wait_dag_parsed(tester: Tester, budget: float = 300) -> None:
    wait_for(lambda: (True, tester.probe("dag-ready", DAG_ID, timeout=60)), f"DAG {DAG_ID} in Airflow", budget, 5)


def trigger(tester: Tester) -> str:
    return tester.probe("trigger", DAG_ID)["run_id"]


def task(state: dict[str, Any], task_id: str) -> dict[str, Any]:
    return next((t for t in state.get("tasks", []) if t["task_id"] == task_id), {})


def wait_copy_running(tester: Tester, run_id: str, budget: float = 300) -> dict[str, Any]:
    def check():
        state = tester.probe("run-state", DAG_ID, run_id, timeout=60)
        if state["state"] in ("success", "failed"):
            raise DeployError(f"run {run_id} ended ({state['state']}) before its copy task was seen running")
        return task(state, "copy").get("state") == "running", state
    return wait_for(check, f"the copy task of {run_id} running", budget, 2)


def wait_finished(tester: Tester, run_id: str, budget: float = RUN_BUDGET,
                  on_poll: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    started = time.monotonic()

    def check():
        state = tester.probe("run-state", DAG_ID, run_id, timeout=60)
        if on_poll:
            on_poll(state)
        return state["state"] in ("success", "failed"), state
    state = wait_for(check, f"run {run_id} to finish", budget, 5)
    state["seconds"] = round(time.monotonic() - started, 1)
    log.info("run %s: %s in %.0f s; tasks %s", run_id, state["state"], state["seconds"], state["tasks"])
    return state


def run_once(tester: Tester) -> dict[str, Any]:
    """Trigger a run and wait for it; the copy task's report is added when the run succeeded."""
    run_id = trigger(tester)
    state = wait_finished(tester, run_id)
    state["run_id"] = run_id
    if state["state"] == "success":
        state["copy"] = tester.probe("copy-report", DAG_ID, run_id, check=False)
    return state
