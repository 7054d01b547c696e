"""Mirror definitions for DAG tests, and a mirrors file the DAG factory reads (EOSMIRROR_CONFIG)."""

from __future__ import annotations

import re

from tests.helpers import mirrors_file


def mirror_def(name, topics, **fields):
    return {"name": name, "source": {"local": "source"}, "target": {"local": "target"},
            "topics": [re.escape(t) for t in topics], "slots": 2, "max_transaction_seconds": 10,
            "airflow": {"schedule": "*/10 * * * *", "retries": 0}, **fields}


def use_mirrors(tmp_path, monkeypatch, *mirrors):
    path = mirrors_file(tmp_path / "mirrors.yaml", list(mirrors))
    monkeypatch.setenv("EOSMIRROR_CONFIG", str(path))
    return path


def end_interrupted_runs(airflow_home) -> int:
    """Mark failed the DAG runs and task instances an interrupted session left unfinished in this
    worker's Airflow database (var/test/gwN/airflow/airflow.db: a checkout's, kept between sessions): a
    scheduler started on it would pick them up beside the module's own runs. A fresh clone has none.
    Returns how many runs it ended."""
    import sqlite3
    from pathlib import Path

    db = Path(airflow_home) / "airflow.db"
    if not db.exists():
        return 0
    with sqlite3.connect(db, timeout=30) as conn:
        ended = conn.execute("UPDATE dag_run SET state = 'failed' WHERE state IN ('queued', 'running')").rowcount
        conn.execute("UPDATE task_instance SET state = 'failed' WHERE state IN "
                     "('scheduled', 'queued', 'running', 'restarting', 'up_for_retry', 'up_for_reschedule', 'deferred')")
    return ended
