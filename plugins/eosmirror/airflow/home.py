"""The Airflow home eosmirror uses on one machine: SQLite, examples off, our dags and plugins.

Only environment variables and a subprocess; Airflow itself is never imported here, so the CLI
and the tests can prepare the environment *before* anything imports airflow (Airflow reads its
configuration once, at import).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import IO

from eosmirror import paths
from eosmirror.airflow import listen

# SQLite allows one writer at a time; pysqlite gives up on a locked database after 5 s. With the
# scheduler, DAG processor, API server and a CLI call writing at once on a busy 2-core machine, 5 s
# is not enough for a waiting writer, so wait up to 60 s. (A transaction that read and then must
# write still gets "database is locked" at once: SQLite does not wait there. PostgreSQL, as in
# docker/, has neither limit.)
# The API server (`airflow api-server`, also under `standalone`) waits 20 s: one of Airflow's own audit-log
# dependencies (api_fastapi/logging/decorators.py, log_action) commits on the server's event loop, and when a
# sync request of the same server (a task's execution API call) holds the write lock, that request cannot
# commit until the loop is free. The two then wait on each other until the audit log's busy timeout ends it
# with "database is locked" (a 500 before the request's own work, which a client sends again): with 60 s,
# the whole API server stood still 60 s each time (46 s and 58 s gaps in one run of
# tests/e2e/test_airflow_scheduler.py). 20 s still outlasts an ordinary wait for the scheduler's writes.
# Airflow imports this dict by its dotted path (database.sql_alchemy_connect_args).
API_SERVER_SQLITE_TIMEOUT = 20
SQLITE_CONNECT_ARGS = {"timeout": API_SERVER_SQLITE_TIMEOUT if sys.argv[1:2] == ["api-server"] else 60}
EXECUTION_API_TIMEOUT_SECONDS = "60"


def airflow_home() -> Path:
    return paths.under_home("airflow")


def spark_default_connection(master: str = "local[*]") -> str:
    """``spark_default`` as JSON: the URI form would lose the brackets of ``local[*]``."""
    return json.dumps({"conn_type": "spark", "host": master, "extra": {"deploy-mode": "client"}})


def api_port() -> int:
    """The API server's port: ``AIRFLOW__API__PORT`` if set, else Airflow's default 8080."""
    return int(os.environ.get("AIRFLOW__API__PORT") or 8080)


def api_url() -> str:
    return os.environ.get("AIRFLOW__API__BASE_URL") or f"http://localhost:{api_port()}"


def airflow_environ() -> dict[str, str]:
    """This project's Airflow settings: only for a checkout (``make demo``/``make test``/``make airflow``);
    with an installed wheel, Airflow is yours and configured your way."""
    home = airflow_home()
    root = paths.checkout_root()
    if root is None:
        raise RuntimeError("the project's own Airflow home needs a checkout of eosmirror; with an installed "
                           "wheel, use your Airflow with a two-line DAG file: `from eosmirror.airflow.factory import "
                           "mirror_dags; globals().update(mirror_dags('/path/mirrors.yaml'))` (docs/install.md)")
    listening = listen.settings(home)    # first: an unknown EOSMIRROR_LISTEN fails before anything starts
    return {
        **listening,
        "AIRFLOW_HOME": str(home),
        # Your own DAGs beside eosmirror's (e.g. one scheduled on a switchover's Asset event): a folder
        # holding them and the two-line eosmirror DAG file (dags/eosmirror_dags.py), in EOSMIRROR_DAGS_FOLDER.
        "AIRFLOW__CORE__DAGS_FOLDER": os.environ.get("EOSMIRROR_DAGS_FOLDER") or str(root / "dags"),
        # The plugin comes from the installed package's airflow.plugins entry point, as for any user: the
        # plugins folder is the home's own (empty), never plugins/ (Airflow would import each module there).
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS": f"{__name__}.SQLITE_CONNECT_ARGS",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
        "AIRFLOW__CORE__LAZY_LOAD_PLUGINS": "True",
        # The API server, its public URL and the task execution API agree on one port (Airflow 3
        # otherwise sends task calls to :8080 whatever AIRFLOW__API__PORT says).
        "AIRFLOW__API__PORT": str(api_port()),
        "AIRFLOW__API__BASE_URL": api_url(),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": os.environ.get("AIRFLOW__CORE__EXECUTION_API_SERVER_URL")
        or f"{api_url().rstrip('/')}/execution/",
        # Airflow starts its components as `airflow ...` subprocesses found on PATH: put this
        # interpreter's bin folder (the project's venv) first, so `make airflow` works from any shell;
        # with loopback, listen's `airflow` script (no task-log servers) before it.
        "PATH": os.pathsep.join(filter(None, [listening.get("PATH"), str(Path(sys.executable).parent),
                                              os.environ.get("PATH", "")])),
        # Airflow 3.3 parses .airflowignore with pathspec's deprecated GitWildMatchPattern, which warns
        # in every task log; not ours to fix, so silenced for exactly that message and category.
        "PYTHONWARNINGS": ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"),
                                                 "ignore:GitWildMatchPattern:DeprecationWarning"])),
        # A task's supervisor gives up on the execution API after [workers] execution_api_timeout (5 s) a
        # try: the API server's first /execution request builds its versioned routes, which takes seconds
        # and grows with the machine's load, and a task whose first try times out fails before it starts
        # ("Workload execution failed", httpcore.ReadTimeout) and waits out its retry delay. 60 s, as the
        # API server's own worker timeout (120 s) allows; Airflow before 3.1.1 ignores the option
        # (figures: dfc283b, docs/results.md "Incidents behind the code").
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": os.environ.get("AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT",
                                                                  EXECUTION_API_TIMEOUT_SECONDS),
        # Out of the box, spark_default runs jobs on this machine.
        "AIRFLOW_CONN_SPARK_DEFAULT": os.environ.get("AIRFLOW_CONN_SPARK_DEFAULT", spark_default_connection()),
    }


def apply() -> dict[str, str]:
    """Export the Airflow environment into this process (call before importing airflow)."""
    env = airflow_environ()
    for key, value in env.items():
        os.environ.setdefault(key, value)
    return env


def airflow_cli() -> str:
    return str(Path(sys.executable).with_name("airflow"))


def run_airflow(args: list[str], *, stdout: IO[str] | None = None,
                stderr: IO[str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """The Airflow CLI with this project's home and settings; its output where ``stdout``/``stderr`` say."""
    env = {**os.environ, **airflow_environ()}
    return subprocess.run([airflow_cli(), *listen.with_skip_serve_logs(args)], env=env, stdout=stdout, stderr=stderr)


def exec_airflow(args: list[str]) -> None:
    """Replace this process with the Airflow CLI (``eosmirror airflow standalone`` and friends), its
    listeners where EOSMIRROR_LISTEN says (see listen.py) and the admin password file owner-only."""
    env = {**os.environ, **airflow_environ()}
    if listen.mode() == "loopback":
        listen.write_shim(airflow_home(), airflow_cli())
    listen.private_password_file(airflow_home())
    os.execve(airflow_cli(), [airflow_cli(), *listen.with_skip_serve_logs(args)], env)


def migrate() -> bool:
    """Create or upgrade the SQLite metadata DB once per Airflow version. True if it ran."""
    from importlib.metadata import version

    stamp = airflow_home() / f".migrated-{version('apache-airflow-core')}"
    if stamp.exists() and (airflow_home() / "airflow.db").exists():
        strengthen_jwt_secret()
        return False
    env = {**os.environ, **airflow_environ()}
    done = subprocess.run([airflow_cli(), "db", "migrate"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        raise RuntimeError(f"`airflow db migrate` failed (exit {done.returncode}):\n{tail}")
    stamp.write_text("ok\n")
    strengthen_jwt_secret()
    return True


JWT_SECRET_BYTES = 64   # RFC 7518 3.2: an HS512 key of at least 64 bytes (PyJWT warns below that)


def strengthen_jwt_secret() -> bool:
    """Airflow writes a 24-character ``[api_auth] jwt_secret`` into a new airflow.cfg, which PyJWT
    flags as too short for HS512 on every token. Replace a short one with 86 random URL-safe
    characters (64 bytes of entropy); keep the file private to its owner. True if it changed."""
    import re
    import secrets

    cfg = airflow_home() / "airflow.cfg"
    if not cfg.exists():
        return False
    text = cfg.read_text()
    found = re.search(r"^jwt_secret = (.*)$", text, flags=re.MULTILINE)
    if found is None or len(found.group(1).strip()) >= JWT_SECRET_BYTES:
        return False
    strong = secrets.token_urlsafe(JWT_SECRET_BYTES)
    cfg.write_text(text[:found.start(1)] + strong + text[found.end(1):])
    cfg.chmod(0o600)
    return True
