"""A real Spark standalone master and worker on loopback, from pyspark's own spark-class (a fixture).

Ports are per pytest-xdist worker (tests/conftest.py): two test files that use a cluster may run at once."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

REGISTER_BUDGET = 90.0   # the master and the worker's JVMs start, the worker registers


@pytest.fixture(scope="module")
def spark_standalone(tmp_path_factory):
    """spark://127.0.0.1:<port>, a master with one worker of 4 cores (a count, not the machine's) and 2 GB."""
    from eosmirror.spark import submit

    offset = 100 * int((os.environ.get("PYTEST_XDIST_WORKER") or "gw0").removeprefix("gw") or 0)
    port, master_ui, worker_ui = 17077 + offset, 18090 + offset, 18091 + offset
    work = tmp_path_factory.mktemp("spark")
    env = {**submit.process_env(), "SPARK_WORKER_DIR": str(work / "worker"), "SPARK_LOG_DIR": str(work)}
    spark_class = str(Path(submit.spark_submit_binary()).with_name("spark-class"))
    master = subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(master_ui)], env=env, start_new_session=True,
                              stdout=open(work / "master.log", "w"), stderr=subprocess.STDOUT)
    worker = subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                               "--cores", "4", "--memory", "2g", "--webui-port", str(worker_ui),
                               f"spark://127.0.0.1:{port}"], env=env, start_new_session=True,
                              stdout=open(work / "worker.log", "w"), stderr=subprocess.STDOUT)
    try:
        deadline, state = time.time() + REGISTER_BUDGET, None
        while time.time() < deadline:
            try:
                raw = urllib.request.urlopen(f"http://127.0.0.1:{master_ui}/json/", timeout=2).read()
                state = json.loads(raw)
                if state.get("aliveworkers", 0) >= 1:
                    break
            except OSError as exc:
                state = f"no answer ({exc})"
            except ValueError:   # seen once under load: the UI's HTML page before its /json/ endpoint is up
                state = f"not JSON yet: {raw[:120]!r}"
            time.sleep(1)
        else:
            raise RuntimeError(f"the Spark standalone worker did not register within {REGISTER_BUDGET:.0f} s (master "
                               f"state {state}):\n" + (work / "worker.log").read_text()[-2000:])
        yield f"spark://127.0.0.1:{port}"
    finally:
        for proc in (worker, master):
            try:
                os.killpg(proc.pid, 15)
                proc.wait(30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, 9)
