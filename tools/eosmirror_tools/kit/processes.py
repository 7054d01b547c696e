"""Processes the suites start, measure and kill (Linux /proc): the peak memory and the CPU time of a
process tree, a measured child in a session of its own, and the fault injector's find/signal/reap.

Every measured program (spark-submit, MirrorMaker 2, ProducerPerformance, the raw loop) runs in a
session of its own, so that stopping it reaches every process it started (Spark's Python workers,
the JVM behind a launcher script) and nothing else. ``ChildProcess`` always stops its session on
the way out, also when the bench fails or is interrupted: SIGTERM first, SIGKILL after a grace time.

RSS is sampled from /proc/<pid>/status (VmRSS) for the whole tree every 0.2 s; the peak of the sum
is kept, and the peak per role (JVM, Python driver, Python workers). The sum of RSS counts pages
that forked Python workers share with their parent twice, so it is an upper bound.

CPU time (the cost side of "throughput and cost") is each process's own user+system time at its
last sample, summed over the tree; a process that lives less than one sampling interval is
missed, so it is a slight lower bound. ``CpuWindow`` adds what the whole machine and the two
brokers spent in the same time, so that background work by others is visible next to a result.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

SAMPLE_SECONDS = 0.2

# (substring of the command line, role); the first match wins.
ROLES = (
    ("org.apache.spark.deploy.SparkSubmit", "spark JVM"),
    ("org.apache.spark.launcher.Main", "spark launcher"),
    ("bin/spark-submit", "spark launcher"),    # the shell scripts in front of the JVM
    ("bin/spark-class", "spark launcher"),
    ("org.apache.kafka.connect.mirror.MirrorMaker", "MirrorMaker 2 JVM"),
    ("org.apache.kafka.tools.ProducerPerformance", "ProducerPerformance JVM"),
    ("pyspark.daemon", "python workers"),
    ("pyspark.worker", "python workers"),
    ("spark/job.py", "python driver"),
    ("eosmirror.cli", "eosmirror CLI"),
    ("eosmirror_tools.bench.rawloop", "raw loop"),
    # Airflow's processes (their titles, set by Airflow) for the soak's peak RSS per component.
    ("airflow supervisor:", "airflow task supervisors"),
    ("LocalExecutor", "airflow executor workers"),      # "airflow worker -- LocalExecutor: <idle>"
    ("airflow worker --", "airflow task runners"),
    ("airflow api_server", "airflow API server"),
    ("api-server", "airflow API server"),
    ("dag-processor", "airflow DAG processor"),
    ("triggerer", "airflow triggerer"),
    ("scheduler", "airflow scheduler"),
    ("airflow standalone", "airflow standalone"),
)


def role_of(cmdline: str) -> str:
    for marker, role in ROLES:
        if marker in cmdline:
            return role
    return "other"


def _read(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def _parent_map() -> dict[int, int]:
    """{pid: parent pid} of every process (this kernel has no /proc/<pid>/task/<tid>/children)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _read(f"/proc/{entry}/stat")
        # The command name (field 2) may contain spaces and ')': split after its last ')'.
        tail = stat.rpartition(")")[2].split()
        if len(tail) >= 2:
            parents[int(entry)] = int(tail[1])
    return parents


def process_tree(root: int) -> list[int]:
    """``root`` first, then every process under it (depth first)."""
    parents = _parent_map()
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in parents or pid == root:
            tree.append(pid)
            todo.extend(children.get(pid, ()))
    return tree


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid: int) -> int:
    """user + system time of the process itself (not of its reaped children), in clock ticks."""
    fields = _read(f"/proc/{pid}/stat").rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12]) if len(fields) > 12 else 0


def machine_busy_ticks() -> int:
    """Non-idle CPU time of the whole machine since boot (all CPUs), from /proc/stat."""
    values = [int(v) for v in _read("/proc/stat").splitlines()[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)   # idle + iowait
    return sum(values[:8]) - idle                               # guest time is already in user


class CpuWindow:
    """CPU seconds the machine and the given processes (the brokers) spent between start and stop."""

    def __init__(self, pids: list[int]):
        self.pids = pids
        self._machine = machine_busy_ticks()
        self._pids = {pid: cpu_ticks(pid) for pid in pids}
        self._self = time.process_time()
        self.machine_seconds = self.pids_seconds = self.bench_seconds = 0.0

    def stop(self) -> "CpuWindow":
        self.machine_seconds = (machine_busy_ticks() - self._machine) / CLOCK_TICKS
        # A process that is gone reads as 0 ticks: never count it negative.
        self.pids_seconds = sum(max(cpu_ticks(pid) - before, 0) for pid, before in self._pids.items()) / CLOCK_TICKS
        self.bench_seconds = time.process_time() - self._self
        return self


def rss_kb(pid: int) -> int:
    for line in _read(f"/proc/{pid}/status").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0   # gone, or a zombie (no VmRSS line)


@dataclass
class TreeUsage:
    """What a process tree used: peak RSS (sum, and per role) and CPU seconds."""

    total_mb: float = 0.0
    by_role_mb: dict[str, float] = field(default_factory=dict)
    samples: int = 0
    cpu_seconds: float = 0.0                       # the tree's own CPU time (see the module doc)
    cpu_by_role_seconds: dict[str, float] = field(default_factory=dict)
    largest_by_role_mb: dict[str, float] = field(default_factory=dict)   # the largest single process per role

    def as_dict(self) -> dict[str, Any]:
        return {"total_mb": round(self.total_mb, 1), "samples": self.samples,
                "by_role_mb": {k: round(v, 1) for k, v in sorted(self.by_role_mb.items())},
                "largest_by_role_mb": {k: round(v, 1) for k, v in sorted(self.largest_by_role_mb.items())}}


class TreeSampler:
    """Samples RSS and CPU time of one process tree in a daemon thread until ``stop()``."""

    def __init__(self, root_pid: int, interval: float = SAMPLE_SECONDS):
        self.root, self.interval = root_pid, interval
        self.peak = TreeUsage()
        self._roles: dict[int, str] = {}
        self._ticks: dict[int, int] = {}   # last CPU ticks seen per pid (kept after the pid exits)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"rss-{root_pid}", daemon=True)

    def start(self) -> "TreeSampler":
        self._thread.start()
        return self

    def sample(self) -> None:
        total, roles = 0, {}
        for pid in process_tree(self.root):
            kb = rss_kb(pid)
            if not kb:
                continue
            # Read every time: a pid changes role when it execs (the CLI's fork becomes spark-submit,
            # the launcher script becomes the JVM). Right after a fork the cmdline can be empty:
            # then the pid keeps the role it had.
            cmdline = _read(f"/proc/{pid}/cmdline").replace("\0", " ")
            role = role_of(cmdline) if cmdline.strip() else self._roles.get(pid, "other")
            self._roles[pid] = role
            total += kb
            roles[role] = roles.get(role, 0) + kb
            self.peak.largest_by_role_mb[role] = max(self.peak.largest_by_role_mb.get(role, 0.0), kb / 1024)
            self._ticks[pid] = max(self._ticks.get(pid, 0), cpu_ticks(pid))
        peak = self.peak
        peak.samples += 1
        peak.total_mb = max(peak.total_mb, total / 1024)
        for role, kb in roles.items():
            peak.by_role_mb[role] = max(peak.by_role_mb.get(role, 0.0), kb / 1024)
        peak.cpu_seconds = sum(self._ticks.values()) / CLOCK_TICKS
        by_role: dict[str, float] = {}
        for pid, ticks in self._ticks.items():
            role = self._roles.get(pid, "other")
            by_role[role] = by_role.get(role, 0.0) + ticks / CLOCK_TICKS
        peak.cpu_by_role_seconds = by_role

    def _loop(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            self.sample()
            # Faster in the first seconds: short-lived programs (the raw loop at small N) would
            # otherwise be seen only while the interpreter starts.
            self._stop.wait(self.interval if time.monotonic() - started > 2 else self.interval / 4)

    def stop(self) -> TreeUsage:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.peak


@dataclass
class ChildRun:
    """What a benchmark child process left: its exit code, its result JSON, and its measured costs."""

    exit_code: int
    result: dict[str, Any]
    wall_seconds: float
    peak: Any
    cpu: dict[str, Any]


class ChildProcess:
    """A measured program: own session, output to a log file, RSS sampled, always stopped on exit.

    ``with ChildProcess(cmd, log) as child: child.wait(timeout)``; leaving the block stops the whole
    session (SIGTERM, then SIGKILL after ``grace`` seconds) if anything of it still runs.
    """

    def __init__(self, cmd: list[str], log_path: Path, env: dict[str, str] | None = None,
                 cwd: Path | None = None, grace: float = 20.0,
                 brokers: Callable[[], list[int]] = lambda: []):
        # ``brokers``: the local brokers' pids (cluster.broker_pids), whose CPU the measurement counts apart
        self.cmd, self.log_path, self.env, self.cwd, self.grace = cmd, log_path, env, cwd, grace
        self.brokers = brokers
        self.proc: subprocess.Popen | None = None
        self.sampler: TreeSampler | None = None
        self.started = self.ended = 0.0
        self.peak = TreeUsage()
        self.window: CpuWindow | None = None
        self.brokers_restarted = False

    def __enter__(self) -> "ChildProcess":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as out:
            self.started = time.monotonic()
            self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=self.env, cwd=self.cwd, start_new_session=True)
        self.sampler = TreeSampler(self.proc.pid).start()
        self.window = CpuWindow(self.brokers())
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait(self, timeout: float) -> int:
        """Exit code; raises TimeoutError (the session is stopped on leaving the block)."""
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"{Path(self.cmd[0]).name} did not finish within {timeout:.0f} s; "
                               f"see {self.log_path}") from None
        self.ended = time.monotonic()
        return code

    @property
    def seconds(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    def stop(self) -> None:
        """SIGTERM to the session, SIGKILL after the grace time; only ever our own session."""
        if self.proc is None:
            return
        pgid = self.proc.pid   # start_new_session: the session and group id is the child's pid
        if self._group_alive(pgid):
            self._signal(pgid, signal.SIGTERM)
            deadline = time.monotonic() + self.grace
            while time.monotonic() < deadline and self._group_alive(pgid):
                self.proc.poll()
                time.sleep(0.1)
            if self._group_alive(pgid):
                self._signal(pgid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        if not self.ended:
            self.ended = time.monotonic()

    def _group_alive(self, pgid: int) -> bool:
        # Our direct child may be gone while its workers still run: ask for the group.
        if self.proc is not None:
            self.proc.poll()   # reap the child so that a finished one does not count as alive
        try:
            os.killpg(pgid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    @staticmethod
    def _signal(pgid: int, sig: int) -> None:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass

    def __exit__(self, *exc: Any) -> None:
        try:
            self.stop()
        finally:
            if self.sampler is not None:
                self.peak = self.sampler.stop()
            if self.window is not None:
                self.window.stop()
                # Someone else restarted a broker meanwhile (the clusters are shared): the copy may
                # still be right, but its timing is not a measurement of this configuration.
                self.brokers_restarted = sorted(self.brokers()) != sorted(self.window.pids)

    def cpu(self) -> dict[str, Any]:
        """CPU seconds during this program's life: its own tree, the brokers, the bench, the machine;
        "other" is what the rest of the machine (someone else's work) spent meanwhile."""
        w = self.window
        if w is None:
            return {}
        other = w.machine_seconds - self.peak.cpu_seconds - w.pids_seconds - w.bench_seconds
        return {"program_seconds": round(self.peak.cpu_seconds, 2),
                "program_by_role_seconds": {k: round(v, 2) for k, v in sorted(self.peak.cpu_by_role_seconds.items())},
                "brokers_seconds": round(w.pids_seconds, 2), "bench_seconds": round(w.bench_seconds, 2),
                "machine_busy_seconds": round(w.machine_seconds, 2), "other_seconds": round(max(other, 0.0), 2),
                "wall_seconds": round(self.seconds, 2), "brokers_restarted": self.brokers_restarted}

    def log_tail(self, lines: int = 25) -> str:
        text = self.log_path.read_text(errors="replace").splitlines() if self.log_path.exists() else []
        return "\n".join(text[-lines:])


# --- fault injection: find, signal and reap what a run started -----------------------------------------------


def cmdline(pid: int) -> str:
    return _read(f"/proc/{pid}/cmdline").replace("\0", " ")


def descendants(root: int) -> list[int]:
    """Every process under ``root`` (not ``root`` itself)."""
    return process_tree(root)[1:]


def alive(pid: int) -> bool:
    """Running, and not a zombie (state Z, after the command name's last ')')."""
    state = _read(f"/proc/{pid}/stat").rpartition(")")[2].split()[:1]
    return state not in ([], ["Z"])


def python_workers(root: int) -> list[int]:
    """Spark's Python worker processes under a spark-submit process (not the Python driver)."""
    return [p for p in descendants(root) if "pyspark" in cmdline(p) and ("daemon" in cmdline(p) or "worker" in cmdline(p))
            and "spark/job.py" not in cmdline(p)]


def signal_all(pids: list[int], sig: int) -> int:
    sent = 0
    for pid in pids:
        try:
            os.kill(pid, sig)
            sent += 1
        except ProcessLookupError:
            pass
    return sent


def kill_tree(root: int, grace: float = 10.0) -> None:
    """SIGTERM a process and everything under it, then SIGKILL what is left."""
    tree = [root, *descendants(root)]
    signal_all(tree, signal.SIGCONT)
    signal_all(tree, signal.SIGTERM)
    deadline = time.time() + grace
    while time.time() < deadline and any(alive(p) for p in tree):
        time.sleep(0.2)
    signal_all([p for p in tree if alive(p)], signal.SIGKILL)


def stop_own(pid: int, still_ours: Callable[[], bool], timeout: float, hard: bool = False) -> bool:
    """Stop a process this kit started and recorded (a broker, a proxy): SIGTERM (SIGKILL when ``hard``),
    SIGKILL once ``timeout`` passed; reaped when it is our child (else it lingers as a zombie). ``still_ours``
    says whether it still runs (its pid file and command line). True when it ignored SIGTERM."""
    os.kill(pid, signal.SIGKILL if hard else signal.SIGTERM)
    deadline = time.monotonic() + timeout
    killed = False
    while still_ours():
        if not killed and time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            killed = True
        time.sleep(0.05)
    try:
        # Its command line is empty once it exits: a child of ours is then a zombie, or about to be one.
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass   # not our child: its own parent reaps it
    return killed
