"""Where the project's own Airflow listens: loopback unless EOSMIRROR_LISTEN=all (issue #31).

On a laptop, Airflow's defaults put the API server (login page, REST API, the lag page's API) on
0.0.0.0 and each task-log server ("serve-logs", one beside the scheduler, one beside the triggerer)
on every interface, so anyone on the same Wi-Fi reaches them. The embedded brokers and Spark already
listen on 127.0.0.1 only; Airflow must as well, unless its user opens it on purpose.

- The API server binds ``[api] host``; the scheduler's health server (off here, but its host is set
  anyway) ``[scheduler] scheduler_health_check_server_host``.
- A task-log server cannot be bound to an address: Airflow 3.3's serve_logs passes ``host=""`` to
  uvicorn (every interface), with no setting. Its supported off switch is the ``--skip-serve-logs``
  flag of ``airflow scheduler`` and ``airflow triggerer``; ``airflow standalone`` starts them as
  ``airflow <component>`` found on PATH, so with loopback a small ``airflow`` script first on PATH
  adds the flag. Nothing is lost on one machine: LocalExecutor's tasks write their logs into this
  home's log folder, which the API server reads directly (for a running task it also asks the log
  server, and notes in the log's source details that it could not).
- The DAG processor of Airflow 3.3 serves nothing.

Only the environment and small files; Airflow is never imported here.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from eosmirror.core.errors import ConfigError

LISTEN_ENV = "EOSMIRROR_LISTEN"
HOSTS = {"loopback": "127.0.0.1", "all": "0.0.0.0"}
SKIP_SERVE_LOGS = ("scheduler", "triggerer")   # the Airflow commands that start a task-log server
PASSWORDS_FILE = "simple_auth_manager_passwords.json.generated"


def mode() -> str:
    """``loopback`` (the default) or ``all``; any other value is refused before anything starts."""
    value = os.environ.get(LISTEN_ENV, "").strip() or "loopback"
    if value not in HOSTS:
        raise ConfigError(f"{LISTEN_ENV}={value!r} is not a known value: use loopback (the default: only this "
                          f"machine reaches Airflow) or all (every interface: other hosts reach the login page, "
                          f"the REST API and the task-log servers)")
    return value


def settings(home: Path) -> dict[str, str]:
    """Airflow settings of the chosen mode (the PATH entry is prepended to the caller's PATH)."""
    host = HOSTS[mode()]
    env = {"AIRFLOW__API__HOST": host, "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_HOST": host}
    if mode() == "loopback":
        env["PATH"] = str(shim_dir(home))
    return env


def shim_dir(home: Path) -> Path:
    return home / "loopback-bin"


def with_skip_serve_logs(args: list[str]) -> list[str]:
    """``airflow scheduler``/``triggerer`` without their task-log server when listening on loopback."""
    if mode() == "loopback" and args[:1] and args[0] in SKIP_SERVE_LOGS and "--skip-serve-logs" not in args:
        return [*args, "--skip-serve-logs"]
    return args


def write_shim(home: Path, airflow: str) -> None:
    """The ``airflow`` that `airflow standalone` finds first on PATH with loopback: the real one, with
    ``--skip-serve-logs`` for the scheduler and the triggerer. Written whole, then renamed."""
    real = shlex.quote(airflow)
    script = (f"#!/bin/sh\n# Written by eosmirror (plugins/eosmirror/airflow/listen.py) for {LISTEN_ENV}=loopback:\n"
              f"# Airflow's task-log servers listen on every interface and cannot be bound to loopback.\n"
              f"case \"$1\" in\n  {'|'.join(SKIP_SERVE_LOGS)}) exec {real} \"$@\" --skip-serve-logs ;;\nesac\n"
              f"exec {real} \"$@\"\n")
    folder = shim_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "airflow"
    if target.exists() and target.read_text() == script:
        return
    partial = folder / ".airflow.partial"
    partial.write_text(script)
    partial.chmod(0o755)
    partial.replace(target)


def private_password_file(home: Path) -> None:
    """SimpleAuthManager keeps the admin password in plain text, in a file Airflow creates with the
    umask's mode (usually readable by every local user). Create it empty and owner-only before
    Airflow starts (Airflow appends to it, keeping the mode), or make an existing one owner-only."""
    path = Path(os.environ.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE") or home / PASSWORDS_FILE)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    path.chmod(0o600)
