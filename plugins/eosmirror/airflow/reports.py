"""Run reports of past mirror DAG runs, read from Airflow's metadata database (the `copy` task's XCom).

For the demo, the tests and operators' scripts: call after ``home.apply()`` (or in an Airflow
process); Airflow is imported inside the functions.
"""

from __future__ import annotations

from eosmirror.core import runreport


def run_report(dag_id: str, run_id: str) -> runreport.Report | None:
    """The run report the `copy` task of one DAG run returned (typed; one of an older release, without
    a version, reads the same), or None."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.scalars(XComModel.get_many(run_id=run_id, dag_ids=dag_id, task_ids="copy",
                                                  key="return_value")).all()
        values = [XComModel.deserialize_value(row) for row in rows]
    found = next((v for v in values if isinstance(v, dict)), None)
    return runreport.from_dict(found) if found is not None else None


def latest_runs(dag_id: str, limit: int = 1) -> list[tuple[str, str]]:
    """(run_id, state) of the newest runs of a DAG, newest first."""
    from airflow.models import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(select(DagRun.run_id, DagRun.state).where(DagRun.dag_id == dag_id)
                               .order_by(DagRun.id.desc()).limit(limit)).all()
    return [(run_id, str(state)) for run_id, state in rows]
