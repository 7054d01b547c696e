"""Scheduled catch-up and `airflow backfill create` through a real scheduler, dag-processor and
api-server (LocalExecutor, SQLite): each interval run copies exactly the records below its data
interval's end, intervals run in order, and re-running a finished interval copies nothing."""

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eosmirror.airflow import home
from eosmirror.airflow import reports
from tests.helpers import create_topic, mirrors_file, producer, read_all

pytestmark = pytest.mark.e2e
API_PORT = 18088
AIRFLOW = str(Path(sys.executable).with_name("airflow"))


def airflow_cli(env, *args, timeout=120):
    done = subprocess.run([AIRFLOW, *args], env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"airflow {' '.join(args)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done.stdout


@pytest.fixture
def airflow_services(tmp_path, monkeypatch):
    """dag-processor, scheduler and api-server of the project's Airflow home; stopped afterwards."""
    env = {**os.environ, **home.airflow_environ(),
           "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{API_PORT}/execution/",
           "AIRFLOW__API__PORT": str(API_PORT), "AIRFLOW__API__HOST": "127.0.0.1",
           "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5", "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2"}
    procs, logs = [], {}
    state = {"env": env, "logs": logs}
    yield state
    for proc in procs + state.get("procs", []):
        try:
            os.killpg(proc.pid, 15)
            proc.wait(30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, 9)
            except ProcessLookupError:
                pass


def start_services(state, tmp_path):
    procs = []
    for name, args in (("api-server", ["api-server", "--port", str(API_PORT)]), ("dag-processor", ["dag-processor"]),
                       ("scheduler", ["scheduler"])):
        log = tmp_path / f"{name}.log"
        state["logs"][name] = log
        procs.append(subprocess.Popen([AIRFLOW, *args], env=state["env"], stdout=open(log, "w"),
                                      stderr=subprocess.STDOUT, start_new_session=True))
    state["procs"] = procs


def wait_for(predicate, timeout, what, state):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(2)
    tails = "\n".join(f"--- {n}\n{p.read_text()[-3000:]}" for n, p in state["logs"].items())
    dag_runs = "\n".join(f"{d}: {[(r['run_id'], r['state']) for r in runs(state, d)]}" for d in state.get("dags", []))
    raise AssertionError(f"timed out waiting for {what}\nruns:\n{dag_runs}\n{tails}")


def runs(state, dag_id):
    out = subprocess.run([AIRFLOW, "dags", "list-runs", dag_id, "-o", "json"], env=state["env"],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():   # log lines may precede the JSON
        if line.startswith("[{") or line.strip() == "[]":
            return json.loads(line)
    return []


def result_of(dag_id, run_id):
    found = reports.run_report(dag_id, run_id)
    assert found is not None, f"no run report (copy task XCom) for {dag_id} {run_id}"
    return found


def test_catchup_and_backfill_copy_interval_by_interval(source_conf, target_conf, unique, tmp_path, airflow_services):
    now = dt.datetime.now(dt.timezone.utc)
    hour = now.replace(minute=0, second=0, microsecond=0)
    starts = [hour - dt.timedelta(hours=3 - i) for i in range(3)]          # three complete past intervals
    scheduled_topic, backfill_topic = create_topic(source_conf, unique("sch"), 2), create_topic(source_conf, unique("bf"), 2)
    p = producer(source_conf)
    per_interval = {}
    for topic in (scheduled_topic, backfill_topic):
        for i, start in enumerate(starts):
            for k in range(2):
                for n in range(3 + i):      # a different count per interval: a shifted bound shows
                    ts = start + dt.timedelta(minutes=5 + 10 * n)
                    p.produce(topic, value=f"i{i}-{k}-{n}".encode(), partition=k, timestamp=int(ts.timestamp() * 1000))
            per_interval[i] = 2 * (3 + i)
        for k in range(2):                  # "current" records: beyond every interval's end
            p.produce(topic, value=f"now-{k}".encode(), partition=k, timestamp=int(now.timestamp() * 1000))
    p.flush(30)
    scheduled, backfilled = unique("sched").replace("-", "_"), unique("bfill").replace("-", "_")
    common = {"source": {"local": "source"}, "target": {"local": "target"}, "slots": 1, "max_transaction_seconds": 10}
    config_file = mirrors_file(tmp_path / "mirrors.yaml", [
        {**common, "name": scheduled, "topics": [scheduled_topic],
         "airflow": {"schedule": "0 * * * *", "catchup": True, "retries": 0, "start_date": starts[0].isoformat()}},
        {**common, "name": backfilled, "topics": [backfill_topic],
         "airflow": {"schedule": "0 * * * *", "catchup": False, "retries": 0,
                     "start_date": (starts[0] - dt.timedelta(days=1)).isoformat()}}])
    state = airflow_services
    state["env"]["EOSMIRROR_CONFIG"] = str(config_file)
    start_services(state, tmp_path)
    sched_id, bf_id = f"eosmirror__{scheduled}", f"eosmirror__{backfilled}"
    state["dags"] = [sched_id, bf_id]
    wait_for(lambda: bf_id in subprocess.run([AIRFLOW, "dags", "list", "-o", "plain"], env=state["env"],
                                             capture_output=True, text=True).stdout, 120, "the DAGs to be parsed", state)
    # the backfill is created before the DAG is unpaused, so no scheduled run can take its interval first
    airflow_cli(state["env"], "backfill", "create", "--dag-id", bf_id, "--from-date", starts[0].isoformat(),
                "--to-date", starts[2].isoformat(), "--max-active-runs", "1")
    airflow_cli(state["env"], "dags", "unpause", sched_id)
    airflow_cli(state["env"], "dags", "unpause", bf_id)

    def all_done():
        rs = runs(state, sched_id) + runs(state, bf_id)
        failed = [r for r in rs if r.get("state") == "failed"]
        assert not failed, failed
        return len([r for r in rs if r.get("state") == "success"]) >= 6

    wait_for(all_done, 420, "three scheduled and three backfill runs", state)

    for dag_id, topic, kind in ((sched_id, scheduled_topic, "scheduled"), (bf_id, backfill_topic, "backfill")):
        done = sorted(runs(state, dag_id), key=lambda r: r["logical_date"])
        assert [r["run_id"].split("__")[0] for r in done] == [kind] * 3, done
        for i, r in enumerate(done):
            result = result_of(dag_id, r["run_id"])
            end = starts[i] + dt.timedelta(hours=1)
            assert dt.datetime.fromisoformat(result["until"]) == end
            assert result["records"] == per_interval[i], (i, result["records"])   # exactly its interval, in order
        for k in range(2):
            got = [r.value.decode() for r in read_all(target_conf, topic, k)]
            assert got == [f"i{i}-{k}-{n}" for i in range(3) for n in range(3 + i)]   # "now" records not copied

    # re-running a finished interval (clearing its tasks) copies nothing. (A cleared run of a backfill
    # that is already complete is not picked up again by Airflow 3.3's scheduler, so the scheduled
    # DAG's run is the one re-run here.)
    middle = sorted(runs(state, sched_id), key=lambda r: r["logical_date"])[1]
    before = result_of(sched_id, middle["run_id"])["run_id"]
    airflow_cli(state["env"], "tasks", "clear", sched_id, "--start-date", middle["logical_date"], "--end-date",
                middle["logical_date"], "--yes")
    wait_for(lambda: (reports.run_report(sched_id, middle["run_id"]) or {}).get("run_id", before) != before and
             any(r["run_id"] == middle["run_id"] and r["state"] == "success" for r in runs(state, sched_id)),
             240, "the cleared interval to run again", state)
    again = result_of(sched_id, middle["run_id"])
    assert again["records"] == 0 and again["status"] == "ok"
