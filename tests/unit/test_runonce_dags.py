"""Pausing and unpausing DAGs around the disaster-recovery commands (airflow/runonce.py): which DAGs, which
action, and a line saying so when the Airflow CLI cannot (no Airflow run here: subprocess is replaced)."""

import subprocess

import pytest

from eosmirror.airflow import runonce


@pytest.fixture(autouse=True)
def a_database(monkeypatch, tmp_path):
    """This home's SQLite database exists (the Airflow CLI is started only then)."""
    db = tmp_path / "airflow.db"
    db.write_bytes(b"")
    monkeypatch.setattr(runonce, "_airflow_env", lambda: {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{db}"})
    return db


class Calls:
    def __init__(self, failing: set[str] = frozenset()):
        self.seen: list[tuple[str, str]] = []
        self.failing = failing

    def __call__(self, cmd, **_kwargs):
        action, dag_id = cmd[-2], cmd[-1]
        self.seen.append((action, dag_id))
        code = 1 if dag_id in self.failing else 0
        return subprocess.CompletedProcess(cmd, code, "", "DAG not found\n" if code else "")


def test_resume_pauses_the_retired_reverse_mirror_and_unpauses_the_mirror_and_its_group_dag(monkeypatch):
    calls = Calls()
    monkeypatch.setattr(runonce.subprocess, "run", calls)
    lines = runonce.resume_dags("dr", groups=True)
    assert calls.seen == [("pause", "eosmirror__dr__reverse"), ("unpause", "eosmirror__dr"),
                          ("unpause", "eosmirror_groups__dr")]
    assert lines == ["eosmirror__dr__reverse: paused", "eosmirror__dr: unpaused", "eosmirror_groups__dr: unpaused"]
    calls.seen.clear()
    runonce.resume_dags("dr", groups=False)
    assert [dag for _, dag in calls.seen] == ["eosmirror__dr__reverse", "eosmirror__dr"]


def test_a_dag_the_cli_cannot_change_is_named_with_what_to_do_and_why(monkeypatch):
    monkeypatch.setattr(runonce.subprocess, "run", Calls(failing={"eosmirror__dr"}))
    lines = runonce.resume_dags("dr", groups=False)
    assert lines[1].startswith("eosmirror__dr: not unpaused: unpause it in the Airflow UI, or run `eosmirror run dr`")
    assert lines[1].endswith("(DAG not found)")
    monkeypatch.setattr(runonce.subprocess, "run", Calls(failing={"eosmirror_groups__dr"}))
    assert runonce.pause_dags("dr")[1].startswith("eosmirror_groups__dr: not paused: pause it in the Airflow UI")
    assert runonce.unpause_reverse_dag("dr") == ["eosmirror__dr__reverse: unpaused"]


def test_inside_a_task_or_without_a_database_no_cli_starts_and_each_line_says_why(monkeypatch, a_database):
    calls = Calls()
    monkeypatch.setattr(runonce.subprocess, "run", calls)
    lines = runonce.pause_dags("dr", in_task=True)
    assert calls.seen == []
    assert lines == [f"{dag}: {runonce._NOT_PAUSED} (a task has no metadata-database access)"
                     for dag in ("eosmirror__dr", "eosmirror_groups__dr")]
    a_database.unlink()
    lines = runonce.resume_dags("dr", groups=False)
    assert calls.seen == []
    assert lines[1] == (f"eosmirror__dr: not unpaused: unpause it in the Airflow UI, or run `eosmirror run dr` "
                        f"(no Airflow database at {a_database})")
