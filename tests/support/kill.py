"""A run killed while its slots hold open transactions: which processes belong to it (RUN_MARK in their
environment), which target partitions are blocked (LSO < HW), and the budgets within which both must
clear. Used by tests/e2e/test_kill.py and the run-server tests."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

RUN_MARK = "EOSMIRROR_TEST_RUN_MARK"


HOLD_SECONDS = 150            # each slot sleeps this long inside its first transaction


PROCESS_BUDGET = 15.0         # every process of the killed run gone within this many seconds


UNBLOCK_BUDGET = 30.0         # LSO = HW on every target partition within this many seconds


PARTITIONS = 2


RECORDS = 300


def run_processes(mark: str) -> dict[int, str]:
    """{pid: command line} of every live process whose environment holds RUN_MARK=mark."""
    needle = f"{RUN_MARK}={mark}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue   # gone meanwhile, or not ours to read
        if state != "Z":   # a zombie entry is dead: it only waits for its parent to reap it
            found[int(entry.name)] = cmd
    return found


def process_status(pid: int) -> str:
    """Parent, state, threads and signal dispositions of a process, for a failure message."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return "gone"
    keep = ("State", "PPid", "Threads", "SigBlk", "SigIgn", "SigCgt")
    return ", ".join(line.replace("\t", " ") for line in lines if line.split(":")[0] in keep)


def blocked_partitions(admin, topic: str) -> dict[int, tuple[int, int]]:
    """{partition: (LSO, HW)} of the target partitions where a transaction is open."""
    from confluent_kafka.admin import OffsetSpec

    from eosmirror.kafka.offsets import list_offsets

    specs = {(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}
    stable = list_offsets(admin, specs, "target", read_committed=True)
    high = list_offsets(admin, specs, "target", read_committed=False)
    return {p: (stable[(topic, p)], high[(topic, p)]) for p in range(PARTITIONS) if stable[(topic, p)] != high[(topic, p)]}


def wait_all_blocked(admin, topic: str, budget: float, alive) -> None:
    """Until every target partition has an open transaction (each slot is inside its held transaction)."""
    from eosmirror.core.errors import EosMirrorError

    deadline, seen = time.monotonic() + budget, "the target topic does not exist yet"
    while time.monotonic() < deadline:
        assert alive(), f"the run ended before it was killed (last seen: {seen})"
        try:
            blocked = blocked_partitions(admin, topic)
            seen = f"open transactions on {sorted(blocked)} of {PARTITIONS} partitions: {blocked}"
            if len(blocked) == PARTITIONS:
                return
        except EosMirrorError as exc:
            seen = str(exc)
        time.sleep(0.2)
    pytest.fail(f"not every slot was inside its held transaction after {budget:.0f} s; last seen: {seen}")


def measure_after_kill(killed_at: float, mark: str, admin, topic: str,
                       unblock_budget: float = UNBLOCK_BUDGET) -> dict[str, object]:
    """Seconds from the kill until no process of the run is left, and until LSO = HW everywhere.

    Both are watched in one loop for the larger budget; each gives up with what it saw last."""
    times: dict[str, object] = {"no_process": None, "unblocked": None}
    left: dict[int, str] = {}
    blocked: dict[int, tuple[int, int]] | str = {}
    deadline = killed_at + max(PROCESS_BUDGET, unblock_budget) + 1
    while time.monotonic() < deadline and (times["no_process"] is None or times["unblocked"] is None):
        now = time.monotonic() - killed_at
        if times["no_process"] is None:
            left = run_processes(mark)
            if not left:
                times["no_process"] = round(now, 2)
        if times["unblocked"] is None:
            try:
                blocked = blocked_partitions(admin, topic)
                if not blocked:
                    times["unblocked"] = round(now, 2)
            except Exception as exc:  # noqa: BLE001 - shown if it never succeeds
                blocked = f"list offsets failed: {exc}"
        time.sleep(0.1)
    times["left"], times["blocked"] = {pid: f"{cmd} [{process_status(pid)}]" for pid, cmd in left.items()}, blocked
    return times


def assert_within_budgets(times: dict[str, object], how: str, unblock_budget: float = UNBLOCK_BUDGET) -> None:
    print(f"\n[{how}] time to no process of the run: {times['no_process']} s (budget {PROCESS_BUDGET:.0f} s); "
          f"time to LSO = HW on every target partition: {times['unblocked']} s (budget {unblock_budget:.0f} s)")
    assert times["no_process"] is not None and times["no_process"] <= PROCESS_BUDGET, (
        f"{how}: processes of the killed run still alive after {PROCESS_BUDGET:.0f} s: {times['left']}")
    assert times["unblocked"] is not None and times["unblocked"] <= unblock_budget, (
        f"{how}: target partitions still blocked (partition: (LSO, HW)) after {unblock_budget:.0f} s: "
        f"{times['blocked']}")


def expected() -> dict[int, list[bytes]]:
    return {k: [f"{k}-{n}".encode() for n in range(RECORDS)] for k in range(PARTITIONS)}


def kill_leftovers(mark: str) -> None:
    """Cleanup after a failed assertion: nothing of this test may outlive it."""
    for pid in run_processes(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def strike_inside_transactions(dag, admin, topic: str, mark: str) -> tuple[object, dict[str, object]]:
    """``dag.test()`` whose copy task times out while every slot holds its transaction: a watcher
    brings Airflow's own timeout alarm (SIGALRM, armed by its task runner for execution_timeout)
    forward to the moment every target partition has an open transaction, then measures (kill times
    in ``["times"]``). Returns the DAG run and what the watcher saw."""
    from tests.airflow_helpers import task_states

    # Measured from the moment the watcher fires Airflow's alarm, in a thread: dag.test() returns only
    # after the task failed. The operator is not touched: its on_kill is Airflow's to call.
    kill: dict[str, object] = {}
    watching = threading.Event()

    def strike_when_all_blocked():
        blocked: dict[int, tuple[int, int]] | str = {}
        while watching.is_set():
            try:
                blocked = blocked_partitions(admin, topic)
            except Exception as exc:  # noqa: BLE001 - the run has not created the target topic yet
                blocked = f"list offsets failed: {exc}"
            kill["last_seen"] = blocked
            if isinstance(blocked, dict) and len(blocked) == PARTITIONS:
                kill["blocked_before"] = blocked
                kill["at"] = started = time.monotonic()
                signal.setitimer(signal.ITIMER_REAL, 0.05)   # Airflow's timeout alarm, due now
                kill["times"] = measure_after_kill(started, mark, admin, topic)
                return
            time.sleep(0.5)

    watching.set()
    watcher = threading.Thread(target=strike_when_all_blocked, daemon=True)
    watcher.start()
    try:
        dr = dag.test()
        # execution_timeout (HOLD_SECONDS - 10) is only the fallback; the watcher must have struck.
        assert "at" in kill, (f"the slots never all held a transaction before execution_timeout; open "
                              f"transactions last seen (partition: (LSO, HW)): {kill.get('last_seen')}; "
                              f"task states: {task_states(dr)}")
        watcher.join(UNBLOCK_BUDGET + PROCESS_BUDGET + 5)
        assert "times" in kill, "the measurement after the strike did not end within its budgets"
    finally:
        watching.clear()
        kill_leftovers(mark)
    return dr, kill
