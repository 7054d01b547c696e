"""The client side of the run server (spark/server.py): ``eosmirror server start|stop|status`` and
``eosmirror run --server``."""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from eosmirror import paths
from eosmirror.core.errors import EXIT_CONFIG, EXIT_FAILED, ConfigError, EosMirrorError
from eosmirror.core.logformat import LOG_FORMAT
from eosmirror.spark import runargs, server, submit

START_BUDGET_SECONDS = 180.0   # spark-submit, the context and the warm workers; seconds on a quiet machine
STOP_BUDGET_SECONDS = 60.0


class ServerUnavailable(ConfigError):
    """No run server answers for this home."""


def _connect(timeout: float | None = None) -> socket.socket:
    path = server.socket_path()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
    except OSError as exc:
        sock.close()
        raise ServerUnavailable(f"no run server answers on {path} ({exc.strerror or exc}): start one with "
                                f"`eosmirror server start`, or run without --server") from None
    return sock


def _ask(op: str, timeout: float = 10.0) -> dict[str, Any]:
    with _connect(timeout) as sock:
        stream = sock.makefile("rwb")
        stream.write(json.dumps({"op": op}).encode() + b"\n")
        stream.flush()
        line = stream.readline()
    if not line:
        raise ServerUnavailable(f"the run server on {server.socket_path()} closed the connection without answering")
    answer: dict[str, Any] = json.loads(line)
    return answer


def status() -> dict[str, Any] | None:
    """The server's answer to a ping (pid, master, runs in progress, code), or None if none answers."""
    try:
        return _ask("ping")
    except (ServerUnavailable, OSError, ValueError):
        return None


def run(job_argv: list[str], out: Any = None, err: Any = None) -> int:
    """One run in the server: its log lines to ``err``, its report to ``out``; its exit code."""
    out, err = out or sys.stdout, err or sys.stderr
    # The Airflow copy task's resolved connections (a 0600 file): the path goes over, never the content.
    clusters_file = os.environ.get("EOSMIRROR_CLUSTERS_FILE")
    request = {"op": "run", "argv": job_argv, "fingerprint": server.fingerprint(),
               "clusters_file": str(Path(clusters_file).resolve()) if clusters_file else None}
    with _connect() as sock:
        stream = sock.makefile("rwb")
        stream.write(json.dumps(request).encode() + b"\n")
        stream.flush()
        for line in stream:
            message = json.loads(line)
            if "log" in message:
                print(message["log"], file=err, flush=True)
            if "out" in message:
                print(message["out"], file=out, flush=True)
            if "error" in message:
                print(f"eosmirror: {message['error']}", file=err, flush=True)
            if "exit" in message:
                return int(message["exit"])
    raise EosMirrorError(f"the run server closed the connection before the run ended; see its log, "
                         f"{server.log_path()}")


def job_arguments(args: argparse.Namespace) -> list[str]:
    """The job's arguments of an `eosmirror run` command line (spark-submit's or the run server's)."""
    # --follow-seconds counts from now, not from when Spark has started: passed on as --follow-until.
    follow = runargs.follow_until(args)
    return submit.job_arguments(args.mirror, args.config, args.until, args.max_records_per_partition,
                                args.max_bytes_per_slot, args.topics.split(",") if args.topics else None,
                                args.dry_run, args.result_json, follow_until=follow.isoformat() if follow else None,
                                final_of_switchover=bool(getattr(args, "final_of_switchover", False)),
                                max_bytes_per_second=getattr(args, "max_bytes_per_second", None),
                                accept_foreign=bool(getattr(args, "accept_foreign", False)))


def client_command(job_argv: list[str]) -> list[str]:
    """The `eosmirror run <mirror> --server` command of a job's arguments (``submit.job_arguments``)."""
    rest = list(job_argv)
    at = rest.index("--mirror")
    mirror = rest[at + 1]
    del rest[at:at + 2]
    return [sys.executable, "-m", "eosmirror.cli", "run", mirror, "--server", *rest]


def run_command(args: argparse.Namespace) -> int:
    """`eosmirror run <mirror> --server`: the run in the run server; its exit code."""
    if args.master or args.ship_package:
        raise ConfigError("--master and --ship-package are the run server's own (`eosmirror server start "
                          "--master ...`); drop them with --server")
    # The server's working directory is not this one: paths go over as absolute paths.
    args.config = str(Path(args.config).resolve()) if args.config else str(paths.default_mirrors_file())
    if args.result_json:
        args.result_json = str(Path(args.result_json).resolve())
    return run(job_arguments(args))


def main_run(argv: list[str]) -> int:
    """The lean path of `eosmirror run ... --server` (``eosmirror.cli``): the client's start is part
    of every served run, so it imports this module and the run's arguments, not the whole CLI."""
    parser = argparse.ArgumentParser(prog="eosmirror run")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    runargs.add_run_command(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format=LOG_FORMAT, stream=sys.stderr)
    try:
        return run_command(args)
    except EosMirrorError as exc:
        print(f"eosmirror: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return EXIT_FAILED


def start(master: str | None = None, workers: int = server.DEFAULT_WORKERS,
          conf: dict[str, str] | None = None, extra_env: dict[str, str] | None = None,
          lease_port: int = 0, ship_package: bool = False) -> dict[str, Any]:
    """spark-submit the server in the background (its own session: it outlives this command) and
    wait until it answers; its output goes to ``server.log_path()``. ``extra_env``: tests' fault rules.
    ``ship_package``: executors import the slot code from a zip (``--py-files``), so their Python
    workers start cold (the warm daemon module needs the package installed where they run)."""
    running = status()
    if running:
        raise ConfigError(f"a run server already answers on {server.socket_path()} (pid {running['pid']}, "
                          f"master {running['master']})")
    if not 0 <= lease_port <= 65535:
        raise ConfigError(f"--lease-port {lease_port}: a TCP port from 1 to 65535, or 0 for any free port")
    master = master or server.DEFAULT_MASTER
    spark_conf = submit.base_conf("eosmirror-run-server")
    if not ship_package:
        spark_conf["spark.python.daemon.module"] = server.DAEMON_MODULE
    spark_conf.update(conf or {})
    cmd = submit.command(master, ["--workers", str(workers), "--lease-port", str(lease_port)], spark_conf,
                         ship_package=ship_package, application=Path(server.__file__).resolve())
    log_file = server.log_path()
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as logged:
        proc = subprocess.Popen(cmd, env={**submit.process_env(), **(extra_env or {})}, stdout=logged, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    deadline, started = time.monotonic() + START_BUDGET_SECONDS, time.monotonic()
    while time.monotonic() < deadline:
        answer = status()
        if answer:
            return {**answer, "seconds": round(time.monotonic() - started, 1), "log": str(log_file)}
        if proc.poll() is not None:
            # Exit 2: the server refused its settings (a lease port in use, say): a configuration error.
            error = ConfigError if proc.returncode == EXIT_CONFIG else EosMirrorError
            raise error(f"the run server exited with code {proc.returncode} before it answered; last "
                        f"lines of {log_file}:\n{_tail(log_file)}")
        time.sleep(0.2)
    proc.kill()
    raise EosMirrorError(f"the run server did not answer within {START_BUDGET_SECONDS:.0f} s; last lines of "
                         f"{log_file}:\n{_tail(log_file)}")


def stop() -> dict[str, Any] | None:
    """Ask the server to stop (runs in progress end first); None if none was running."""
    answer = status()
    if not answer:
        return None
    _ask("stop")
    deadline = time.monotonic() + STOP_BUDGET_SECONDS
    while time.monotonic() < deadline:
        if not server.socket_path().exists() and not _alive(answer["pid"]):
            return answer
        time.sleep(0.2)
    raise EosMirrorError(f"the run server (pid {answer['pid']}) did not stop within {STOP_BUDGET_SECONDS:.0f} s; "
                         f"runs in progress end first ({', '.join(answer.get('runs') or []) or 'none'}); see "
                         f"{server.log_path()}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
