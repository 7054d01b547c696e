"""The run server: one long-lived Spark application that runs mirror runs for ``eosmirror run --server``,
so a run does not pay Spark's start-up (docs/run-server.md: the commands, the costs, how a run ends).

What holds: a run is a thread of this server through the same ``job.execute`` as a spark-submit run (Spark job
groups are per thread, so runs of different mirrors share the context); only this user reaches the socket
(0600 under $EOSMIRROR_HOME/run) and no secret crosses it (connections are resolved here, or read from the
0600 file the client names); a run dies with its client (a lease bound to the client's pid and start time,
leases.py, which each slot holds; slot/lifeline.py ends the slot when it closes); a client of other code
(``fingerprint``) is refused with exit 2. The worker daemon (``serverdaemon``) imports the slot code before it
forks, so a worker Spark forks anew starts warm.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import os
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

from eosmirror import paths
from eosmirror.core import steptimes
from eosmirror.core.errors import EXIT_CONFIG
from eosmirror.core.logformat import LOG_FORMAT
from eosmirror.core.runreport import SlotResult, SlotStatus
from eosmirror.kafka import connections
from eosmirror.slot import lifeline
from eosmirror.spark.leases import LeaseServer

log = logging.getLogger("eosmirror.spark.server")

DEFAULT_MASTER = "local[16]"   # task slots, not cores: a following slot holds one for its whole run
DEFAULT_WORKERS = 4
DAEMON_MODULE = "eosmirror.spark.serverdaemon"
SOCKET_PATH_LIMIT = 100        # sun_path holds 108 bytes on Linux


def socket_path() -> Path:
    return paths.under_home("run") / "spark-server.sock"


def log_path() -> Path:
    return paths.under_home("log") / "run-server.log"


def fingerprint() -> str:
    """The package's code, as a digest of every module's bytes (a few milliseconds)."""
    digest = hashlib.sha256()
    for path in sorted(paths.PACKAGE_DIR.rglob("*.py")):
        if "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(paths.PACKAGE_DIR)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def send(stream: Any, lock: threading.Lock, message: dict[str, Any]) -> bool:
    """One JSON line to the client; False once the client is gone (the run goes on, see step 4)."""
    try:
        with lock:
            stream.write(json.dumps(message).encode() + b"\n")
            stream.flush()
        return True
    except (OSError, ValueError):
        return False


class _Lines:
    """A text stream whose complete lines go to the client as {"out": line}."""

    def __init__(self, deliver: Any) -> None:
        self.deliver, self.buffer = deliver, ""

    def write(self, text: str) -> int:
        self.buffer += text
        *lines, self.buffer = self.buffer.split("\n")
        for line in lines:
            self.deliver({"out": line})
        return len(text)

    def flush(self) -> None:
        if self.buffer:   # a last line without its newline
            self.deliver({"out": self.buffer})
            self.buffer = ""


class _RunLog(logging.Handler):
    """Log records of one run's threads (the run thread and its slot threads, named after it)."""

    def __init__(self, thread_name: str, deliver: Any) -> None:
        super().__init__(logging.INFO)
        self.thread_name, self.deliver = thread_name, deliver
        self.setFormatter(logging.Formatter(LOG_FORMAT))

    def filter(self, record: logging.LogRecord) -> bool:
        name = record.threadName   # None only with logging.logThreads off, which this server never sets
        return name is not None and (name == self.thread_name or name.startswith(self.thread_name + "_"))

    def emit(self, record: logging.LogRecord) -> None:
        self.deliver({"log": self.format(record)})


def peer_owner(conn: socket.socket) -> tuple[int, int] | None:
    """(pid, start time) of the process at the other end of a Unix socket, or None."""
    pid, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    if uid != os.getuid():
        return None
    process = lifeline.process(pid)
    return (process.pid, process.start) if process else None


def owned_runner(owner: tuple[int, int], leases: LeaseServer, run: str) -> Any:
    """``run_on_spark`` for slots that end with ``owner`` (step 4): they hold a lease bound to it."""
    from eosmirror.spark.runner import run_on_spark

    def runner(tasks: list[Any]) -> list[SlotResult]:
        client = lifeline.Process(owner[0], owner[1], "client")
        if not client.alive():
            log.error("the client (pid %d) is gone before the slots started: no slot starts", owner[0])
            return [SlotResult.not_started(t.slot, t.transactional_id, SlotStatus.FAILED,
                                           "the client of the run server is gone", "ClientGone") for t in tasks]
        lease = leases.grant(client, run)
        try:
            return run_on_spark([dataclasses.replace(t, lease=lease) for t in tasks])
        finally:
            leases.revoke(lease[2], "the run's slots ended")

    return runner


class Server:
    def __init__(self, sc: Any, leases: LeaseServer) -> None:
        self.sc, self.leases, self.code = sc, leases, fingerprint()
        self.active: dict[str, str] = {}     # thread name -> mirror, runs in progress
        self.stopping = threading.Event()
        self.connections = self.runs = 0
        # Connections accepted and not yet answered: a stop waits for them too, since a run joins
        # ``active`` only once its request is read.
        self.open: set[str] = set()

    def handle(self, conn: socket.socket, name: str) -> None:
        try:
            with conn, conn.makefile("rwb") as stream:
                self._answer(conn, stream, name)
        finally:
            self.open.discard(name)

    def _answer(self, conn: socket.socket, stream: Any, name: str) -> None:
        lock = threading.Lock()
        try:
            request = json.loads(stream.readline() or b"{}")
        except ValueError:
            return
        op = request.get("op") if isinstance(request, dict) else None
        if op == "ping":
            send(stream, lock, {"ok": True, "fingerprint": self.code, "master": self.sc.master, "pid": os.getpid(),
                                "jvm_pid": os.getppid(), "runs": sorted(self.active.values()),
                                "served": self.runs, "lease": "%s:%d" % self.leases.address})
        elif op == "stop":
            self.stopping.set()
            send(stream, lock, {"ok": True, "runs": sorted(self.active.values())})
        elif op == "run":
            owner = peer_owner(conn)
            if request.get("fingerprint") != self.code:
                send(stream, lock, {"error": "the run server runs other eosmirror code than this client (it was "
                                             "started before an upgrade or an edit); restart it: "
                                             "`eosmirror server stop && eosmirror server start`", "exit": EXIT_CONFIG})
            elif owner is None:
                send(stream, lock, {"error": "the run server could not identify the client process",
                                    "exit": EXIT_CONFIG})
            else:
                self._run(request.get("argv") or [], request.get("clusters_file"), owner, name,
                          lambda m: send(stream, lock, m))

    def _run(self, argv: list[str], clusters_file: str | None, owner: tuple[int, int], name: str,
             deliver: Any) -> None:
        from eosmirror.spark import job

        handler = _RunLog(name, deliver)
        logging.getLogger().addHandler(handler)
        steptimes.time_process(owner[0])   # "process start": the client's, since the server's is long past
        connections.use_clusters_file(clusters_file)   # the client's resolved connections (step 2)
        started = time.monotonic()
        try:
            args = job.parser().parse_args(argv)
            self.active[name] = args.mirror
            self.runs += 1
            log.info("run of %s for pid %d", args.mirror, owner[0])
            _warn_own_spark_conf(args)
            lines = _Lines(deliver)
            code = job.execute(args, owned_runner(owner, self.leases, name), out=lines, err=lines)
        except SystemExit as exc:   # argparse: the client checked the same arguments already
            code = int(exc.code or 0)
        except Exception:  # noqa: BLE001 - one run's bug must not end the server
            log.exception("the run failed in the server")
            code = 1
        finally:
            logging.getLogger().removeHandler(handler)
            self.active.pop(name, None)
        log.info("run %s ended with exit code %d in %.2f s", name, code, time.monotonic() - started)
        deliver({"exit": code})

    def serve(self, listener: socket.socket) -> None:
        listener.settimeout(0.5)
        while not (self.stopping.is_set() and not self.open):
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                continue
            if self.stopping.is_set():
                conn.close()   # stopping: no new run; the ones in progress end first
                continue
            self.connections += 1
            name = f"eosmirror-run-{self.connections}"
            self.open.add(name)
            conn.settimeout(None)
            threading.Thread(target=self.handle, args=(conn, name), name=name, daemon=True).start()


def _warn_own_spark_conf(args: argparse.Namespace) -> None:
    """A mirror's spark_conf is for its own Spark application: a served run shares the server's."""
    from eosmirror.core import config

    try:
        own = sorted(config.load(args.config).get(args.mirror).spark_conf)
    except Exception:  # noqa: BLE001 - a bad mirrors file is the run's own error to report, next
        return
    if own:
        log.warning("mirror %s: its spark_conf (%s) does not apply here: a run in the run server uses the "
                    "server's Spark settings (`eosmirror server start --conf KEY=VALUE`)", args.mirror, ", ".join(own))


def _warm(sc: Any, workers: int) -> None:
    from eosmirror.spark.runner import warm_worker

    if workers:
        sc.setJobGroup("eosmirror-warm-up", "eosmirror run server: start the Python workers runs will reuse")
        sc.parallelize(range(workers), workers).map(warm_worker).collect()


def bind(path: Path) -> socket.socket:
    """The listening socket, mode 0600; a stale socket file (no server answers) is replaced."""
    if len(str(path)) > SOCKET_PATH_LIMIT:
        raise SystemExit(f"eosmirror: the run server's socket path {path} is longer than {SOCKET_PATH_LIMIT} "
                         f"bytes; set EOSMIRROR_HOME to a shorter folder")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
            raise SystemExit(f"eosmirror: a run server already listens on {path}")
        except OSError:
            path.unlink()
        finally:
            probe.close()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mask = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(mask)
    listener.listen(64)
    return listener


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="eosmirror-run-server")
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS)
    parser.add_argument("--lease-port", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    from pyspark import SparkConf, SparkContext

    started = time.monotonic()
    sc = SparkContext.getOrCreate(SparkConf())
    conf = sc.getConf()
    # What executors already reach, the lease's address: a started SparkContext always sets it.
    driver_host = conf.get("spark.driver.host", "")
    bind_host = conf.get("spark.driver.bindAddress", driver_host)
    try:
        leases = LeaseServer(driver_host, bind_host, args.lease_port)
    except OSError as exc:
        log.error("cannot listen for the runs' leases on %s port %d (%s): choose another --lease-port",
                  bind_host, args.lease_port, exc.strerror or exc)
        sc.stop()
        return EXIT_CONFIG
    _warm(sc, args.workers)
    listener = bind(socket_path())
    log.info("eosmirror run server ready on %s: master %s, %d warm Python worker(s), leases on %s:%d, %.1f s, "
             "code %s", socket_path(), sc.master, args.workers, *leases.address, time.monotonic() - started,
             fingerprint())
    server = Server(sc, leases)
    try:
        server.serve(listener)
    finally:
        listener.close()
        socket_path().unlink(missing_ok=True)
        log.info("eosmirror run server stopped after %d run(s)", server.runs)
        leases.close()
        sc.stop()
    return 0


if __name__ == "__main__":   # spark-submit <site-packages>/eosmirror/spark/server.py (eosmirror server start)
    sys.exit(main(sys.argv[1:]))
