"""A slot dies with its run: in a Spark Python worker, a watchdog cuts the slot's lifeline when the JVM that asked
for the slot is gone (or SIGHUP, or a served run's lease ends), aborts the slot's open transaction with its own
producer and exits the worker. Why and how: docs/architecture.md, "How a slot dies with its run".
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

from eosmirror.slot import runlease

log = logging.getLogger(__name__)

POLL_SECONDS = 0.5     # how often the watchdog looks at the JVM
PARK_SECONDS = 1.0     # how long the watchdog waits for the slot's thread to park before aborting
ABORT_SECONDS = 5.0    # bound of the abort (retries included): with the backstop, a cut worker is gone within ~9 s
EXIT_CODE = 69         # EX_UNAVAILABLE: the run this worker served is gone

_lock = threading.Lock()
_copiers: "weakref.WeakSet[Any]" = weakref.WeakSet()   # slots of this process whose transaction to abort
_leases: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()   # served slot -> its lease's socket
_cut = threading.Event()        # set once, by the watchdog thread only (JVM gone, or SIGHUP seen)
# Set by the SIGHUP handler: a plain list item, because a signal handler must take no lock. It once
# called _cut.set(): a second SIGHUP arrived while the first handler was inside Event.set(), the
# handler blocked on the Event's own lock in the main thread, and the watchdog blocked on the same
# lock in _cut.wait() - a worker alive, its transaction open, long after its run was killed
# (stacks from the kill test under load, about 1 run in 8).
_sighup = [False]
_parked = threading.Event()     # a slot's thread reached check() after the cut: it produces nothing more
_state: dict[str, Any] = {"thread": None, "jvm": None}


@dataclass(frozen=True)
class Process:
    pid: int
    start: int      # start time in clock ticks since boot: tells a reused pid from the original
    name: str

    def alive(self) -> bool:
        now = _stat(self.pid)
        return now is not None and now[1] == self.start and now[2] not in ("Z", "X")


def _stat(pid: int) -> tuple[int, int, str, str] | None:
    """(parent pid, start time, state, command name) of a process, or None if it does not exist."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode(errors="replace")
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()   # the name may contain spaces and parentheses
        return int(fields[1]), int(fields[19]), fields[0], name
    except (OSError, ValueError, IndexError):
        # Gone, or a process being reaped whose stat reads short: either way it is not alive.
        return None


def process(pid: int) -> Process | None:
    """The live process ``pid`` (with its start time), or None."""
    info = _stat(pid)
    return Process(pid, info[1], info[3]) if info is not None else None


def jvm_ancestor(pid: int | None = None) -> Process | None:
    """The nearest ancestor of ``pid`` (default: this process) that is a JVM, or None."""
    current = os.getpid() if pid is None else pid
    for _ in range(64):   # a bound against a corrupt or cyclic view of /proc
        info = _stat(current)
        parent = _stat(info[0]) if info is not None and info[0] > 0 else None
        if info is None or parent is None:
            return None
        if parent[3] == "java" or os.path.basename(_exe(info[0])) == "java":
            return Process(info[0], parent[1], parent[3])
        current = info[0]
    return None


def _exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def in_spark_task() -> bool:
    """True inside a Spark Python worker running a task; False on the driver and without pyspark."""
    if "pyspark" not in sys.modules:   # a Spark worker imported it long before any slot starts
        return False
    from pyspark import TaskContext

    return TaskContext.get() is not None


def watch(copier: Any) -> None:
    """Called when a slot starts. In a Spark Python worker: arm the lifeline (once per process) and
    let it abort this copier's transaction when cut. Anywhere else: nothing.

    ``copier`` needs ``task``, ``producer`` (None once closed) and ``exactly_once``; it is held
    weakly. A served slot (``task.lease``) holds its run's lease first: RunLeaseError if it cannot,
    and the slot starts nothing."""
    if not in_spark_task():
        return
    lease = getattr(getattr(copier, "task", None), "lease", None)
    held = runlease.hold(lease) if lease else None
    with _lock:
        _copiers.add(copier)
        if held is not None:
            _leases[copier] = held
        # pyspark.daemon resets SIGHUP to its default action before every task of a reused worker.
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGHUP, _on_sighup)
        if _state["thread"] is None:
            _register_stack_dump()
            _state["jvm"] = jvm_ancestor()
            if _state["jvm"] is None:
                log.warning("lifeline: no JVM among the ancestors of Python worker %d; only SIGHUP from "
                            "pyspark.daemon will stop this slot when its run is killed", os.getpid())
            thread = threading.Thread(target=_watchdog, name="eosmirror-lifeline", daemon=True)
            _state["thread"] = thread
            thread.start()


STACK_DUMP_ENV = "EOSMIRROR_STACK_DUMP_DIR"


def _register_stack_dump() -> None:
    """With EOSMIRROR_STACK_DUMP_DIR set: SIGUSR2 writes every thread's Python stack to
    <dir>/worker-<pid>.stacks (faulthandler: works even when a thread holds the GIL). For a worker
    that outlives its run: `kill -USR2 <pid>` shows where each thread is (the kill tests do)."""
    folder = os.environ.get(STACK_DUMP_ENV)
    if not folder:
        return
    import faulthandler

    try:
        out = open(os.path.join(folder, f"worker-{os.getpid()}.stacks"), "w")  # noqa: SIM115 - lives with the process
        faulthandler.register(signal.SIGUSR2, file=out, all_threads=True)
        _state["stack_file"] = out
    except (OSError, RuntimeError, ValueError) as exc:
        log.warning("lifeline: no stack dump on SIGUSR2 (%s)", exc)


def _on_sighup(signum: int, frame: Any) -> None:
    _sighup[0] = True   # no lock, no call: the watchdog thread sees it within POLL_SECONDS and does the rest


def check() -> None:
    """Called by a slot's thread between units of work: once the lifeline is cut, never return
    (the watchdog aborts the transaction and ends the process; the backstop bounds the wait)."""
    if not _cut.is_set():
        return
    _parked.set()
    deadline = time.monotonic() + PARK_SECONDS + ABORT_SECONDS + 5
    while time.monotonic() < deadline:
        time.sleep(0.2)
    os._exit(EXIT_CODE)


def _watchdog() -> None:
    """Never returns. It takes no lock the main thread may hold (see _sighup), and an unexpected
    error does not end it quietly: the slot's thread may be blocked (a fault hold, librdkafka) and
    would then outlive its run with the transaction open; so it logs the error and looks again."""
    jvm: Process | None = _state["jvm"]
    reason = "the lifeline's watchdog failed"
    while True:
        try:
            if _sighup[0]:
                reason = "SIGHUP from pyspark.daemon (its JVM closed the daemon's stdin or stopped it)"
                break
            if jvm is not None and not jvm.alive():
                reason = f"the JVM that runs this worker's tasks ({jvm.name}, pid {jvm.pid}) is gone"
                break
            if _lease_lost():
                reason = "the run server revoked this run's lease (its client is gone, or the run or the server ended)"
                break
            time.sleep(POLL_SECONDS)
        except Exception:  # noqa: BLE001 - logged; looking again is the only safe reaction
            log.exception("lifeline: checking the JVM failed; checking again")
            time.sleep(POLL_SECONDS)
    _cut_lifeline(reason)


def release(copier: Any) -> None:
    """The slot ended (its result goes back next): its run's lease no longer concerns this worker,
    whose next slot may belong to another run."""
    with _lock:
        sock = _leases.pop(copier, None)
    if sock is not None:
        sock.close()


def _lease_lost() -> bool:
    """True once the run server closed the lease of a slot still running in this process."""
    with _lock:
        held = list(_leases.values())
    return any(runlease.lost(sock) for sock in held)


def _cut_lifeline(reason: str) -> None:
    """Abort the open transaction of every slot of this process, then end the process."""
    _cut.set()
    backstop = threading.Timer(PARK_SECONDS + ABORT_SECONDS + 3, os._exit, (EXIT_CODE,))
    backstop.daemon = True
    backstop.start()
    try:
        _parked.wait(PARK_SECONDS)   # the slot's thread stops producing before the abort purges
        deadline = time.monotonic() + ABORT_SECONDS
        with _lock:
            copiers = list(_copiers)
        outcomes = [_abort(c, deadline) for c in copiers]
        log.error("lifeline cut in Python worker %d: %s; the run is over: %s; exiting", os.getpid(), reason,
                  "; ".join(outcomes) or "no slot was running")
        for handler in logging.getLogger().handlers:
            handler.flush()
    except BaseException:  # noqa: BLE001 - nothing may keep this process alive
        pass
    finally:
        os._exit(EXIT_CODE)


def _abort(copier: Any, deadline: float) -> str:
    """Abort the copier's open transaction with its own producer; what happened, for the log."""
    slot = getattr(getattr(copier, "task", None), "slot", "?")
    producer = getattr(copier, "producer", None)
    if producer is None or not getattr(copier, "exactly_once", False):
        return f"slot {slot}: no transaction"
    while True:
        try:
            producer.abort_transaction(max(0.1, deadline - time.monotonic()))
            return f"slot {slot}: transaction aborted"
        except Exception as exc:  # noqa: BLE001 - classified below
            err = exc.args[0] if exc.args and hasattr(exc.args[0], "fatal") else None
            name = err.name() if err is not None else type(exc).__name__
            if name == "_STATE":
                return f"slot {slot}: no transaction open"
            if err is not None and err.fatal():
                # Fenced: the newer instance's init_transactions already ended our transaction.
                return f"slot {slot}: producer unusable ({name}: {err.str()}), nothing to abort with"
            if time.monotonic() >= deadline:
                return f"slot {slot}: abort gave up after {ABORT_SECONDS:.0f} s ({name})"
            time.sleep(0.2)   # another transactional call in progress (_CONFLICT), or retriable
