"""The one import a team's own DAG file needs (#24; docs/install.md). The whole file is two lines:

    from eosmirror.airflow.factory import mirror_dags
    globals().update(mirror_dags("/path/to/mirrors.yaml"))

It builds every eosmirror DAG for that mirrors file: one mirror DAG per mirror, one group DAG per mirror
with a `groups` section, and the fence, lag and migrate DAGs -- the DAG ids `dags/eosmirror_dags.py` has.
Parsing reads the file only (no broker, connection or Variable); a bad file fails the DAG file's import
with the ConfigError naming what to fix, shown in Airflow's DAG import errors.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from eosmirror.airflow.dags import build_all


def mirror_dags(mirrors_file: str | os.PathLike[str]) -> dict[str, Any]:
    """``{dag_id: DAG}`` for ``mirrors_file``. The path is made absolute here: tasks read it again on
    workers, whose working directory is not the DAG processor's."""

    if not mirrors_file:
        raise ValueError("mirror_dags needs the path of a mirrors file (e.g. mirror_dags('/etc/eosmirror/mirrors.yaml'))")
    return build_all(str(Path(mirrors_file).expanduser().absolute()))
