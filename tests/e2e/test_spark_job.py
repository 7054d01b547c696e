"""The mirror job through spark-submit on Spark local: retries, overlap, dry run, result JSON."""

import json
import re
import subprocess

import pytest
from confluent_kafka.admin import AdminClient

from eosmirror.core import naming
from eosmirror.spark import submit
from tests.helpers import cli, create_topic, faults_env, mirror, read_all, seed_sequence, values, write_mirror_file

pytestmark = pytest.mark.e2e


def spark_submit(config_file, name, master="local[2]", env=None, background=False, extra=(), conf=None):
    cmd = submit.command(master, submit.job_arguments(name, config_path=str(config_file), **dict(extra)),
                         submit.spark_conf(dict(conf or {}), f"test-{name}"))
    full_env = {**submit.process_env(), **(env or {})}
    if background:
        return subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=300)


def expected(partitions, count):
    return {k: [f"{k}-{n}".encode() for n in range(count)] for k in range(partitions)}


def test_worker_killed_mid_transaction_is_retried_by_spark_and_copies_every_record_once(
        source_conf, target_conf, unique, tmp_path):
    topic = create_topic(source_conf, unique("spk"), partitions=4)
    seed_sequence(source_conf, topic, 4, 400)
    m = mirror(unique("m"), [topic], slots=2)
    config_file = write_mirror_file(tmp_path / "mirrors.yaml", m)
    result = tmp_path / "result.json"
    kill_once = faults_env({"point": "in_transaction", "action": "kill", "slot": 0, "once": str(tmp_path / "k")})
    done = spark_submit(config_file, m.name, master="local[2,2]", env=kill_once,
                        extra={"result_json": str(result)}.items())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (tmp_path / "k").exists()                     # the fault really fired: one attempt was SIGKILLed
    report = json.loads(result.read_text())
    assert report["status"] == "ok" and report["records"] == 1600
    assert {k: values(read_all(target_conf, topic, k)) for k in range(4)} == expected(4, 400)


def test_two_spark_runs_at_once_copy_every_record_once(source_conf, target_conf, unique, tmp_path):
    topic = create_topic(source_conf, unique("twin"), partitions=3)
    seed_sequence(source_conf, topic, 3, 300)
    m = mirror(unique("m"), [topic], slots=3)
    config_file = write_mirror_file(tmp_path / "mirrors.yaml", m)
    slow = faults_env({"point": "in_transaction", "action": "sleep", "seconds": 1})
    runs = [spark_submit(config_file, m.name, env=slow, background=True) for _ in range(2)]
    outputs = [r.communicate(timeout=300)[0] for r in runs]
    assert all(r.returncode in (0, 1) for r in runs), outputs
    again = spark_submit(config_file, m.name)
    assert again.returncode == 0, again.stdout[-2000:]
    assert {k: values(read_all(target_conf, topic, k)) for k in range(3)} == expected(3, 300)


def test_result_json_reports_ranges_records_bytes_times_and_age(source_conf, target_conf, unique, tmp_path):
    topic = create_topic(source_conf, unique("rep"), partitions=2)
    seed_sequence(source_conf, topic, 2, 50)
    m = mirror(unique("m"), [topic], slots=2)
    config_file = write_mirror_file(tmp_path / "mirrors.yaml", m)
    result = tmp_path / "r.json"
    done = spark_submit(config_file, m.name, extra={"result_json": str(result)}.items())
    assert done.returncode == 0, done.stdout[-2000:]
    report = json.loads(result.read_text())
    assert "records" in done.stdout and m.name in done.stdout          # the human summary on stdout
    partitions = [p for s in report["slots"] for p in s["partitions"]]
    assert sorted((p["partition"], p["start"], p["end"], p["records"]) for p in partitions) == [(0, 0, 50, 50), (1, 0, 50, 50)]
    assert all(p["bytes"] > 0 and p["record_age_ms"] >= 0 for p in partitions)
    assert all(s["transactions"] >= 1 and s["transaction_seconds"] > 0 for s in report["slots"] if s["partitions"])
    assert report["records"] == 100 and report["bytes"] == sum(p["bytes"] for p in partitions)
    # Spark was started while the driver planned (spark/runner.start_spark_early), and it did not fail.
    # (spark-submit prints the Python driver's log on its stdout)
    assert "Spark started while the driver planned: context" in done.stdout, done.stdout[-3000:]
    assert "starting Spark ahead of the slots failed" not in done.stdout
    # A bounded run starts no Spark UI (submit.for_run); one given spark.ui.enabled=true has one.
    assert "Spark UI off" in done.stdout
    seed_sequence(source_conf, topic, 2, 5, prefix="ui-")
    ui = spark_submit(config_file, m.name, conf={"spark.ui.enabled": "true", "spark.ui.port": "0"})
    assert ui.returncode == 0, ui.stdout[-2000:]
    assert re.search(r"Spark UI http://[^ ]+:\d+", ui.stdout), ui.stdout[-3000:]


def test_dry_run_and_plan_write_nothing(source_conf, target_conf, unique, tmp_path):
    topic = create_topic(source_conf, unique("dry"), partitions=2)
    seed_sequence(source_conf, topic, 2, 10)
    m = mirror(unique("m"), [topic], slots=2)
    config_file = write_mirror_file(tmp_path / "mirrors.yaml", m)
    planned = cli("plan", m.name, "--config", str(config_file))
    assert planned.returncode == 0, planned.stderr
    assert f"{topic}[0] -> {topic}" in planned.stdout and "start_from" in planned.stdout and " 10 " in planned.stdout
    dry = spark_submit(config_file, m.name, extra={"dry_run": True}.items())
    assert dry.returncode == 0, dry.stdout[-2000:]
    names = AdminClient(target_conf).list_topics(timeout=10).topics
    assert topic not in names and naming.state_topic(m.name) not in names
