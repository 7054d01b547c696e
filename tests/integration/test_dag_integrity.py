"""DagBag integrity over dags/: guards every DAG against import errors and policy drift."""

from pathlib import Path

import pytest

DAGS = Path(__file__).parents[2] / "dags"


@pytest.fixture(scope="module")
def dagbag():
    from airflow.models import DagBag

    return DagBag(dag_folder=str(DAGS))


def test_no_import_errors(dagbag):
    assert dagbag.import_errors == {}
