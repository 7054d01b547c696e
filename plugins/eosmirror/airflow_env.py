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

from eosmirror import paths


def airflow_home() -> Path:
    return paths.under_home("airflow")


def spark_default_connection(master: str = "local[*]") -> str:
    """``spark_default`` as JSON: the URI form would lose the brackets of ``local[*]``."""
    return json.dumps({"conn_type": "spark", "host": master, "extra": {"deploy-mode": "client"}})


def airflow_environ() -> dict[str, str]:
    home = airflow_home()
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(paths.REPO_ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(paths.REPO_ROOT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
        "AIRFLOW__CORE__LAZY_LOAD_PLUGINS": "True",
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


def run_airflow(args: list[str], **kwargs: object) -> subprocess.CompletedProcess:
    """The Airflow CLI with this project's home and settings."""
    return subprocess.run([airflow_cli(), *args], env={**os.environ, **airflow_environ()}, **kwargs)  # type: ignore[arg-type]


def exec_airflow(args: list[str]) -> None:
    """Replace this process with the Airflow CLI (``eosmirror airflow standalone`` and friends)."""
    os.execve(airflow_cli(), [airflow_cli(), *args], {**os.environ, **airflow_environ()})


def migrate() -> bool:
    """Create or upgrade the SQLite metadata DB once per Airflow version. True if it ran."""
    from importlib.metadata import version

    stamp = airflow_home() / f".migrated-{version('apache-airflow-core')}"
    if stamp.exists() and (airflow_home() / "airflow.db").exists():
        return False
    env = {**os.environ, **airflow_environ()}
    done = subprocess.run([airflow_cli(), "db", "migrate"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        raise RuntimeError(f"`airflow db migrate` failed (exit {done.returncode}):\n{tail}")
    stamp.write_text("ok\n")
    return True
