"""Nothing the local stack starts is reachable from another host unless asked (issue #31).

`make airflow` with EOSMIRROR_LISTEN=all (= `eosmirror local up` + `eosmirror airflow standalone`) and
`make demo` (= `eosmirror demo`) are started as a user starts them, in a session of their own; the kernel's socket table
(/proc/net/tcp, tcp6) says where each process of that session, and each broker, listens. By default
every listener is on loopback; EOSMIRROR_LISTEN=all puts the API server (and Airflow's task-log
servers) on every interface; any other value is refused before anything starts. `make airflow` with the
default setting is judged on tests/e2e/test_airflow_scheduler.py's standalone (one start fewer), sampled
through that module's whole life.

Slow (100-190 s each on 2 cores): each starts the whole local stack as a user does (two brokers,
Airflow standalone with its scheduler, API server and DAG processor; the demo test runs the whole demo),
because the sockets of exactly that stack are what it checks."""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from eosmirror_tools.kit import waits
from tests.e2e.listeners import Listener, describe, listeners_of, session_members
from tests.support.processes import stop_process_group

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
API_PORT = 18680
LOG_PORTS = {"AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": "18681", "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": "18682"}
VENV_BIN = Path(sys.executable).parent
START_BUDGET = 150       # standalone until the API server and both task-log servers listen
DEMO_BUDGET = 300


def broker_pids() -> set[int]:
    from eosmirror_tools.kit import cluster

    return {pid for c in cluster.default_clusters() if (pid := cluster.status(c)["pid"])}


def health() -> dict:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{API_PORT}/api/v2/monitor/health", timeout=5) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
        return {}


def stack_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("AIRFLOW__API__BASE_URL", "AIRFLOW__CORE__EXECUTION_API_SERVER_URL", "AIRFLOW__API__HOST",
                        "EOSMIRROR_LISTEN")}
    return {**env, "AIRFLOW__API__PORT": str(API_PORT), **LOG_PORTS, **extra}


def watch_standalone(env: dict[str, str], log: Path, done) -> tuple[set[Listener], str]:
    """`eosmirror local up` then `eosmirror airflow standalone`, as `make airflow` runs them; every
    listener of the standalone's session and of the brokers, sampled each second from its start until
    ``done(seen)`` (within START_BUDGET). Stopped (its whole session) afterwards."""
    up = subprocess.run([str(VENV_BIN / "eosmirror"), "local", "up"], env=env, capture_output=True, text=True,
                        timeout=180)
    assert up.returncode == 0, f"eosmirror local up failed:\n{up.stdout}\n{up.stderr}"
    proc = subprocess.Popen([str(VENV_BIN / "eosmirror"), "airflow", "standalone"], env=env,
                            stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        budget = waits.service_budget(START_BUDGET, cap_seconds=300)
        deadline = time.monotonic() + budget
        seen: set[Listener] = set()
        while not done(seen):
            assert proc.poll() is None and time.monotonic() < deadline, (
                f"not every expected listener after {budget:.0f} s (exit code {proc.poll()}; {waits.machine_now()}); "
                f"health: {health()}; saw:\n  {describe(seen)}\n--- log tail\n{log.read_text()[-3000:]}")
            seen |= listeners_of(session_members(proc.pid) | broker_pids())
            time.sleep(1)
        return seen, log.read_text()
    finally:
        stop_process_group(proc.pid)


def test_listen_all_opens_the_api_server_to_every_interface(clusters, tmp_path):
    def api_and_log_servers_open(seen: set[Listener]) -> bool:
        ports = {listener.port for listener in seen if not listener.loopback}
        return {API_PORT, *map(int, LOG_PORTS.values())} <= ports

    seen, _ = watch_standalone(stack_env(EOSMIRROR_LISTEN="all"), tmp_path / "standalone.log",
                               done=api_and_log_servers_open)
    api = {listener for listener in seen if listener.port == API_PORT}
    assert api and all(listener.address in ("0.0.0.0", "::") for listener in api), (
        f"EOSMIRROR_LISTEN=all must put the API server on every interface; saw:\n  {describe(seen)}")
    assert api_and_log_servers_open(seen), (
        f"EOSMIRROR_LISTEN=all: the task-log servers ({', '.join(LOG_PORTS.values())}) should listen as Airflow's "
        f"defaults have them, on every interface; saw:\n  {describe(seen)}")


@pytest.mark.parametrize("command", [["local", "up"], ["airflow", "standalone"], ["demo"]])
def test_an_unknown_listen_value_is_refused_before_anything_starts(command, tmp_path):
    started = time.monotonic()
    done = subprocess.run([str(VENV_BIN / "eosmirror"), *command], env=stack_env(EOSMIRROR_LISTEN="lan"),
                          capture_output=True, text=True, timeout=60, start_new_session=True)
    assert done.returncode == 2, f"exit {done.returncode}:\n{done.stdout}\n{done.stderr}"
    assert "EOSMIRROR_LISTEN" in done.stderr and "loopback" in done.stderr and "all" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert time.monotonic() - started < 30, "refused, but only after starting things"
    assert health() == {}, f"something answers on {API_PORT} after the refusal"


def test_make_demo_listens_on_loopback_only(clusters, tmp_path):
    """`eosmirror demo` (what `make demo` runs after set-up), watched while it runs: its Airflow DAG
    runs, spark-submit's driver, Spark's UI and Py4J, and the brokers."""
    log = tmp_path / "demo.log"
    proc = subprocess.Popen([str(VENV_BIN / "eosmirror"), "demo", "--records", "200"], env=stack_env(),
                            stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    seen: set[Listener] = set()
    try:
        deadline = time.monotonic() + DEMO_BUDGET
        while proc.poll() is None and time.monotonic() < deadline:
            seen |= listeners_of(session_members(proc.pid) | broker_pids())
            time.sleep(0.3)
        assert proc.poll() == 0, (f"the demo did not pass within {DEMO_BUDGET} s (exit {proc.poll()}):\n"
                                  f"{log.read_text()[-3000:]}")
    finally:
        if proc.poll() is None:
            stop_process_group(proc.pid)
    ours = {listener for listener in seen if listener.pid not in broker_pids()}
    assert ours, f"no listener of the demo's own processes was seen (Spark's driver has some); saw:\n  {describe(seen)}"
    open_ = {listener for listener in seen if not listener.loopback}
    assert not open_, f"listening on a non-loopback address:\n  {describe(open_)}\nall listeners:\n  {describe(seen)}"
