"""A run server (eosmirror/spark/server.py) whose slots can be held inside their first transaction, and
CLI runs through it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from eosmirror.spark import serverclient
from tests.helpers import create_topic, faults_env, mirrors_file, read_all, seed_sequence, values
from tests.support.kill import (
    HOLD_SECONDS,
    PARTITIONS,
    RECORDS,
    UNBLOCK_BUDGET,
    blocked_partitions,
    expected,
    wait_all_blocked,
)
from tests.support.processes import ended

RUN_BUDGET = 120.0   # one CLI run through the server, under a loaded test machine


def held_server(markers: Path, executor_env: bool = False, **start) -> Iterator[dict]:
    """A run server whose slots sleep inside their first transaction (test_kill's hold) once their
    marker file under ``markers`` is removed. The fault rules go to the server's environment, or with
    ``executor_env`` to the executors' (on a cluster, executors get their environment from the worker
    daemon, not from the server). Stopped at the end, or killed: nothing may outlive the module."""
    for k in range(PARTITIONS):
        (markers / f"hold-{k}").touch()   # spent until the kill test removes them
    rules = faults_env(*({"point": "in_transaction", "action": "sleep", "seconds": HOLD_SECONDS, "slot": k,
                          "once": str(markers / f"hold-{k}")} for k in range(PARTITIONS)))
    conf = {"spark.ui.enabled": "false", **start.pop("conf", {})}
    if executor_env:
        conf.update({f"spark.executorEnv.{key}": value for key, value in rules.items()})
    started = time.monotonic()
    answer = serverclient.start(workers=PARTITIONS, conf=conf, extra_env=None if executor_env else rules, **start)
    try:
        yield {**answer, "markers": markers, "started_monotonic": started}
    finally:
        try:
            serverclient.stop()
        except Exception:  # noqa: BLE001 - a server that does not stop is killed
            os.killpg(answer["jvm_pid"], signal.SIGKILL)


def mirror_file(tmp_path: Path, name: str, topic: str) -> Path:
    return mirrors_file(tmp_path / "mirrors.yaml", [{
        "name": name, "source": {"local": "source"}, "target": {"local": "target"}, "topics": [re.escape(topic)],
        "slots": PARTITIONS, "max_transaction_seconds": 60}])


def run_client(name: str, config: Path, result: Path, *more: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "eosmirror.cli", "run", name, "--server", "--config", str(config),
                             "--result-json", str(result), *more], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def client_result(proc: subprocess.Popen, result: Path, what: str) -> dict:
    code, out = ended(proc, what, RUN_BUDGET)
    assert code == 0, f"{what} exited {code}:\n{out[-3000:]}"
    return json.loads(result.read_text())


def served_run(name: str, config: Path, result: Path) -> dict:
    return client_result(run_client(name, config, result), result, "eosmirror run --server")


def target_values(target_conf, topic: str) -> dict[int, list[bytes]]:
    return {k: values(read_all(target_conf, topic, k)) for k in range(PARTITIONS)}


def killed_client_ends_its_slots(served: dict, source_conf, target_conf, unique, tmp_path, where: str) -> None:
    """SIGKILL a client while its slots hold open transactions (the server's fault holds): LSO = HW on
    every target partition within the budget, the server serves on, and the next run copies every
    record exactly once."""
    from confluent_kafka.admin import AdminClient

    topic = create_topic(source_conf, unique("srvkill"), partitions=PARTITIONS)
    name = unique("m")
    config = mirror_file(tmp_path, name, topic)
    seed_sequence(source_conf, topic, PARTITIONS, RECORDS)
    for marker in served["markers"].iterdir():
        marker.unlink()   # the holds fire again: each slot sleeps inside its first transaction
    admin = AdminClient(target_conf)
    proc = run_client(name, config, tmp_path / "killed.json")
    try:
        wait_all_blocked(admin, topic, 120, lambda: proc.poll() is None)
        killed_at = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        blocked, unblocked = {}, None
        while time.monotonic() < killed_at + UNBLOCK_BUDGET:
            blocked = blocked_partitions(admin, topic)
            if not blocked:
                unblocked = time.monotonic() - killed_at
                break
            time.sleep(0.2)
        print(f"\n[run server, {where}] client SIGKILLed: LSO = HW on every target partition after {unblocked} s "
              f"(budget {UNBLOCK_BUDGET:.0f} s)")
        assert unblocked is not None, (f"target partitions still blocked (partition: (LSO, HW)) {UNBLOCK_BUDGET:.0f} s "
                                       f"after the client was killed: {blocked}")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    answer = serverclient.status()
    assert answer is not None and answer["pid"] == served["pid"], f"the server did not live on: {answer}"
    after = served_run(name, config, tmp_path / "after.json")
    assert after["status"] == "ok", after
    assert target_values(target_conf, topic) == expected()
