"""After a disaster-recovery command's verdict, best effort: pausing or unpausing the mirrors' DAGs with
the Airflow CLI of this home, as the new state wants (the state refuses their runs either way, so this
is off the path to "safe"). Shared by the CLI (clidr.py) and the DAGs (airflow/drdags.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from eosmirror.airflow import dagids, home
from eosmirror.core import naming

# Airflow 3 gives a task no metadata-database access (its CLI fails there), so a DAG can pause no
# other DAG: the operator pauses it in the UI; meanwhile the mirror's state refuses its runs at preflight.
_NOT_PAUSED = "not paused: pause it in the Airflow UI; until then its runs fail at preflight, refused by the mirror's state"


def pause_dags(mirror: str, in_task: bool = False) -> list[str]:
    """Best effort: pause the mirror's DAG and its group DAG with the Airflow CLI of this home, so
    the scheduler stops starting runs that the mirror's state would refuse anyway. Returns one line
    per DAG (paused, or why not: the state check stands either way). ``in_task``: called by a DAG's
    task, which Airflow 3 gives no metadata-database access: the lines say what to do, no CLI runs."""
    return _apply([(dag_id, True, _NOT_PAUSED)
                   for dag_id in (dagids.mirror_dag_id(mirror), dagids.groups_dag_id(mirror))], in_task)


def unpause_reverse_dag(mirror: str, in_task: bool = False) -> list[str]:
    """Best effort: unpause the reverse mirror's DAG (paused on creation: its runs are refused until
    `eosmirror reverse` prepared it), so it runs on the forward mirror's schedule."""
    back = naming.reverse_mirror_name(mirror)
    return _apply([(dagids.mirror_dag_id(back), False,
                    f"not unpaused: unpause it in the Airflow UI, or run `eosmirror run {back}`")], in_task)


def resume_dags(mirror: str, groups: bool, in_task: bool = False) -> list[str]:
    """Best effort, after `eosmirror resume`: pause the reverse mirror's DAG (retired: its runs are
    refused) and unpause the mirror's DAG (and its group DAG when it has ``groups``)."""
    back = dagids.mirror_dag_id(naming.reverse_mirror_name(mirror))
    changes = [(back, True, "not paused: pause it in the Airflow UI; its runs are refused meanwhile")]
    for dag_id in (dagids.mirror_dag_id(mirror), *([dagids.groups_dag_id(mirror)] if groups else [])):
        changes.append((dag_id, False, f"not unpaused: unpause it in the Airflow UI, or run `eosmirror run "
                                       f"{mirror}`"))
    return _apply(changes, in_task)


def _apply(changes: list[tuple[str, bool, str]], in_task: bool) -> list[str]:
    """One line per (dag_id, pause?, what to do otherwise). No Airflow CLI where it cannot work: inside a
    task, or when this home's SQLite database does not exist (no `make airflow` or `make demo` ran here);
    each start of the CLI costs about 3 s of CPU only to fail."""
    env = _airflow_env()
    why_not = "a task has no metadata-database access" if in_task else _no_database(env)
    if why_not:
        return [f"{dag_id}: {otherwise} ({why_not})" for dag_id, _, otherwise in changes]
    return [_set_paused(dag_id, paused, otherwise, env) for dag_id, paused, otherwise in changes]


def _no_database(env: dict[str, str]) -> str | None:
    """Why the Airflow CLI cannot change a DAG here, when that is known without starting it: the
    configured SQLite file does not exist. (Any other database, or one set in airflow.cfg: unknown.)"""
    url = env.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "")
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        return f"no Airflow database at {url.removeprefix('sqlite:///')}"
    return None


def _set_paused(dag_id: str, paused: bool, otherwise: str, env: dict[str, str]) -> str:
    """``airflow dags pause|unpause <dag_id>``: one line, done or ``otherwise`` with the reason."""
    action = "pause" if paused else "unpause"
    try:
        done = subprocess.run([str(Path(sys.executable).with_name("airflow")), "dags", action, dag_id],
                              env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{dag_id}: {otherwise} ({exc})"
    if done.returncode == 0:
        return f"{dag_id}: {action}d"
    why = ((done.stderr or done.stdout).strip().splitlines() or ["?"])[-1]
    return f"{dag_id}: {otherwise} ({why[:200]})"


def _airflow_env() -> dict[str, str]:
    """Inside Airflow (a task) its own settings; from a checkout's CLI, the project's Airflow home."""
    if "AIRFLOW_HOME" in os.environ:
        return dict(os.environ)
    try:
        return {**os.environ, **home.airflow_environ()}
    except RuntimeError:      # an installed wheel without an Airflow of the project's: the user's own
        return dict(os.environ)
