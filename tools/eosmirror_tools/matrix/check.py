"""Run inside a cell's venv: versions, then the plugin and the DAGs load with no error (stdout: JSON).

Argument: the dags folder holding the user's two-line DAG file and its mirrors.yaml.
"""

import json
import sys
from importlib.metadata import version


def main(dags_folder: str) -> None:
    out = {name: version(name) for name in ("apache-airflow", "apache-airflow-task-sdk", "pyspark",
                                            "apache-airflow-providers-apache-spark", "confluent-kafka",
                                            # Airflow's execution API stack (matrix.json only): the 3.2.2
                                            # cell's failure resolved with today's newest (cells.py)
                                            "pydantic", "fastapi", "cadwyn", "starlette", "svcs")}
    from airflow import plugins_manager

    plugins_manager.ensure_plugins_loaded() if hasattr(plugins_manager, "ensure_plugins_loaded") else None
    try:
        from airflow.dag_processing.dagbag import DagBag  # Airflow 3.2+
    except ImportError:
        from airflow.models.dagbag import DagBag
    bag = DagBag(dags_folder)   # examples are off: AIRFLOW__CORE__LOAD_EXAMPLES=False
    out["import_errors"] = {k: v[-800:] for k, v in bag.import_errors.items()}
    out["dag_ids"] = sorted(bag.dag_ids)
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
