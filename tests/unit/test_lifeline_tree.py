"""The slot's lifeline on a fake process tree: no broker, no Spark, real processes and signals.

A Python started through a symlink named `java` stands for the JVM, a second one for pyspark.daemon,
a third for the Spark worker running a slot; its producer only records abort_transaction, because
what is tested is the lifeline's reaction to its parents dying, not Kafka (tests/e2e/test_kill.py
kills real spark-submit runs against real brokers)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

# --- the lifeline on a fake process tree (no broker, no Spark: fast) --------------------------------------
# "java" (a Python started through a symlink named java, so its command name is java, like a JVM)
#   -> "daemon" (waits for the worker and records how it ended, like pyspark.daemon forks workers)
#     -> "worker" (a slot: lifeline.watch() with a producer that records abort_transaction, then a copy
#        loop calling lifeline.check() for WORK_SECONDS; writes "finished" if it gets to the end)

WORK_SECONDS = 6.0

JVM = """import subprocess, sys, time
subprocess.Popen(sys.argv[1:])
time.sleep(600)
"""
DAEMON = """import subprocess, sys
worker = subprocess.Popen([sys.executable, *sys.argv[2:]])
open(sys.argv[1], "w").write(str(worker.wait()))
"""
WORKER = """import os, sys, time
from eosmirror.slot import lifeline
out = sys.argv[1]
lifeline.in_spark_task = lambda: True   # what a pyspark TaskContext says in a real worker

class Producer:
    def abort_transaction(self, timeout):
        open(os.path.join(out, "aborted"), "w").write(str(time.time()))

class Copier:
    producer, exactly_once = Producer(), True

copier = Copier()   # the lifeline holds slots weakly: a running slot is referenced by its own frame
lifeline.watch(copier)
open(os.path.join(out, "worker.pid"), "w").write(str(os.getpid()))
deadline = time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    lifeline.check()
    time.sleep(0.05)
open(os.path.join(out, "finished"), "w").write("yes")
"""


@pytest.fixture
def fake_tree(tmp_path):
    """Starts java -> daemon -> worker; yields (java process, path); kills what is left at the end."""
    import sys

    for name, text in (("jvm.py", JVM), ("daemon.py", DAEMON), ("worker.py", WORKER)):
        (tmp_path / name).write_text(text)
    (tmp_path / "java").symlink_to(sys.executable)
    java = subprocess.Popen([str(tmp_path / "java"), str(tmp_path / "jvm.py"), sys.executable,
                             str(tmp_path / "daemon.py"), str(tmp_path / "exit"), str(tmp_path / "worker.py"),
                             str(tmp_path), str(WORK_SECONDS)], start_new_session=True)
    # The pid file exists from the worker's open() on, before its write: wait for the pid, not the file
    # (a read in between found '' once, under a four-worker make test).
    deadline = time.monotonic() + 20
    while not (tmp_path / "worker.pid").exists() or not (tmp_path / "worker.pid").read_text():
        assert time.monotonic() < deadline and java.poll() is None, "the fake worker did not start within 20 s"
        time.sleep(0.05)
    yield java, tmp_path
    for pid in (java.pid, int((tmp_path / "worker.pid").read_text())):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    java.wait(10)


def wait_for_file(path: Path, budget: float) -> float | None:
    """Seconds until ``path`` exists, or None after ``budget`` seconds."""
    started = time.monotonic()
    while time.monotonic() - started < budget:
        if path.exists() and path.read_text():
            return round(time.monotonic() - started, 2)
        time.sleep(0.02)
    return None


def test_lifeline_aborts_and_exits_when_the_jvm_dies(fake_tree):
    java, out = fake_tree
    from eosmirror.slot import lifeline

    os.kill(java.pid, signal.SIGKILL)   # nothing signals the worker: only the lifeline's polling sees it
    # The worker's own exit code and the missing "finished" tell a cut from a task that ran to its end;
    # the budget only bounds a worker that never ends.
    seconds = wait_for_file(out / "exit", WORK_SECONDS + 10)
    assert seconds is not None, f"the worker did not end within {WORK_SECONDS + 10:.0f} s"
    assert (out / "exit").read_text() == str(lifeline.EXIT_CODE) and (out / "aborted").exists()
    assert not (out / "finished").exists()
    # No timed bound (a loaded machine is slower, not wrong): the order is the outcome. The daemon writes
    # "exit" only once the worker has ended, so the "aborted" found above was written before the exit,
    # and "finished" missing means the copy loop never reached its end: cut short by the lifeline.
    print(f"\n[fake JVM SIGKILLed] worker aborted and exited after {seconds} s")


def test_lifeline_turns_sighup_into_abort_and_exit(fake_tree):
    java, out = fake_tree
    from eosmirror.slot import lifeline

    os.kill(int((out / "worker.pid").read_text()), signal.SIGHUP)   # what pyspark.daemon sends at shutdown
    assert wait_for_file(out / "exit", WORK_SECONDS + 10) is not None, "the worker never ended"
    assert (out / "exit").read_text() == str(lifeline.EXIT_CODE), "died of SIGHUP without aborting"
    assert not (out / "finished").exists(), "the SIGHUP did not cut the copy loop short"
    assert (out / "aborted").exists() and java.poll() is None


def test_lifeline_is_not_cut_when_only_the_daemon_dies_or_nothing_happens(fake_tree):
    """No false alarm: a worker whose daemon dies still talks to its JVM, so its task goes on."""
    java, out = fake_tree
    daemon = [p for p in Path(f"/proc/{java.pid}/task/{java.pid}/children").read_text().split()]
    assert len(daemon) == 1, daemon
    os.kill(int(daemon[0]), signal.SIGKILL)
    assert wait_for_file(out / "finished", WORK_SECONDS + 10) is not None
    assert not (out / "aborted").exists() and java.poll() is None


def test_lifeline_is_inert_outside_a_spark_worker():
    """On the driver (run_in_process: slots are threads of the driver) watch() arms nothing."""
    from eosmirror.slot import lifeline

    lifeline.watch(object())
    assert not [t for t in threading.enumerate() if t.name == "eosmirror-lifeline"]
    lifeline.check()   # returns at once


# --- the watchdog itself, in process -----------------------------------------------------------------------

def test_an_unreadable_or_short_proc_stat_counts_as_gone(monkeypatch):
    """A process being reaped can give a short /proc/<pid>/stat; that must read as "not alive",
    never raise inside the watchdog."""
    import io

    from eosmirror.slot import lifeline

    me = lifeline._stat(os.getpid())
    assert me is not None and lifeline.Process(os.getpid(), me[1], me[3]).alive()
    for text in (b"", b"1234 (java", b"1234 (java) S"):
        monkeypatch.setattr(lifeline, "open", lambda *a, _t=text, **k: io.BytesIO(_t), raising=False)
        assert lifeline._stat(os.getpid()) is None, text
        assert not lifeline.Process(os.getpid(), me[1], me[3]).alive()


def test_the_watchdog_outlives_an_error_and_still_cuts_when_the_jvm_dies(monkeypatch):
    from eosmirror.slot import lifeline

    class FlakyJvm:
        name, pid, calls = "java", 4242, 0

        def alive(self):
            self.calls += 1
            if self.calls == 1:
                raise RuntimeError("unexpected /proc content")
            return self.calls < 3          # alive once more, then gone

    cut: list[str] = []
    monkeypatch.setattr(lifeline, "_cut", threading.Event())
    monkeypatch.setattr(lifeline, "POLL_SECONDS", 0.01)
    monkeypatch.setattr(lifeline, "_cut_lifeline", cut.append)
    monkeypatch.setitem(lifeline._state, "jvm", FlakyJvm())
    thread = threading.Thread(target=lifeline._watchdog, daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "the watchdog did not cut the lifeline within 5 s of the JVM's death"
    assert cut == ["the JVM that runs this worker's tasks (java, pid 4242) is gone"]


def test_sigusr2_dumps_every_threads_stack_when_asked(tmp_path):
    """The kill tests' view into a worker that outlives its run: EOSMIRROR_STACK_DUMP_DIR + SIGUSR2."""
    code = ("import os, signal, threading, time\n"
            "from eosmirror.slot import lifeline\n"
            "lifeline._register_stack_dump()\n"
            "threading.Thread(target=time.sleep, args=(30,), name='sleeper', daemon=True).start()\n"
            "os.kill(os.getpid(), signal.SIGUSR2)\n"
            "import glob, sys\n"      # the dump is written by the signal's handler: the file has it, or fail
            "pattern = os.path.join(os.environ['EOSMIRROR_STACK_DUMP_DIR'], 'worker-*.stacks')\n"
            "deadline = time.monotonic() + 10\n"
            "while not any(os.path.getsize(p) for p in glob.glob(pattern)):\n"
            "    if time.monotonic() > deadline: sys.exit('no stack dump within 10 s')\n"
            "    time.sleep(0.01)\n")
    env = {**os.environ, "EOSMIRROR_STACK_DUMP_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    (dump,) = tmp_path.glob("worker-*.stacks")
    text = dump.read_text()
    assert "Thread 0x" in text and "Current thread 0x" in text and "<string>" in text, text


def test_a_sighup_inside_a_sighup_handler_neither_deadlocks_nor_is_lost():
    """Stacks of a leftover worker: a second SIGHUP came while the first handler was inside
    Event.set(); the handler then waited forever on the Event's lock, and so did the watchdog. The
    handler now takes no lock; this runs it with that lock held, in a child with a time limit."""
    code = ("from eosmirror.slot import lifeline\n"
            "with lifeline._cut._cond:          # what the interrupted first handler held\n"
            "    lifeline._on_sighup(1, None)\n"
            "print('returned', lifeline._sighup[0])\n")
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("the SIGHUP handler deadlocked on a lock its own thread held")
    assert done.returncode == 0 and done.stdout.strip() == "returned True", done.stderr


def test_the_watchdog_turns_a_recorded_sighup_into_a_cut(monkeypatch):
    from eosmirror.slot import lifeline

    cut: list[str] = []
    monkeypatch.setattr(lifeline, "POLL_SECONDS", 0.01)
    monkeypatch.setattr(lifeline, "_cut_lifeline", cut.append)
    monkeypatch.setattr(lifeline, "_sighup", [False])
    monkeypatch.setitem(lifeline._state, "jvm", None)
    looks: list[float] = []
    monkeypatch.setattr(lifeline, "_lease_lost", lambda: looks.append(time.monotonic()) or False)   # one per look
    thread = threading.Thread(target=lifeline._watchdog, daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while len(looks) < 10:
        assert time.monotonic() < deadline and thread.is_alive(), f"the watchdog looked {len(looks)} times in 5 s"
        time.sleep(0.01)   # the poll interval of this bounded wait
    assert cut == [] and thread.is_alive()          # ten looks, nothing happened: no cut
    lifeline._on_sighup(1, None)
    thread.join(5)
    assert not thread.is_alive() and cut and cut[0].startswith("SIGHUP from pyspark.daemon"), cut
