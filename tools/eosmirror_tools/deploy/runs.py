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


def copy_and_publish_hosts(scenarios: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(run, copy host, publish host) of every successful run in the report: faulted, catch-up, first
    and final runs alike."""
    found = []
    for scenario in scenarios:
        for label, ran in ((scenario["name"], scenario), (f"{scenario['name']} catch-up", scenario.get("catch_up"))):
            if not ran or ran.get("state") != "success":
                continue
            copy, publish = task(ran, "copy").get("hostname"), task(ran, "publish").get("hostname")
            if copy and publish:
                found.append((label, copy, publish))
    return found


def cross_host_check(scenarios: list[dict[str, Any]], required: bool) -> dict[str, Any]:
    """Did copy and publish of one run ever land on different Celery hosts? Nothing forces it (Celery
    hands tasks to whichever worker is free), so it is checked: with every fault run there are 14
    runs, and a run where they share a host is at most about as likely as not."""
    hosts = copy_and_publish_hosts(scenarios)
    crossed = [run for run, copy, publish in hosts if copy != publish]
    return {"name": "copy and publish on different hosts", "state": "checked", "runs": len(hosts),
            "crossed": crossed, "ok": bool(crossed) or not required}
