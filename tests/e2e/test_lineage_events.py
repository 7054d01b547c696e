"""The OpenLineage events a mirror DAG run emits, through the OpenLineage provider itself (its
listener, its file transport), not our facet builder alone (tests/unit/test_lineage.py): the copy
task's COMPLETE event names each source topic as an input in the source cluster's Kafka namespace
and each target topic as an output in the target's, with the records copied as row counts.

`airflow dags test` in a child process: the provider reads its transport once per process."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import create_topic, mirrors_file, seed_sequence

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]
AIRFLOW = str(Path(sys.executable).parent / "airflow")


def test_a_mirror_dag_run_emits_openlineage_events_with_kafka_datasets_and_record_counts(
        source_conf, target_conf, unique, tmp_path):
    topic = create_topic(source_conf, unique("ol"), partitions=2)
    seed_sequence(source_conf, topic, 2, 40)
    name = unique("ol").replace("-", "_")
    config_file = mirrors_file(tmp_path / "mirrors.yaml", [{
        "name": name, "source": {"local": "source"}, "target": {"local": "target"}, "topics": [re.escape(topic)],
        "slots": 1, "max_transaction_seconds": 10, "airflow": {"schedule": None, "retries": 0}}])
    events_file = tmp_path / "openlineage.jsonl"
    env = {**os.environ, "EOSMIRROR_CONFIG": str(config_file),
           "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(events_file),
                                                          "append": True}),
           "AIRFLOW__OPENLINEAGE__NAMESPACE": "eosmirror-test"}
    done = subprocess.run([AIRFLOW, "dags", "test", f"eosmirror__{name}"], env=env, capture_output=True, text=True,
                          timeout=360)
    out = done.stdout + done.stderr
    assert done.returncode == 0 and "state=success" in out.split("DagRun Finished")[-1], out[-4000:]
    assert events_file.exists(), f"no OpenLineage event was written; the run's output ends:\n{out[-3000:]}"
    events = [json.loads(line) for line in events_file.read_text().splitlines() if line.strip()]
    copy = [e for e in events if e.get("job", {}).get("name", "").endswith(".copy") and e.get("eventType") == "COMPLETE"]
    assert len(copy) == 1, [(e.get("eventType"), e.get("job", {}).get("name")) for e in events]
    event = copy[0]
    source_ns = f"kafka://{source_conf['bootstrap.servers'].split(',')[0]}"
    target_ns = f"kafka://{target_conf['bootstrap.servers'].split(',')[0]}"
    assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [(source_ns, topic)], event["inputs"]
    assert [(d["namespace"], d["name"]) for d in event["outputs"]] == [(target_ns, topic)], event["outputs"]
    assert event["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 80, event["outputs"]
    assert event["inputs"][0].get("inputFacets", {}).get("inputStatistics", {}).get("rowCount") in (80, None)
    assert event["job"]["namespace"] == "eosmirror-test" and event["run"]["runId"], event["job"]
    print(json.dumps({k: event[k] for k in ("eventType", "job", "inputs", "outputs")}, indent=1)[:3000])
