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
