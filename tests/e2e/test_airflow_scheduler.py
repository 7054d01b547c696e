"""`make airflow` (= `eosmirror airflow standalone`) as an operator starts it, then scheduled catch-up,
`airflow backfill create` and a manual run through its REST API (LocalExecutor, SQLite): each interval
run copies exactly the records below its data interval's end, intervals run in order, re-running a
finished interval copies nothing, and a manual run's task logs can be read through the API. Then the
manual mirror's switchover DAG proves zero loss and its Asset event runs a team's DAG scheduled on it
(one of a folder of the team's own DAGs), which a switchover that stops never does; its promotion DAG is
then refused without a retry; the scheduled mirror's promotion DAG promotes and fails, once, counting the
records it never copied.
Beside all this, in a thread, the whole disaster-recovery drill of tests/e2e/test_dr_drill.py through the
REST API, on this same Airflow (one standalone start for both, the module's ``airflow`` fixture), its
outcome reported by its own test, test_the_disaster_recovery_drill_through_the_rest_api.
Slow (175-195 s on 2 cores at load 1-8; 358 s with the drill run after the checks instead of beside them):
one standalone start, then about ten DAG runs through the real scheduler (their copies in one run server),
and beside them the drill's sixteen steps (180 s of them).

One Airflow start serves every check; every wait draws on one budget below the test's timeout and
says what it saw when it gives up."""

import contextlib
import datetime as dt
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from eosmirror.airflow import reports
from eosmirror.core.runreport import RunReport
from eosmirror.spark import serverclient
from eosmirror_tools.kit import waits
from tests.e2e.listeners import describe, listeners_of, session_members
from tests.helpers import create_topic, mirrors_file, producer, read_all, seed_sequence
from tests.support.airflow_dags import end_interrupted_runs
from tests.support.clusters import killable_cluster, own_port
from tests.support.drill import RestOperator, drill_mirror, rest_drill
from tests.support.names import unique_names
from tests.support.processes import stop_process_group

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1300)]
# In this worker's port range (conftest's source port + offset), not fixed: two checkouts' runs of this
# module on one machine shared port 18088, and one's tasks called the other's execution API (a 60 s
# stall of every task, then failures).
REST_CLUSTER_A_PORT = own_port(70)   # the REST drill's cluster A (and the next four ports)
DRILL_TEST = "test_the_disaster_recovery_drill_through_the_rest_api"
API_PORT = own_port(80)   # not Airflow's default 8080: the execution API must follow the port
BUDGET_SECONDS = 900      # all waits together, below the test's timeout
# One REST call: the API server's own worker timeout (120 s). At load 10 it answered nothing for over
# 30 s once (a GET of dagRuns timed out at the old 30 s while the runs went on): slow, not an outcome.
CALL_TIMEOUT_SECONDS = 120
LISTENER_WATCH_SECONDS = 20   # the loopback check samples at least this long after the standalone is healthy
VENV_BIN = Path(sys.executable).parent
AIRFLOW = str(VENV_BIN / "airflow")


class Budget:
    def __init__(self, seconds: float):
        self.deadline = time.monotonic() + seconds

    def take(self, seconds: float) -> float:
        return max(1.0, min(seconds, self.deadline - time.monotonic()))


class Api:
    """The REST API with a JWT from /auth/token (simple auth manager: `make airflow` prints the admin
    password and keeps it in the home's simple_auth_manager_passwords.json.generated)."""

    # The test's own writes to Airflow's SQLite database, one at a time: a REST write (the drill's thread)
    # at the same moment as an `airflow backfill create` or `tasks clear` process waited out SQLite's 60 s
    # busy timeout and failed with a 500 (seen once). The scheduler's own writes go on as in any use.
    writes = threading.Lock()

    def __init__(self, base: str):
        self.base, self.token = base, None

    def call(self, method: str, path: str, body: dict | None = None, accept: str = "application/json",
             read: bool | None = None):
        """``read``: a call that writes nothing (every GET; a POST that lists); a write holds ``writes``."""
        read = method == "GET" if read is None else read
        headers = {"Accept": accept, "Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.base + path, method=method, headers=headers,
                                         data=json.dumps(body).encode() if body is not None else None)
        # A write is sent again only after a database error (SQLite's "database is locked", which Airflow's API
        # shows as "Database error" with the text hidden: a 500 whose transaction rolled back, see airflow_cli;
        # seen at load 10 on an INSERT into Airflow's audit log), as an operator would click again; any other
        # error fails at once.
        for attempt in range(1, 4):
            try:
                with self.writes if not read else contextlib.nullcontext(), \
                        urllib.request.urlopen(request, timeout=CALL_TIMEOUT_SECONDS) as response:
                    raw = response.read().decode()
                return json.loads(raw) if accept == "application/json" and raw else raw
            except urllib.error.HTTPError as exc:
                if exc.code != 500:
                    raise                     # a 404 is an answer some callers expect (runs: not parsed yet)
                said = exc.read().decode(errors="replace")
                if read or not ("database is locked" in said or "Database error" in said) or attempt == 3:
                    raise AssertionError(f"{method} {path}: HTTP 500 (attempt {attempt}): {said[-2000:]}") from exc
                time.sleep(2)
        raise AssertionError("unreachable")

    def login(self, airflow_home: Path) -> None:
        passwords = json.loads((airflow_home / "simple_auth_manager_passwords.json.generated").read_text())
        user, password = next(iter(passwords.items()))
        self.token = self.call("POST", "/auth/token", {"username": user, "password": password})["access_token"]

    def runs_of(self, dag_ids) -> dict[str, list[dict]]:
        """The runs of several DAGs in one call (the batch list: one request costs the API server about
        30 ms of CPU, whatever it returns, and the test polls every half second)."""
        found = self.call("POST", "/api/v2/dags/~/dagRuns/list", {"dag_ids": list(dag_ids), "page_limit": 100},
                          read=True)["dag_runs"]
        return {d: [r for r in found if r["dag_id"] == d] for d in dag_ids}

    def runs(self, dag_id: str) -> list[dict]:
        try:
            return self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns?limit=100")["dag_runs"]
        except urllib.error.HTTPError as exc:
            if exc.code == 404:      # not parsed yet
                return []
            raise


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """`eosmirror airflow standalone` with a PATH that lacks the venv (as in a new user's shell) and
    a non-default port; stopped (its whole process group) afterwards."""
    from eosmirror.airflow import home

    env = {k: v for k, v in os.environ.items()
           if k not in ("AIRFLOW__API__BASE_URL", "AIRFLOW__CORE__EXECUTION_API_SERVER_URL")}
    env.update({"PATH": os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if Path(p) != VENV_BIN),
                "AIRFLOW__API__PORT": str(API_PORT),
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5", "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
                # Each DAG file parsed once: the mirrors file and the DAG folder never change while the module
                # runs. At the default (30 s) the DAG processor parsed eosmirror_dags.py 7 times in a 270 s run,
                # 1-4 s of a busy core each, and wrote its 44 DAGs into SQLite beside the scheduler each time.
                "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600"})
    state = {"env": env, "log": tmp_path_factory.mktemp("standalone") / "standalone.log", "home": home.airflow_home(),
             "proc": None, "listeners": set(), "watching": threading.Event()}
    if ended := end_interrupted_runs(state["home"]):
        print(f"ended {ended} DAG run(s) an interrupted session left running in {state['home']}")
    yield state
    state["watching"].clear()
    proc = state["proc"]
    if proc is not None:
        stop_process_group(proc.pid)


def watch_listeners(state) -> None:
    """Every listener of the standalone's session (API server, scheduler, DAG processor, triggerer and
    every spark-submit a task starts) and of the brokers, sampled each second for as long as the module
    runs: what test_make_airflow_listens_on_loopback_only judges."""
    from eosmirror_tools.kit import cluster

    def sample() -> None:
        while state["watching"].is_set() and state["proc"].poll() is None:
            brokers = {pid for c in cluster.default_clusters() if (pid := cluster.status(c)["pid"])}
            state["listeners"] |= listeners_of(session_members(state["proc"].pid) | brokers)
            time.sleep(1)

    state["watching"].set()
    threading.Thread(target=sample, name="listeners", daemon=True).start()


def start_standalone(state, config_file: Path) -> None:
    state["env"]["EOSMIRROR_CONFIG"] = str(config_file)
    state["proc"] = subprocess.Popen([str(VENV_BIN / "eosmirror"), "airflow", "standalone"], env=state["env"],
                                     stdout=open(state["log"], "w"), stderr=subprocess.STDOUT, start_new_session=True)


def wait_for(predicate, seconds, what, state, budget: Budget, seen=lambda: ""):
    """``seconds`` is the quiet machine's generous figure; a busy machine gets more (waits.py), the
    test's budget caps it."""
    seconds = round(budget.take(waits.service_budget(seconds)))
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not state.get("abandoned"):
        if state["proc"] is not None and state["proc"].poll() is not None:
            break
        if predicate():
            return
        # Half a second: most waits are for a DAG run whose state changes at a moment of its own; a
        # coarser poll added its mean half-interval to every one of the ~30 waits (one REST call each).
        time.sleep(0.5)
    if state.get("abandoned"):
        raise AssertionError(f"stopped waiting for {what}: the module's tests ended and Airflow is being stopped")
    exited = state["proc"].poll() if state["proc"] is not None else None
    raise AssertionError(f"gave up after {seconds} s waiting for {what}; {waits.machine_now()}; "
                         f"standalone exit code: {exited}; saw: {seen()}\n"
                         f"--- standalone log tail\n{state['log'].read_text()[-4000:]}")


def airflow_cli(env, *args, timeout=120, attempts=3):
    """The Airflow CLI against the standalone's SQLite database. SQLite answers "database is locked"
    at once, whatever the busy timeout, when a transaction that has read must upgrade to write while
    the scheduler writes (it refuses to wait there, to avoid a deadlock): CI and a loaded run hit it
    in `backfill create`. That transaction rolled back, so the command is run again, as an operator
    would; any other failure fails at once."""
    for attempt in range(1, attempts + 1):
        with Api.writes:
            done = subprocess.run([AIRFLOW, *args], env=env, capture_output=True, text=True, timeout=timeout)
        if done.returncode == 0 or "database is locked" not in done.stderr or attempt == attempts:
            break
        time.sleep(2)   # a pause before the retry, as an operator's: the scheduler's write goes on meanwhile
    assert done.returncode == 0, (f"airflow {' '.join(args)} failed (attempt {attempt}):\n"
                                  f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


def healthy(api: Api) -> bool:
    try:
        health = api.call("GET", "/api/v2/monitor/health")
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False
    return all((health.get(part) or {}).get("status") == "healthy" for part in ("metadatabase", "scheduler"))


def result_of(dag_id, run_id):
    found = reports.run_report(dag_id, run_id)
    assert isinstance(found, RunReport), f"no run report (copy task XCom) for {dag_id} {run_id}: {found}"
    return found


@pytest.fixture(scope="module")
def rest_drill_a():
    """The REST drill's cluster A: a broker of its own, so the drill can SIGKILL and restart it."""
    with killable_cluster("drill-rest-a", REST_CLUSTER_A_PORT) as a:
        yield a


@pytest.fixture(scope="module")
def airflow(request, source_conf, target_conf, standalone, rest_drill_a):
    """One `eosmirror airflow standalone` for the module's two tests: the scheduler checks' three
    mirrors (their records written first) and the drill's mirror in its mirrors file, started, healthy,
    logged in and every DAG parsed. The REST drill (when its test is selected) starts here, in a
    thread, and runs beside the scheduler checks: both mostly wait (on spark-submit, the scheduler, a
    broker restart), so side by side they take about the longer of the two, not their sum. Its test
    waits for it and reports its outcome under its own name."""
    # The three intervals are the last complete hours. Under "0 * * * *" an hour that ends during the
    # test is one more interval, which the scheduler (catch-up on) ran too (seen once, at 03:00:54 UTC):
    # the test then waited for the next hour when it started less than 5 minutes before it. The cron
    # fires at these four hours only: the same three one-hour intervals, and the next one ends tomorrow.
    unique = unique_names(request.module.__name__.rsplit(".", 1)[-1])
    af = SimpleNamespace(budget=Budget(BUDGET_SECONDS), state=standalone, checks_done=threading.Event(),
                         drill=None, drill_failure=[])
    now = dt.datetime.now(dt.timezone.utc)
    hour = now.replace(minute=0, second=0, microsecond=0)
    af.starts = [hour - dt.timedelta(hours=3 - i) for i in range(3)]          # three complete past intervals
    hourly = f"0 {','.join(str(h.hour) for h in (*af.starts, hour))} * * *"
    af.scheduled_topic = create_topic(source_conf, unique("sch"), 2)
    af.backfill_topic = create_topic(source_conf, unique("bf"), 2)
    p = producer(source_conf)
    af.per_interval = {}
    for topic in (af.scheduled_topic, af.backfill_topic):
        for i, start in enumerate(af.starts):
            for k in range(2):
                for n in range(3 + i):      # a different count per interval: a shifted bound shows
                    ts = start + dt.timedelta(minutes=5 + 10 * n)
                    p.produce(topic, value=f"i{i}-{k}-{n}".encode(), partition=k, timestamp=int(ts.timestamp() * 1000))
            af.per_interval[i] = 2 * (3 + i)
        for k in range(2):                  # "current" records: beyond every interval's end
            p.produce(topic, value=f"now-{k}".encode(), partition=k, timestamp=int(now.timestamp() * 1000))
    p.flush(30)
    af.manual_topic = create_topic(source_conf, unique("man"), 1)
    seed_sequence(source_conf, af.manual_topic, 1, 7)
    af.scheduled, af.backfilled = unique("sched").replace("-", "_"), unique("bfill").replace("-", "_")
    af.manual = unique("manual").replace("-", "_")
    # A mirror whose switchover stops (a fault injected right after its fence): its Asset event must not come.
    af.stopper, af.stopper_topic = unique("stopper").replace("-", "_"), create_topic(source_conf, unique("stop"), 1)
    seed_sequence(source_conf, af.stopper_topic, 1, 3)
    drill_entry, drill_topic = drill_mirror(rest_drill_a, unique, airflow={"schedule": None, "retries": 0})
    common = {"source": {"local": "source"}, "target": {"local": "target"}, "slots": 1, "max_transaction_seconds": 10}
    # The scheduler checks' mirrors copy through one run server (`airflow.run_server`, docs/run-server.md): about
    # ten copy tasks that would each start a Spark driver (~7.5 CPU-s) on a suite that is CPU-bound on 2 cores.
    # The drill's mirror keeps spark-submit: the loopback check still samples a task's spark-submit sockets.
    serverclient.start(workers=2)
    request.addfinalizer(serverclient.stop)
    served = {"retries": 0, "run_server": True}
    config_file = mirrors_file(standalone["log"].parent / "mirrors.yaml", [
        {**common, "name": af.scheduled, "topics": [af.scheduled_topic],
         "airflow": {**served, "schedule": hourly, "catchup": True, "start_date": af.starts[0].isoformat()}},
        {**common, "name": af.backfilled, "topics": [af.backfill_topic],
         "airflow": {**served, "schedule": hourly, "catchup": False,
                     "start_date": (af.starts[0] - dt.timedelta(days=1)).isoformat()}},
        {**common, "name": af.manual, "topics": [af.manual_topic], "airflow": {**served, "schedule": None}},
        {**common, "name": af.stopper, "topics": [af.stopper_topic], "airflow": {**served, "schedule": None}},
        drill_entry])
    standalone["env"]["EOSMIRROR_DAGS_FOLDER"] = str(hand_off_dags(standalone["log"].parent / "dags",
                                                                   (af.manual, af.stopper)))
    standalone["env"]["EOSMIRROR_TRANSITION_FAULT"] = f"switchover:fence:{af.stopper}"
    start_standalone(standalone, config_file)
    af.api = api = Api(f"http://127.0.0.1:{API_PORT}")
    wait_for(lambda: healthy(api), 120, f"/api/v2/monitor/health on port {API_PORT} to say healthy", standalone,
             af.budget)
    af.healthy_at = time.monotonic()
    watch_listeners(standalone)
    api.login(standalone["home"])
    af.sched_id, af.bf_id = f"eosmirror__{af.scheduled}", f"eosmirror__{af.backfilled}"
    af.manual_id, drill_id = f"eosmirror__{af.manual}", f"eosmirror__{drill_entry['name']}"

    def parsed():
        return {d["dag_id"] for d in api.call("GET", "/api/v2/dags?limit=1000&dag_id_pattern=eosmirror")["dags"]}

    af.repoint = {m: f"repoint_clients_of_{m}" for m in (af.manual, af.stopper)}

    def parsed_all():
        return parsed() | {d["dag_id"] for d in api.call("GET", "/api/v2/dags?limit=100&dag_id_pattern=repoint")["dags"]}

    wait_for(lambda: {af.sched_id, af.bf_id, af.manual_id, drill_id, *af.repoint.values()} <= parsed_all(), 120,
             "the DAGs to be parsed", standalone, af.budget, seen=lambda: sorted(parsed_all()))

    # The drill's LSO = HW check of B's shared topics waits until the scheduler checks are done (their
    # mirrors commit transactions on B too); the drill's test sets checks_done itself when they did not run.
    def wait(predicate, seconds, what, seen):
        wait_for(predicate, seconds, what, standalone, af.budget, seen=seen)

    def the_drill() -> None:
        try:
            rest_drill(rest_drill_a, drill_entry, drill_topic, target_conf, unique,
                       RestOperator(api, wait, config_file),
                       before_the_last_check=lambda: wait(af.checks_done.is_set, 600, "the scheduler checks to end",
                                                          seen=lambda: "still running"))
        except BaseException as exc:   # noqa: BLE001 - raised again by the drill's own test
            af.drill_failure.append(exc)

    if any(item.name == DRILL_TEST for item in request.session.items):
        af.drill = threading.Thread(target=the_drill, name="rest-drill", daemon=True)
        af.drill.start()
    yield af
    if af.drill is not None and af.drill.is_alive():   # its test did not wait for it: its waits give up now
        standalone["abandoned"] = True
        af.drill.join()


def hand_off_dags(folder: Path, mirrors: tuple[str, ...]) -> Path:
    """A DAG folder as a team keeps one (docs/disaster-recovery.md, "Handing over to your own DAGs"):
    eosmirror's two-line DAG file, and per mirror a DAG scheduled on its `switched-over` Asset event
    that hands the event's report on (a real one would repoint DNS or a config map)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "eosmirror_dags.py").write_text((Path(__file__).resolve().parents[2] / "dags" / "eosmirror_dags.py")
                                              .read_text())
    (folder / "repoint_clients.py").write_text(f"""from airflow.sdk import DAG, Asset, task

for mirror in {list(mirrors)!r}:
    with DAG(f"repoint_clients_of_{{mirror}}", schedule=[Asset(f"eosmirror://{{mirror}}/switched-over")],
             start_date=None, catchup=False) as dag:
        @task
        def repoint(**context):
            return [{{"uri": getattr(asset, "uri", str(asset)), "extra": dict(event.extra or {{}})}}
                    for asset, events in context["triggering_asset_events"].items() for event in events]

        repoint()
    globals()[dag.dag_id] = dag
""")
    return folder


def test_make_airflow_serves_rest_triggers_catchup_and_backfill_copy_interval_by_interval(airflow, target_conf):
    af, api, state, budget = airflow, airflow.api, airflow.state, airflow.budget
    sched_id, bf_id, manual_id, starts = af.sched_id, af.bf_id, af.manual_id, af.starts
    scheduled, manual, manual_topic = af.scheduled, af.manual, af.manual_topic
    scheduled_topic, backfill_topic, per_interval = af.scheduled_topic, af.backfill_topic, af.per_interval
    try:
        # the backfill is created before the DAG is unpaused, so no scheduled run can take its interval first
        # (by the CLI, not the REST API's POST /backfills: on SQLite that request left every other write of the
        # standalone waiting out the 60 s busy timeout, its tasks' included, in 2 runs of 3 - Airflow's route
        # itself says backfills are "not supported on SQLite under concurrent access")
        airflow_cli(state["env"], "backfill", "create", "--dag-id", bf_id, "--from-date", starts[0].isoformat(),
                    "--to-date", starts[2].isoformat(), "--max-active-runs", "1")
        for dag_id in (sched_id, bf_id, manual_id):
            api.call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
        triggered = api.call("POST", f"/api/v2/dags/{manual_id}/dagRuns", {"logical_date": None})["dag_run_id"]

        def states():
            return {d: [(r["run_type"], r["state"]) for r in runs]
                    for d, runs in api.runs_of((sched_id, bf_id, manual_id)).items()}

        def all_done():
            seen = [state for runs_ in states().values() for _, state in runs_]
            assert "failed" not in seen, states()
            return seen.count("success") >= 7

        wait_for(all_done, 420, "three scheduled, three backfill runs and one manual run", state, budget, seen=states)

        # the manual run's logs, through the API as the UI reads them
        logs = api.call("GET", f"/api/v2/dags/{manual_id}/dagRuns/{triggered}/taskInstances/publish/logs/1")
        text = json.dumps(logs)
        assert "7 records" in text or '"records": 7' in text or "records=7" in text, text[-3000:]
        assert values_on(target_conf, manual_topic) == [f"0-{n}" for n in range(7)]

        for dag_id, topic, kind in ((sched_id, scheduled_topic, "scheduled"), (bf_id, backfill_topic, "backfill")):
            done = sorted(api.runs(dag_id), key=lambda r: r["logical_date"])
            assert [r["run_type"] for r in done] == [kind] * 3, done
            for i, r in enumerate(done):
                result = result_of(dag_id, r["dag_run_id"])
                end = starts[i] + dt.timedelta(hours=1)
                assert dt.datetime.fromisoformat(result.until) == end
                assert result.records == per_interval[i], (i, result.records)   # exactly its interval, in order
            for k in range(2):
                got = [r.value.decode() for r in read_all(target_conf, topic, k)]
                assert got == [f"i{i}-{k}-{n}" for i in range(3) for n in range(3 + i)]   # "now" records not copied

        # Two mirrors' steps side by side (each waits mostly on the scheduler and a spark-submit):
        # - re-running a finished interval (clearing its tasks) copies nothing. (A cleared run of a backfill
        #   that is already complete is not picked up again by Airflow 3.3's scheduler, so the scheduled
        #   DAG's run is the one re-run here.)
        # - the stopper's switchover stops right after its fence (an injected fault): no Asset event;
        # - the manual mirror's switchover DAG proves zero loss (its producers are idle) and its Asset event
        #   runs the team's DAG; the mirror's next run and its promotion DAG are then refused, not retried.
        switch_id, promote_id = f"eosmirror_switchover__{manual}", f"eosmirror_promote__{manual}"
        stop_id = f"eosmirror_switchover__{af.stopper}"
        for dag_id in (switch_id, promote_id, stop_id, *af.repoint.values()):
            api.call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})

        def run_of(dag_id, run_id):
            return next((r for r in api.runs(dag_id) if r["dag_run_id"] == run_id), {})

        def run_state(dag_id, run_id):
            return run_of(dag_id, run_id).get("state")

        middle = sorted(api.runs(sched_id), key=lambda r: r["logical_date"])[1]
        before = result_of(sched_id, middle["dag_run_id"]).run_id
        # the UI's "Clear" on that run (every task, not only failed ones), through the REST API
        cleared = api.call("POST", f"/api/v2/dags/{sched_id}/clearTaskInstances",
                           {"dry_run": False, "dag_run_id": middle["dag_run_id"], "only_failed": False})
        assert cleared["total_entries"] >= 3, cleared      # preflight, copy, publish
        stopped = api.call("POST", f"/api/v2/dags/{stop_id}/dagRuns",
                           {"logical_date": None, "conf": {"quiet_seconds": 1, "wait_seconds": 30}})["dag_run_id"]
        wait_for(lambda: run_state(stop_id, stopped) in ("success", "failed"), 240, "the stopping switchover", state,
                 budget, seen=lambda: run_state(stop_id, stopped))
        stop_log = json.dumps(api.call("GET", f"/api/v2/dags/{stop_id}/dagRuns/{stopped}/taskInstances/switchover/logs/1"))
        assert run_state(stop_id, stopped) == "failed" and "injected fault after the step 'fence'" in stop_log, (
            stop_log[-2000:])
        # after the stopper's end: an Asset event it had emitted would come before the manual mirror's
        switched = api.call("POST", f"/api/v2/dags/{switch_id}/dagRuns",
                            {"logical_date": None, "conf": {"quiet_seconds": 2, "wait_seconds": 60}})["dag_run_id"]

        wait_for(lambda: getattr(reports.run_report(sched_id, middle["dag_run_id"]), "run_id", before) != before and
                 any(r["dag_run_id"] == middle["dag_run_id"] and r["state"] == "success" for r in api.runs(sched_id)),
                 240, "the cleared interval to run again", state, budget, seen=states)
        again = result_of(sched_id, middle["dag_run_id"])
        assert again.records == 0 and again.ok

        # An unplanned promotion of the scheduled mirror (its re-run is done): its source answers, and the
        # current hour's records ("now", one per partition) were never copied. Promoted, but the run fails,
        # once, and says so. Started now; judged at the end.
        lossy_id = f"eosmirror_promote__{scheduled}"
        api.call("PATCH", f"/api/v2/dags/{lossy_id}", {"is_paused": False})
        lossy = api.call("POST", f"/api/v2/dags/{lossy_id}/dagRuns", {"logical_date": None})["dag_run_id"]

        wait_for(lambda: run_state(switch_id, switched) in ("success", "failed"), 240, "the switchover DAG run", state,
                 budget, seen=lambda: run_state(switch_id, switched))
        report = api.call("GET", f"/api/v2/dags/{switch_id}/dagRuns/{switched}/taskInstances/switchover/xcomEntries/report")
        outcome = report["value"] if isinstance(report["value"], dict) else json.loads(report["value"])
        assert run_state(switch_id, switched) == "success", outcome
        assert outcome["verdict"] == "zero loss: safe to switch" and outcome["recovery_seconds"] > 0, outcome
        # The team's DAG scheduled on the Asset event runs once, handed the verdict; the stopper's never ran:
        # the stopper's run ended before the manual one started, so the scheduler, which handled the later
        # event, would have handled an earlier one too.
        assert run_of(stop_id, stopped)["end_date"] < run_of(switch_id, switched)["end_date"], (
            run_of(stop_id, stopped), run_of(switch_id, switched))
        repoint = af.repoint[manual]
        # An Airflow 3 task cannot pause another DAG: the state refuses the mirror's next run at preflight, at
        # once, and its promotion DAG (both triggered now, side by side with the hand-off DAG's run).
        after = api.call("POST", f"/api/v2/dags/{manual_id}/dagRuns", {"logical_date": None})["dag_run_id"]
        refused = api.call("POST", f"/api/v2/dags/{promote_id}/dagRuns", {"logical_date": None})["dag_run_id"]
        wait_for(lambda: [r["state"] for r in api.runs(repoint)] == ["success"], 180, "the hand-off DAG's run", state,
                 budget, seen=lambda: [(r["run_type"], r["state"]) for r in api.runs(repoint)])
        run = api.runs(repoint)[0]
        handed = api.call("GET", f"/api/v2/dags/{repoint}/dagRuns/{run['dag_run_id']}/taskInstances/repoint/"
                                 f"xcomEntries/return_value")
        events = handed["value"] if isinstance(handed["value"], list) else json.loads(handed["value"])
        assert run["run_type"] == "asset_triggered" and [e["uri"] for e in events] == [
            f"eosmirror://{manual}/switched-over"], (run, events)
        assert (events[0]["extra"]["verdict"], events[0]["extra"]["mirror"]) == ("zero loss: safe to switch", manual)
        assert api.runs(af.repoint[af.stopper]) == [], "a switchover that stopped emitted its Asset event"
        wait_for(lambda: run_state(manual_id, after) in ("success", "failed"), 120, "the refused mirror run", state,
                 budget, seen=lambda: run_state(manual_id, after))
        pre = api.call("GET", f"/api/v2/dags/{manual_id}/dagRuns/{after}/taskInstances/preflight")
        assert (run_state(manual_id, after), pre["state"], pre["try_number"]) == ("failed", "failed", 1), pre
        pre_log = json.dumps(api.call("GET", f"/api/v2/dags/{manual_id}/dagRuns/{after}/taskInstances/preflight/logs/1"))
        assert "switched-over since" in pre_log and "refused" in pre_log, pre_log[-2000:]
        wait_for(lambda: run_state(promote_id, refused) in ("success", "failed"), 120, "the refused promotion", state,
                 budget, seen=lambda: run_state(promote_id, refused))
        ti = api.call("GET", f"/api/v2/dags/{promote_id}/dagRuns/{refused}/taskInstances/promote")
        assert (run_state(promote_id, refused), ti["try_number"]) == ("failed", 1), ti   # refused at once, never retried
        log_text = json.dumps(api.call("GET", f"/api/v2/dags/{promote_id}/dagRuns/{refused}/taskInstances/promote/logs/1"))
        assert "already switched-over" in log_text, log_text[-2000:]

        wait_for(lambda: run_state(lossy_id, lossy) in ("success", "failed"), 180, "the promotion DAG run", state,
                 budget, seen=lambda: run_state(lossy_id, lossy))
        ti = api.call("GET", f"/api/v2/dags/{lossy_id}/dagRuns/{lossy}/taskInstances/promote")
        report = api.call("GET", f"/api/v2/dags/{lossy_id}/dagRuns/{lossy}/taskInstances/promote/xcomEntries/report")
        loss = report["value"] if isinstance(report["value"], dict) else json.loads(report["value"])
        assert (run_state(lossy_id, lossy), ti["try_number"]) == ("failed", 1), (ti, loss)
        assert (loss["state"], loss["source_answered"], loss["may_be_lost"]) == ("promoted", True, 2), loss
        assert [p["may_be_lost"] for p in loss["partitions"]] == [1, 1], loss
    finally:
        af.checks_done.set()      # the REST drill's last check (LSO = HW on B's shared topics) may go on


def test_the_disaster_recovery_drill_through_the_rest_api(airflow):
    """The whole disaster-recovery drill of tests/e2e/test_dr_drill.py through the REST API of the
    module's Airflow (its own cluster A on REST_CLUSTER_A_PORT, its mirror in the same mirrors file): started
    by the ``airflow`` fixture beside the scheduler checks; here its outcome, under its own name."""
    airflow.checks_done.set()     # when the scheduler checks did not run, nothing else is to wait for
    assert airflow.drill is not None, "the drill was not started (its test was not among the selected ones)"
    budget = max(60.0, airflow.budget.deadline - time.monotonic()) + CALL_TIMEOUT_SECONDS
    airflow.drill.join(budget)
    assert not airflow.drill.is_alive(), (f"the REST drill still runs after {budget:.0f} s more, past the end of "
                                          f"its waits' budget ({waits.machine_now()})")
    if airflow.drill_failure:
        raise airflow.drill_failure[0]


def values_on(conf, topic):
    return [r.value.decode() for r in read_all(conf, topic)]


def test_make_airflow_listens_on_loopback_only(airflow, clusters):
    """`make airflow`'s standalone with the default listen setting (issue #31): every listener of its
    session and of the brokers, sampled each second from the moment it was healthy through the module's
    other tests (their task runs and spark-submits included), is on loopback. EOSMIRROR_LISTEN=all is
    tests/e2e/test_loopback.py's (a start of its own)."""
    # the task-log servers start late: at least LISTENER_WATCH_SECONDS of sampling, whatever ran before
    deadline = airflow.healthy_at + LISTENER_WATCH_SECONDS
    while time.monotonic() < deadline:
        time.sleep(1)         # time that must pass: the check is "nothing opens later either"
    seen = set(airflow.state["listeners"])
    api = {listener for listener in seen if listener.port == API_PORT}
    assert api and all(listener.loopback for listener in api), (
        f"the API server must listen on 127.0.0.1:{API_PORT} only; saw:\n  {describe(seen)}")
    assert {listener for listener in seen if listener.port in (clusters["source"].port, clusters["target"].port)}, (
        f"the brokers' listeners were not seen (is the socket table read right?); saw:\n  {describe(seen)}")
    open_ = {listener for listener in seen if not listener.loopback}
    assert not open_, f"listening on a non-loopback address:\n  {describe(open_)}\nall listeners:\n  {describe(seen)}"
    assert "looks like production" not in airflow.state["log"].read_text(), airflow.state["log"].read_text()[-3000:]
