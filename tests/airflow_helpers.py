"""Running DAGs of dags/ in-process with dag.test() against the SQLite Airflow home, and reading XCom."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DAGS = Path(__file__).parents[1] / "dags"


def dagbag():
    from airflow.models import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}, bag.import_errors
    return bag


def run_dag(dag_id: str, run_conf: dict[str, Any] | None = None, **kwargs: Any):
    """One DAG run with dag.test(); returns the DagRun (tasks failing do not raise: check .state)."""
    dag = dagbag().get_dag(dag_id)
    assert dag is not None, f"no DAG {dag_id}"
    return dag.test(run_conf=run_conf, **kwargs)


def task_states(dag_run) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}


def xcoms(dag_run) -> dict[str, Any]:
    """{task_id: return value} of a run, and the raw stored JSON under '<task_id>:raw'."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    out: dict[str, Any] = {}
    with create_session() as session:
        for row in session.scalars(XComModel.get_many(run_id=dag_run.run_id, dag_ids=dag_run.dag_id)).all():
            raw = json.dumps(row.value, default=str)
            out[f"{row.task_id}:raw"] = out.get(f"{row.task_id}:raw", "") + raw
            if row.key == "return_value":
                out[row.task_id] = XComModel.deserialize_value(row)
    return out


def task_log_text(capfd, caplog) -> str:
    """Everything the task logs of dag.test() runs said since the last call.

    dag.test() writes task logs to this process's output, but the stream Airflow's logging bound may be pytest's
    global capture (an earlier test in the same worker configured it), which capfd does not see. The same records
    also reach the logging handlers caplog reads, so the two together are the task log."""
    out, err = capfd.readouterr()
    text = out + err + caplog.text
    caplog.clear()
    return text


def record_temp_dirs(monkeypatch) -> list[str]:
    """Every folder ``tempfile.mkdtemp`` makes in this process from now on (dag.test runs tasks in this
    process): a test checks its own DAG run's secrets folder, never a glob of the shared /tmp, where
    other workers' running DAGs keep theirs."""
    import tempfile

    made: list[str] = []
    mkdtemp = tempfile.mkdtemp

    def recording(*args, **kwargs):
        made.append(mkdtemp(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", recording)
    return made


def assert_secrets_dirs_removed(made: list[str]) -> None:
    """The copy task made its 0600 secrets folder, and removed it."""
    from pathlib import Path

    secrets = [d for d in made if Path(d).name.startswith("eosmirror-clusters-")]
    assert secrets, f"the copy task made no secrets folder (made: {made})"
    assert not [d for d in secrets if Path(d).exists()], f"left behind: {secrets}"
