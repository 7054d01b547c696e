"""A killed run stops: its slot processes exit and the target is unblocked at once.

Every slot is held inside its first transaction (an EOSMIRROR_FAULTS sleep of HOLD_SECONDS after its
first records were produced), so the target partitions' last stable offset (LSO) is below their high
watermark (HW) when the run is killed. The mirror's transaction timeout (2 * 60 + 30 s) and the hold
are both far above the budgets below: only the slot aborting its own transaction (the lifeline,
eosmirror.slot.lifeline) or fencing (the Airflow task's on_kill) can unblock the target in time.

Which processes belong to a run: every process whose environment carries this test's RUN_MARK
(spark-submit passes its environment to the Python driver, pyspark.daemon and the Python workers;
the daemon puts the workers in a process group of their own, so they survive a killpg of the run).
Both measured times are printed (run pytest with -s to see them).

The lifeline alone, on a fake process tree without broker or Spark, is tested in
tests/unit/test_lifeline_tree.py.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from eosmirror.slot import lifeline
from eosmirror.spark import submit
from tests.helpers import create_topic, faults_env, mirror, mirrors_file, read_all, run, seed_sequence, values

pytestmark = pytest.mark.e2e

RUN_MARK = "EOSMIRROR_TEST_RUN_MARK"
HOLD_SECONDS = 150            # each slot sleeps this long inside its first transaction
MAX_TRANSACTION_SECONDS = 60  # -> transaction.timeout.ms = 150 s: the broker's own abort comes far too late
PROCESS_BUDGET = 15.0         # every process of the killed run gone within this many seconds
UNBLOCK_BUDGET = 30.0         # LSO = HW on every target partition within this many seconds
PARTITIONS = 2
RECORDS = 300


# --- what the test observes -------------------------------------------------------------------------

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


def hold_rules(tmp_path: Path) -> dict[str, str]:
    return faults_env(*({"point": "in_transaction", "action": "sleep", "seconds": HOLD_SECONDS, "slot": k,
                         "once": str(tmp_path / f"hold-{k}")} for k in range(PARTITIONS)))


def check_after_kill(proc, killed_at: float, mark: str, admin, topic: str, folder: Path, how: str,
                     unblock_budget: float = UNBLOCK_BUDGET) -> None:
    """After the SIGKILL: every process of the run gone and the target unblocked within the budgets
    (the stacks of a worker that outlived its run are added to the failure)."""
    proc.wait(10)
    times = measure_after_kill(killed_at, mark, admin, topic, unblock_budget)
    if times["no_process"] is None:   # where is each thread of a worker that outlived its run?
        times["left"] = f"{times['left']}\n{leftover_stacks(set(run_processes(mark)), folder)}"
    assert_within_budgets(times, how, unblock_budget)


def clean_up(mark: str, proc, log) -> None:
    """Nothing of this test may outlive it, whatever failed."""
    kill_leftovers(mark)
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)
    log.close()


def expected() -> dict[int, list[bytes]]:
    return {k: [f"{k}-{n}".encode() for n in range(RECORDS)] for k in range(PARTITIONS)}


def copy_everything_once(m, target_conf, topic: str) -> None:
    """A run after the kill copies every record exactly once: the killed slots committed nothing."""
    report = run(m)
    assert report["status"] == "ok", report
    assert {k: values(read_all(target_conf, topic, k)) for k in range(PARTITIONS)} == expected()


def leftover_stacks(pids, folder: Path) -> str:
    """Every Python thread's stack of the leftover workers (SIGUSR2 -> the lifeline's faulthandler)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGUSR2)
        except ProcessLookupError:
            pass
    time.sleep(1)
    return "\n".join(f"--- stacks of {path.name}\n{path.read_text()[-6000:]}"
                     for path in sorted(folder.glob("worker-*.stacks"))
                     if int(path.stem.split("-")[1]) in pids and path.read_text())


def on_kill_span(logged: list[str]) -> float | None:
    """Seconds between the first and last timestamped "on_kill:" line of the task log (None if none)."""
    stamps = [dt.datetime.fromisoformat(line.split()[0].replace("Z", "+00:00")) for line in logged
              if line[:4].isdigit()]
    return round((max(stamps) - min(stamps)).total_seconds(), 2) if stamps else None


def kill_leftovers(mark: str) -> None:
    """Cleanup after a failed assertion: nothing of this test may outlive it."""
    for pid in run_processes(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# --- spark-submit killed -------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["spark-submit", "process-group"])
def test_sigkill_of_spark_submit_stops_every_slot_and_unblocks_the_target(
        source_conf, target_conf, unique, tmp_path, target):
    from confluent_kafka.admin import AdminClient

    topic = create_topic(source_conf, unique("kill"), partitions=PARTITIONS)
    seed_sequence(source_conf, topic, PARTITIONS, RECORDS)
    m = mirror(unique("m"), [topic], slots=PARTITIONS, max_transaction_seconds=MAX_TRANSACTION_SECONDS)
    config_file = mirrors_file(tmp_path / "mirrors.yaml", [{
        "name": m.name, "source": {"local": "source"}, "target": {"local": "target"}, "topics": list(m.topics),
        "slots": PARTITIONS, "max_transaction_seconds": MAX_TRANSACTION_SECONDS}])
    mark = uuid.uuid4().hex
    cmd = submit.command("local[2]", submit.job_arguments(m.name, config_path=str(config_file)),
                         submit.spark_conf({"spark.ui.enabled": "false"}, f"test-{m.name}"))
    env = {**submit.process_env(), **hold_rules(tmp_path), RUN_MARK: mark, lifeline.STACK_DUMP_ENV: str(tmp_path)}
    log = open(tmp_path / "spark.log", "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    admin = AdminClient(target_conf)
    try:
        wait_all_blocked(admin, topic, 180, lambda: proc.poll() is None)
        before = run_processes(mark)
        workers = [c for c in before.values() if "pyspark" in c]
        assert workers, f"no Python worker found among the run's processes: {before}"
        killed_at = time.monotonic()
        if target == "spark-submit":
            os.kill(proc.pid, signal.SIGKILL)
        else:
            os.killpg(proc.pid, signal.SIGKILL)
        check_after_kill(proc, killed_at, mark, admin, topic, tmp_path,
                         f"SIGKILL of the {target} ({len(before)} processes, {len(workers)} pyspark)")
    finally:
        clean_up(mark, proc, log)
    copy_everything_once(m, target_conf, topic)


# --- a follow run killed while it follows ------------------------------------------------------------------

FOLLOW_TRANSACTION_SECONDS = 1.0   # -> transaction.timeout.ms = 32 s: far above FOLLOW_UNBLOCK_BUDGET
FOLLOW_UNBLOCK_BUDGET = 10.0


def test_sigkill_of_a_following_spark_run_stops_every_slot_and_unblocks_the_target(
        source_conf, target_conf, unique, tmp_path):
    """The run starts on an empty topic, so whatever it copies it copies while following; the
    records are produced once every slot has committed a follow round, and each slot is then held
    inside the follow round's transaction that copies them, and the run is SIGKILLed."""
    from confluent_kafka.admin import AdminClient

    from tests.helpers import progress_of

    topic = create_topic(source_conf, unique("fkill"), partitions=PARTITIONS)
    m = mirror(unique("m"), [topic], slots=PARTITIONS, follow=True, follow_max_seconds=300,
               max_transaction_seconds=FOLLOW_TRANSACTION_SECONDS)
    config_file = mirrors_file(tmp_path / "mirrors.yaml", [{
        "name": m.name, "source": {"local": "source"}, "target": {"local": "target"}, "topics": list(m.topics),
        "slots": PARTITIONS, "follow": True, "follow_max_seconds": 300,
        "max_transaction_seconds": FOLLOW_TRANSACTION_SECONDS}])
    mark = uuid.uuid4().hex
    follow_until = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=240)).isoformat()
    cmd = submit.command("local[2]", submit.job_arguments(m.name, config_path=str(config_file),
                                                          follow_until=follow_until),
                         submit.spark_conf({"spark.ui.enabled": "false"}, f"test-{m.name}"))
    env = {**submit.process_env(), **hold_rules(tmp_path), RUN_MARK: mark, lifeline.STACK_DUMP_ENV: str(tmp_path)}
    log = open(tmp_path / "spark.log", "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    admin = AdminClient(target_conf)
    try:
        deadline, seen = time.monotonic() + 150, {}
        while time.monotonic() < deadline:   # every slot has committed a (progress-only) follow round
            assert proc.poll() is None, f"the follow run ended early (exit {proc.returncode}): see {log.name}"
            try:
                seen = progress_of(target_conf, m, topic, PARTITIONS)
            except Exception as exc:  # noqa: BLE001 - the progress group does not exist yet
                seen = {"error": str(exc)}
            if all(seen.get(p) is not None for p in range(PARTITIONS)):
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"the run did not follow within 150 s; progress seen: {seen}")
        seed_sequence(source_conf, topic, PARTITIONS, RECORDS)
        wait_all_blocked(admin, topic, 60, lambda: proc.poll() is None)
        killed_at = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL)
        check_after_kill(proc, killed_at, mark, admin, topic, tmp_path, "SIGKILL of a following spark-submit",
                         FOLLOW_UNBLOCK_BUDGET)
    finally:
        clean_up(mark, proc, log)
    copy_everything_once(m, target_conf, topic)


# --- the Airflow copy task killed ------------------------------------------------------------------------

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


def test_airflow_copy_task_killed_on_timeout_stops_spark_and_fences(
        source_conf, target_conf, unique, tmp_path, monkeypatch, capfd, caplog):
    """dag.test() runs the copy task in this process with an execution_timeout: when it strikes,
    Airflow's task runner raises AirflowTaskTimeout in execute and calls the operator's on_kill, the
    same on_kill that the supervisor's SIGTERM (task marked failed or cleared) calls. The slots' held
    transactions begin once Spark is up (10-30 s on a quiet machine, over 75 s at load 30) and last
    HOLD_SECONDS. So that the timeout strikes inside them whatever the load, a watcher brings
    Airflow's own timeout alarm (SIGALRM, armed by its task runner for execution_timeout) forward
    to the moment every target partition has an open transaction; execution_timeout itself (140 s)
    is only the fallback, still inside HOLD_SECONDS. The test checks that it struck there."""
    from confluent_kafka.admin import AdminClient

    from tests.airflow_helpers import dagbag, task_log_text, task_states

    caplog.set_level("INFO")

    topic = create_topic(source_conf, unique("akill"), partitions=PARTITIONS)
    seed_sequence(source_conf, topic, PARTITIONS, RECORDS)
    name = unique("m")
    mirrors_file(tmp_path / "mirrors.yaml", [{
        "name": name, "source": {"local": "source"}, "target": {"local": "target"}, "topics": [topic],
        "slots": PARTITIONS, "max_transaction_seconds": MAX_TRANSACTION_SECONDS,
        "airflow": {"schedule": None, "retries": 0}}])
    monkeypatch.setenv("EOSMIRROR_CONFIG", str(tmp_path / "mirrors.yaml"))
    mark = uuid.uuid4().hex
    for key, value in {**hold_rules(tmp_path), RUN_MARK: mark}.items():
        monkeypatch.setenv(key, value)   # spark-submit inherits this process's environment
    admin = AdminClient(target_conf)
    dag = dagbag().get_dag(f"eosmirror__{name}")
    dag.get_task("copy").execution_timeout = dt.timedelta(seconds=HOLD_SECONDS - 10)

    dr, kill = strike_inside_transactions(dag, admin, topic, mark)
    task_logs = task_log_text(capfd, caplog)   # read before printing the times
    states = task_states(dr)
    assert str(dr.state) == "failed" and states["copy"] == "failed" and states["publish"] != "success", states
    logged = [line for line in task_logs.splitlines() if "on_kill:" in line]
    print(f"\n[Airflow on_kill] on_kill's log lines span {on_kill_span(logged)} s; the alarm struck "
          f"with every slot inside its transaction: {kill['blocked_before']}")
    assert_within_budgets(kill["times"], "Airflow copy task timed out")
    assert any("Spark application stopped" in line for line in logged), logged or task_logs[-3000:]
    assert any(f"fenced eosmirror.{name}.planner" in line for line in logged), logged
    assert "are unblocked (last stable offset = high watermark)" in task_logs, logged
    m = mirror(name, [topic], slots=PARTITIONS, max_transaction_seconds=MAX_TRANSACTION_SECONDS)
    monkeypatch.delenv("EOSMIRROR_FAULTS")
    copy_everything_once(m, target_conf, topic)
