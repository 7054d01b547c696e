"""Whole DAG runs (dag.test) against real brokers, Spark local and the SQLite Airflow home."""

import json
import os
import secrets as pysecrets
import threading
import time
from pathlib import Path

import pytest

from eosmirror.airflow import home
from eosmirror.kafka import readers
from tests.airflow_helpers import (
    assert_secrets_dirs_removed,
    record_temp_dirs,
    run_dag,
    task_log_text,
    task_states,
    xcoms,
)
from tests.e2e.sparkcluster import spark_standalone  # noqa: F401 - a fixture
from tests.helpers import cli, create_topic, faults_env, read_all, seed_sequence, values
from tests.support.airflow_dags import mirror_def, use_mirrors

pytestmark = pytest.mark.e2e


def test_manual_run_with_params_copies_exactly_what_it_says(source_conf, target_conf, target_cluster, unique,
                                                            tmp_path, monkeypatch):
    chosen, other = create_topic(source_conf, unique("a"), 2), create_topic(source_conf, unique("b"), 2)
    seed_sequence(source_conf, chosen, 2, 20)
    seed_sequence(source_conf, other, 2, 20)
    name = unique("m")
    use_mirrors(tmp_path, monkeypatch, mirror_def(name, [chosen, other]))
    dr = run_dag(f"eosmirror__{name}", run_conf={"topics": [chosen], "max_records_per_partition": 7})
    assert str(dr.state) == "success", task_states(dr)
    assert {k: values(read_all(target_conf, chosen, k)) for k in range(2)} == {
        k: [f"{k}-{n}".encode() for n in range(7)] for k in range(2)}
    assert readers.read_all(target_cluster, other, 0, missing_ok=True) == []
    summary = xcoms(dr)["publish"]
    assert summary["records"] == 14 and summary["records_per_topic"] == {chosen: 14}
    assert summary["status"] == "ok"
    # the cap left 13 records per partition: the operator is told, per partition
    assert summary["left"] == 26
    assert sorted((r["partition"], r["from"], r["to"], r["records"], r["left"]) for r in summary["partitions"]) == [
        (0, 0, 7, 7, 13), (1, 0, 7, 7, 13)]


def test_manual_run_without_a_data_interval_copies_up_to_now_and_emits_assets(
        source_conf, target_conf, unique, tmp_path, monkeypatch, clusters):
    topic = create_topic(source_conf, unique("now"), 1)
    seed_sequence(source_conf, topic, 1, 5)
    name = unique("m")
    use_mirrors(tmp_path, monkeypatch, mirror_def(name, [topic]))
    dr = run_dag(f"eosmirror__{name}", logical_date=None)
    assert dr.data_interval_end is None and str(dr.state) == "success", task_states(dr)
    assert values(read_all(target_conf, topic)) == [f"0-{n}".encode() for n in range(5)]
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        events = session.execute(select(AssetModel.uri, AssetEvent.extra)
                                 .join(AssetEvent, AssetEvent.asset_id == AssetModel.id)
                                 .where(AssetEvent.source_run_id == dr.run_id)).all()
    assert [uri for uri, _ in events] == [f"kafka://127.0.0.1:{clusters['target'].port}/{topic}"]
    # The event says which target offsets hold this run's records: a consumer DAG reads exactly those.
    extra = events[0][1]
    assert extra["records"] == 5 and extra["run_id"] and len(extra["partitions"]) == 1, extra
    written = extra["partitions"][0]
    in_range = [r.value for r in read_all(target_conf, topic) if written["from"] <= r.offset < written["to"]]
    assert written["partition"] == 0 and in_range == [f"0-{n}".encode() for n in range(5)], extra


def test_fencing_dag_unblocks_the_target_after_a_killed_producer(source_conf, target_conf, target_cluster, unique,
                                                                 tmp_path,
                                                                 monkeypatch):
    topic = create_topic(source_conf, unique("fence"), 2)
    seed_sequence(source_conf, topic, 2, 50)
    name = unique("m")
    path = use_mirrors(tmp_path, monkeypatch, mirror_def(name, [topic], slots=1, max_transaction_seconds=60))
    assert str(run_dag(f"eosmirror__{name}", run_conf={"max_records_per_partition": 10}).state) == "success"
    # a slot is SIGKILLed inside its transaction: its records are in the target log, uncommitted
    killed = cli("run", name, "--config", str(path), "--inprocess",
                 env=faults_env({"point": "before_commit", "action": "kill"}))
    assert killed.returncode == -9
    low, stable = readers.watermarks(target_cluster, topic, 0, read_committed=True)
    _, high = readers.watermarks(target_cluster, topic, 0, read_committed=False)
    assert stable < high          # read_committed consumers are stuck at the open transaction
    seed_sequence(source_conf, topic, 2, 5, prefix="late")   # will be copied after the fence

    dr = run_dag("eosmirror_fence", run_conf={"mirror": name, "all_generations": True})
    assert str(dr.state) == "success", task_states(dr)
    outcome = xcoms(dr)["fence"]
    assert f"eosmirror.{name}.0" in outcome["fenced"] and f"eosmirror.{name}.planner" in outcome["fenced"]
    assert outcome["unblocked"] and outcome["partitions_checked"] == 2
    low, stable = readers.watermarks(target_cluster, topic, 0, read_committed=True)
    _, high = readers.watermarks(target_cluster, topic, 0, read_committed=False)
    assert stable == high

    assert str(run_dag(f"eosmirror__{name}").state) == "success"
    for k in range(2):
        assert values(read_all(target_conf, topic, k)) == (
            [f"{k}-{n}".encode() for n in range(50)] + [f"late{k}-{n}".encode() for n in range(5)])


def test_secrets_never_reach_argv_logs_xcom_or_results(clusters, target_conf, unique, tmp_path, monkeypatch, capfd, caplog):
    caplog.set_level("INFO")
    from eosmirror_tools.kit import cluster

    made = record_temp_dirs(monkeypatch)
    secret = "pw-" + pysecrets.token_hex(12)
    secure = cluster.secure_cluster({"admin": secret})
    cluster.start(secure)
    try:
        topic = create_topic(secure.client_config(), unique("sec"), 1)
        seed_sequence(secure.client_config(), topic, 1, 20)
        conn_id = unique("conn").replace("-", "_")
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}",
                           json.dumps({"conn_type": "kafka", "extra": secure.client_config()}))
        name = unique("m")
        use_mirrors(tmp_path, monkeypatch, {**mirror_def(name, [topic]), "source": {"connection": conn_id}})

        seen_cmdlines, watching = [], True

        def watch_argv():   # every process of the run: spark-submit, the JVM, Python workers
            while watching:
                for proc in Path("/proc").iterdir():
                    if proc.name.isdigit():
                        try:
                            cmd = (proc / "cmdline").read_bytes().decode(errors="replace")
                        except OSError:
                            continue
                        if "spark/job.py" in cmd or "pyspark" in cmd or "spark-submit" in cmd:
                            seen_cmdlines.append(cmd)
                time.sleep(0.1)

        watcher = threading.Thread(target=watch_argv)
        watcher.start()
        try:
            dr = run_dag(f"eosmirror__{name}")
        finally:
            watching = False
            watcher.join()
        assert str(dr.state) == "success", task_states(dr)
        assert values(read_all(target_conf, topic)) == [f"0-{n}".encode() for n in range(20)]
        assert any("spark/job.py" in c for c in seen_cmdlines)
        assert not [c for c in seen_cmdlines if secret in c]
        stored = xcoms(dr)
        assert stored and not [k for k, v in stored.items() if k.endswith(":raw") and secret in v]
        assert stored.get("copy", {}).get("records") == 20, stored.get("copy")   # the run report travels by XCom
        # dag.test() writes every task's log (spark-submit's output included) to this process's stdout/stderr
        task_logs = task_log_text(capfd, caplog)
        assert "Spark-Submit cmd" in task_logs and "spark/job.py" in task_logs and name in task_logs
        assert secret not in task_logs
        files = [p for p in (home.airflow_home() / "logs").rglob("*") if p.is_file()]
        assert not [p for p in files if secret in p.read_text(errors="replace")]
        assert_secrets_dirs_removed(made)   # the 0600 file and its folder are gone
    finally:
        cluster.stop(secure)


def test_mirror_dag_on_a_spark_standalone_cluster(spark_standalone, source_conf, target_conf, unique, tmp_path,
                                                  monkeypatch):
    topic = create_topic(source_conf, unique("sa"), 4)
    seed_sequence(source_conf, topic, 4, 100)
    name = unique("m")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_STANDALONE", json.dumps(
        {"conn_type": "spark", "host": spark_standalone, "extra": {"deploy-mode": "client"}}))
    use_mirrors(tmp_path, monkeypatch, {**mirror_def(name, [topic]),
                                        "airflow": {"schedule": None, "retries": 0, "spark_conn_id": "spark_standalone"},
                                        "spark_conf": {"spark.executor.cores": "1", "spark.cores.max": "2"}})
    dr = run_dag(f"eosmirror__{name}")
    assert str(dr.state) == "success", task_states(dr)
    result = xcoms(dr)["copy"]   # the run report travels by XCom, not by a local file
    executors = [s["executor"] for s in result["slots"] if s.get("executor")]
    assert executors and all(".zip" in e["eosmirror"] for e in executors)   # shipped with --py-files
    assert result["records"] == 400
    verify = cli("verify", name, "--config", os.environ["EOSMIRROR_CONFIG"])
    assert verify.returncode == 0 and "all identical" in verify.stdout, verify.stdout + verify.stderr
