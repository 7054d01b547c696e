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


def pause_dags(mirror: str) -> list[str]:
    """Best effort: pause the mirror's DAG and its group DAG with the Airflow CLI of this home, so
    the scheduler stops starting runs that the mirror's state would refuse anyway. Returns one line
    per DAG (paused, or why not: the state check stands either way)."""
    return [_set_paused(dag_id, True, _NOT_PAUSED)
            for dag_id in (dagids.mirror_dag_id(mirror), dagids.groups_dag_id(mirror))]


def unpause_reverse_dag(mirror: str) -> list[str]:
    """Best effort: unpause the reverse mirror's DAG (paused on creation: its runs are refused until
    `eosmirror reverse` prepared it), so it runs on the forward mirror's schedule."""
    back = naming.reverse_mirror_name(mirror)
    return [_set_paused(dagids.mirror_dag_id(back), False,
                        f"not unpaused: unpause it in the Airflow UI, or run `eosmirror run {back}`")]


def resume_dags(mirror: str, groups: bool) -> list[str]:
    """Best effort, after `eosmirror resume`: pause the reverse mirror's DAG (retired: its runs are
    refused) and unpause the mirror's DAG (and its group DAG when it has ``groups``)."""
    back = dagids.mirror_dag_id(naming.reverse_mirror_name(mirror))
    lines = [_set_paused(back, True, "not paused: pause it in the Airflow UI; its runs are refused meanwhile")]
    for dag_id in (dagids.mirror_dag_id(mirror), *([dagids.groups_dag_id(mirror)] if groups else [])):
        lines.append(_set_paused(dag_id, False, f"not unpaused: unpause it in the Airflow UI, or run `eosmirror run "
                                                f"{mirror}`"))
    return lines


def _set_paused(dag_id: str, paused: bool, otherwise: str) -> str:
    """``airflow dags pause|unpause <dag_id>``: one line, done or ``otherwise`` with the reason."""
    action = "pause" if paused else "unpause"
    try:
        done = subprocess.run([str(Path(sys.executable).with_name("airflow")), "dags", action, dag_id],
                              env=_airflow_env(), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
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
