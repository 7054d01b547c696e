"""Run only by test_worker_isolation.py, in a nested `pytest -n 2 --dist each`: each worker writes
what it was given."""

import json
import os
from pathlib import Path


def test_record_this_workers_environment():
    keys = ("EOSMIRROR_HOME", "AIRFLOW_HOME", "EOSMIRROR_SOURCE_PORT", "EOSMIRROR_TARGET_PORT")
    Path(os.environ["PROBE_DIR"], os.environ["PYTEST_XDIST_WORKER"] + ".json").write_text(
        json.dumps({k: os.environ.get(k) for k in keys}))
