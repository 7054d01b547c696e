"""The faults only a multi-host deployment can show, each while a run copies and production goes on.

Per scenario: background production starts, a run is triggered, the fault is injected once a
transaction of that run is open on the target (last stable offset below the high watermark), the run
is waited for (Airflow's retries included), production stops, a clean catch-up run copies the rest,
and the oracle checks everything ever written: 0 duplicates, losses, order violations, aborted
records, hanging transactions. Whatever the fault stopped is started again before the next one.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from eosmirror_tools.deploy import runs
from eosmirror_tools.deploy.shell import DeployError, log, run, wait_for
from eosmirror_tools.deploy.stack import NETWORK, Stack
from eosmirror_tools.deploy.tester import Tester

TOPIC, PARTITIONS = "orders", 6
OUTAGE_SECONDS = 25       # how long a killed broker or worker stays away before it is back
# A cut-off Spark worker stays away longer than the job's spark.network.timeout (tester.py sets 40 s):
# the driver then declares its executors lost and runs their slots elsewhere while the cut-off
# executors still hold open transactions (zombies, fenced by the new attempts).
PARTITION_SECONDS = 60
SLOT_ZERO_TXN_ID = "eosmirror.deploy.0"


def docker(*args: str, what: str) -> str:
    return run(["docker", *args], what, 180)


def broker_service(cluster: str, broker_id: int) -> str:
    return f"{'src' if cluster == 'source' else 'dst'}-kafka-{broker_id}"


def kill_and_restart_later(stack: Stack, service: str) -> Callable[[], None]:
    container = stack.container(service)
    docker("kill", container, what=f"docker kill {service}")
    return lambda: docker("start", container, what=f"docker start {service}")


def target_leader(stack: Stack, tester: Tester, run_id: str) -> tuple[str, Callable[[], None]]:
    leader = tester.probe("leader", "target", TOPIC, 0)["leader"]
    service = broker_service("target", leader)
    return f"docker kill {service} (leader of target {TOPIC}[0])", kill_and_restart_later(stack, service)


def target_coordinator(stack: Stack, tester: Tester, run_id: str) -> tuple[str, Callable[[], None]]:
    found = tester.probe("coordinator", SLOT_ZERO_TXN_ID)
    service = broker_service("target", found["coordinator"])
    return (f"docker kill {service} (transaction coordinator of {SLOT_ZERO_TXN_ID}, __transaction_state"
            f"[{found['partition']}])", kill_and_restart_later(stack, service))


SPARK_WORKERS = ("spark-worker-1", "spark-worker-2")


# Run inside the Celery worker that runs copy: eosmirror binds the driver and its UI to loopback
# (SPARK_LOCAL_IP=127.0.0.1), so its REST API is reachable there only.
DRIVER_EXECUTORS = """
import json, urllib.request
base = "http://127.0.0.1:4040/api/v1/applications"
apps = json.load(urllib.request.urlopen(base, timeout=10))
executors = json.load(urllib.request.urlopen(base + "/" + apps[0]["id"] + "/executors", timeout=10)) if apps else []
print(json.dumps([{"host": e["hostPort"].rsplit(":", 1)[0], "active_tasks": e["activeTasks"]}
                  for e in executors if e["id"] != "driver" and e.get("isActive", True)]))
"""


def driver_executors(stack: Stack, copy_host: str) -> list[dict[str, Any]]:
    service = next(s for s in ("airflow-worker-1", "airflow-worker-2") if copy_host.startswith(s))
    return json.loads(docker("exec", stack.container(service), "python", "-c", DRIVER_EXECUTORS,
                             what=f"the Spark driver's executors on {service}").strip().splitlines()[-1])


def busy_spark_worker(stack: Stack, tester: Tester, run_id: str, fallback: str,
                      fetch: Callable[[Stack, str], list[dict[str, Any]]] = driver_executors) -> tuple[str, str]:
    """The Spark worker whose executors run the most tasks of the run right now (asked of the driver,
    in the Celery worker that runs copy), so that the fault hits a slot at work; ``fallback`` when the
    driver does not answer. Returns (service, what the driver said)."""
    try:
        host = runs.task(tester.probe("run-state", runs.DAG_ID, run_id), "copy").get("hostname") or ""
        executors = fetch(stack, host)
    except Exception as exc:  # noqa: BLE001 - the fault still runs, on the default worker
        return fallback, f"driver not asked ({type(exc).__name__}: {str(exc)[-200:]}); {fallback} by default"
    busy: dict[str, int] = {}
    for executor in executors:
        worker = next((w for w in SPARK_WORKERS if executor["host"].startswith(w)), None)
        if worker:
            busy[worker] = busy.get(worker, 0) + executor["active_tasks"]
    if not busy or max(busy.values()) == 0:
        return fallback, f"no busy executor seen ({busy}); {fallback} by default"
    worker = max(sorted(busy), key=busy.get)
    return worker, f"active tasks per worker {busy}"


def spark_partition(stack: Stack, tester: Tester, run_id: str) -> tuple[str, Callable[[], None]]:
    service, why = busy_spark_worker(stack, tester, run_id, "spark-worker-1")
    container = stack.container(service)
    docker("network", "disconnect", NETWORK, container, what=f"network disconnect {service}")

    def reconnect() -> None:
        docker("network", "connect", "--alias", service, NETWORK, container, what=f"network connect {service}")
    return f"docker network disconnect {service} ({why}), reconnected after the outage", reconnect


def spark_worker_kill(stack: Stack, tester: Tester, run_id: str) -> tuple[str, Callable[[], None]]:
    service, why = busy_spark_worker(stack, tester, run_id, "spark-worker-2")
    return f"docker kill {service} ({why}; its executors are lost)", kill_and_restart_later(stack, service)


def celery_copy_kill(stack: Stack, tester: Tester, run_id: str) -> tuple[str, Callable[[], None]]:
    state = tester.probe("run-state", runs.DAG_ID, run_id)
    host = runs.task(state, "copy").get("hostname") or ""
    service = next((s for s in ("airflow-worker-1", "airflow-worker-2") if host.startswith(s)), None)
    if service is None:
        raise DeployError(f"the copy task runs on an unknown host {host!r}")
    return f"docker kill {service} (it ran copy; Airflow retries the task)", kill_and_restart_later(stack, service)


def source_leader_restart(stack: Stack, tester: Tester, run_id: str) -> tuple[str, Callable[[], None]]:
    leader = tester.probe("leader", "source", TOPIC, 0)["leader"]
    service = broker_service("source", leader)
    docker("restart", "--time", "5", stack.container(service), what=f"docker restart {service}")
    return f"docker restart {service} (leader of source {TOPIC}[0])", lambda: None


FAULTS: dict[str, Callable[..., tuple[str, Callable[[], None]]]] = {
    "target-leader": target_leader, "target-coordinator": target_coordinator, "spark-partition": spark_partition,
    "spark-worker-kill": spark_worker_kill, "celery-copy-kill": celery_copy_kill,
    "source-leader-restart": source_leader_restart}


def wait_open_transaction(tester: Tester, run_id: str, budget: float = 300) -> dict[str, Any]:
    """Until a transaction of the run is open on the target: the fault then hits mid-transaction."""
    def check():
        state = tester.probe("run-state", runs.DAG_ID, run_id, timeout=60)
        if state["state"] in ("success", "failed"):
            raise DeployError(f"run {run_id} ended ({state['state']}) before a transaction was seen open")
        seen = tester.probe("open-transactions", TOPIC, PARTITIONS, check=False)
        return bool(seen.get("open")), seen
    return wait_for(check, f"an open transaction of {run_id} on the target", budget, 1)


def outage(tester: Tester, run_id: str, until: float) -> float | None:
    """Wait out the outage, watching the run: when it ended before the outage is over, that moment
    (the fault's effect on the run's duration is measured, not hidden behind the outage)."""
    ended = None
    while time.monotonic() < until:
        if ended is None:
            state = tester.probe("run-state", runs.DAG_ID, run_id, timeout=60, check=False)
            if state.get("state") in ("success", "failed"):
                ended = time.monotonic()
        time.sleep(min(5.0, max(0.0, until - time.monotonic())))
    return ended


def scenario(stack: Stack, tester: Tester, name: str) -> dict[str, Any]:
    tag = f"{name}-{int(time.time())}"
    tester.start_production(TOPIC, PARTITIONS, tag)
    restore: Callable[[], None] | None = None
    result: dict[str, Any] = {"name": name}
    try:
        triggered = time.monotonic()
        run_id = runs.trigger(tester)
        runs.wait_copy_running(tester, run_id)
        result["open_at_fault"] = wait_open_transaction(tester, run_id)
        result["fault"], restore = FAULTS[name](stack, tester, run_id)
        faulted_at = time.monotonic()
        result["fault_after_trigger_seconds"] = round(faulted_at - triggered, 1)
        log.info("%s: %s", name, result["fault"])
        away = PARTITION_SECONDS if name == "spark-partition" else OUTAGE_SECONDS
        ended = outage(tester, run_id, faulted_at + away)
        restore()
        restore = None
        faulted = runs.wait_finished(tester, run_id)
        ended = ended or time.monotonic()
        # seconds: trigger to the run's end (the fault's outage included); end_after_fault: from the fault.
        result.update(run_id=run_id, state=faulted["state"], seconds=round(ended - triggered, 1),
                      end_after_fault_seconds=round(ended - faulted_at, 1), tasks=faulted["tasks"])
        if faulted["state"] == "success":
            result["copy"] = tester.probe("copy-report", runs.DAG_ID, run_id, check=False)
    finally:
        if restore:
            restore()
        result["produced"] = tester.stop_production(tag)
    stack.wait_healthy(300)
    catch_up = runs.run_once(tester)
    result["catch_up"] = {k: catch_up.get(k) for k in ("run_id", "state", "seconds", "tasks", "copy")}
    result["verdict"] = tester.probe("verify", "deploy", TOPIC, PARTITIONS, timeout=600)
    result["ok"] = result["state"] == "success" and catch_up["state"] == "success" and result["verdict"]["ok"]
    log.info("%s: faulted run %s, catch-up %s, oracle %s", name, result["state"], catch_up["state"],
             result["verdict"]["counts"])
    return result


def fault_names(selection: str) -> list[str]:
    """--faults: 'all', 'none' or comma-separated names; an unknown name is refused before anything
    is built or started."""
    if selection in ("all", "none"):
        return list(FAULTS) if selection == "all" else []
    names = [n.strip() for n in selection.split(",") if n.strip()]
    unknown = sorted(set(names) - set(FAULTS))
    if unknown or not names:
        raise ValueError(f"unknown fault(s) {unknown or [selection]}; known: all, none, {', '.join(FAULTS)}")
    return names


def run_all(stack: Stack, tester: Tester, report: dict[str, Any], names: list[str]) -> None:
    for name in names:
        try:
            report["scenarios"].append(scenario(stack, tester, name))
        except DeployError as exc:
            log.error("%s: %s", name, exc)
            report["scenarios"].append({"name": name, "ok": False, "error": str(exc)[-3000:]})
            stack.wait_healthy(300)
    final = runs.run_once(tester)
    final["verdict"] = tester.probe("verify", "deploy", TOPIC, PARTITIONS, timeout=600)
    report["scenarios"].append({"name": "final clean run", **final,
                                "ok": final["state"] == "success" and final["verdict"]["ok"]})
