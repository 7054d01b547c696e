"""Foundation: real brokers started by the project, transactions, Spark workers on our interpreter."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import create_topic, producer, read_all

pytestmark = pytest.mark.integration


def test_transaction_commit_and_abort_visibility(target_conf, unique):
    topic = create_topic(target_conf, unique("txn"))
    p = producer(target_conf, **{"transactional.id": unique("tx")})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=f"committed-{i}".encode(), partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"aborted-{i}".encode(), partition=0)
    p.flush(30)                      # the aborted records really reach the log
    p.abort_transaction(30)

    committed = [r.value for r in read_all(target_conf, topic, read_committed=True)]
    everything = [r.value for r in read_all(target_conf, topic, read_committed=False)]
    assert committed == [f"committed-{i}".encode() for i in range(5)]
    assert everything == committed + [f"aborted-{i}".encode() for i in range(3)]


def _read_partition_on_executor(args):
    import confluent_kafka

    import eosmirror
    from eosmirror.kafka import readers
    from eosmirror.kafka.cluster import Cluster

    conf, topic, partition = args
    records = readers.read_all(Cluster.from_settings("source", conf), topic, partition)
    return {"partition": partition, "values": [r.value.decode() for r in records], "python": sys.executable,
            "eosmirror": eosmirror.__file__, "librdkafka": confluent_kafka.libversion()[0]}


def local_session(submit, app_name: str, master: str = "local[2]"):
    """A SparkSession on this machine whose workers run the project's interpreter (submit's environment)."""
    os.environ.update(submit.process_env())
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master)
    for key, value in {**submit.base_conf(app_name), "spark.ui.enabled": "false"}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def test_spark_local_tasks_import_eosmirror_and_read_the_source(source_conf, unique):
    from eosmirror.spark import submit

    topic = create_topic(source_conf, unique("spark"), partitions=3)
    p = producer(source_conf)
    for i in range(30):
        p.produce(topic, value=f"v{i}".encode(), partition=i % 3)
    p.flush(30)
    spark = local_session(submit, "eosmirror-foundation-test")
    try:
        rows = spark.sparkContext.parallelize([(source_conf, topic, k) for k in range(3)], 3) \
            .map(_read_partition_on_executor).collect()
    finally:
        spark.stop()
    assert sorted(v for r in rows for v in r["values"]) == sorted(f"v{i}" for i in range(30))
    assert {r["python"] for r in rows} == {sys.executable}   # workers run the project's interpreter
    assert all(r["eosmirror"].endswith("eosmirror/__init__.py") for r in rows)


def _eosmirror(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "EOSMIRROR_HOME": str(home), "EOSMIRROR_SOURCE_PORT": "19192",
           "EOSMIRROR_TARGET_PORT": "19292"}
    return subprocess.run([sys.executable, "-m", "eosmirror.cli", *args], env=env, capture_output=True, text=True,
                          timeout=180)


def _java_pids_with(text: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if text in (proc / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(proc.name))
            except OSError:
                pass
    return pids


def test_local_up_twice_is_harmless_and_down_leaves_no_kafka_process(tmp_path, monkeypatch):
    home = tmp_path / "home"
    first = _eosmirror(home, "local", "up")
    assert first.returncode == 0, first.stderr
    assert "127.0.0.1:19192" in first.stdout and "127.0.0.1:19292" in first.stdout
    pids = _java_pids_with(str(home / "kafka"))
    assert len(pids) == 2
    second = _eosmirror(home, "local", "up")
    assert second.returncode == 0, second.stderr
    assert sorted(_java_pids_with(str(home / "kafka"))) == sorted(pids)   # nothing restarted, nothing doubled
    status = _eosmirror(home, "local", "status")
    assert status.stdout.count(" up ") == 2
    down = _eosmirror(home, "local", "down")
    assert "source, target" in down.stdout
    assert _java_pids_with(str(home / "kafka")) == []
    assert "nothing was running" in _eosmirror(home, "local", "down").stdout
    # `down --all` (what `make down` and CI use) also stops extra clusters tests start elsewhere
    from eosmirror_tools.kit import cluster

    monkeypatch.setenv("EOSMIRROR_HOME", str(home))
    cluster.start(cluster.LocalCluster("extra", 19692))
    assert len(_java_pids_with(str(home / "kafka"))) == 1
    assert "extra" in _eosmirror(home, "local", "down", "--all").stdout
    assert _java_pids_with(str(home / "kafka")) == []


def test_start_failure_prints_the_broker_log_tail(tmp_path, monkeypatch):
    from eosmirror_tools.kit import cluster

    monkeypatch.setenv("EOSMIRROR_HOME", str(tmp_path))
    broken = cluster.LocalCluster("broken", 19392)
    broken.data_dir.mkdir(parents=True)
    (broken.data_dir / "meta.properties").write_text("version=1\ncluster.id=not-a-valid-id\nnode.id=7\n")
    with pytest.raises(cluster.LocalClusterError) as info:
        cluster.start(broken, timeout=60)
    message = str(info.value)
    assert "exited during start" in message and str(broken.log_file) in message
    assert "ERROR" in message or "Exception" in message   # the tail of the broker's own log
    assert cluster.running_pid(broken) is None


def test_a_port_held_without_listening_is_named_in_the_start_failure(tmp_path, monkeypatch):
    """A port bound by another socket that does not listen (what an outgoing connection's ephemeral
    port looks like) passes the connect probe; the broker's bind then fails and the error must say
    so, not only show the broker's orderly shutdown."""
    import socket

    from eosmirror_tools.kit import cluster

    monkeypatch.setenv("EOSMIRROR_HOME", str(tmp_path))
    taken = cluster.LocalCluster("taken", 19792)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", taken.port))
        with pytest.raises(cluster.LocalClusterError) as info:
            cluster.start(taken, timeout=60)
    assert "Address already in use" in str(info.value).split("last lines:")[0]
    assert cluster.running_pid(taken) is None


def test_the_suite_runs_on_its_own_clusters_and_home_never_the_demos(clusters):
    from eosmirror import paths
    from eosmirror_tools.kit.cluster import DEFAULT_PORTS
    from tests.conftest import TEST_HOME

    assert paths.home() == TEST_HOME
    assert {c.port for c in clusters.values()}.isdisjoint(DEFAULT_PORTS.values())
    assert all(TEST_HOME in c.data_dir.parents for c in clusters.values())


def test_the_local_brokers_write_small_index_files(clusters, target_conf, unique):
    """Issue #44: at the broker default (10 MiB sparse index files) this machine's first write into each
    partition's index took ~2.8 ms, so the markers of a commit over 5,000 fresh partitions took ~50 s.
    The broker reports the setting it runs with, and a fresh partition's index files on disk have its size."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    from eosmirror_tools.kit.cluster import BROKER_DEFAULTS

    size = int(BROKER_DEFAULTS["log.index.size.max.bytes"])
    assert size <= 1024 * 1024
    resource = ConfigResource("broker", "1")
    admin = AdminClient(target_conf)
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["log.index.size.max.bytes"].value == str(size)
    topic = create_topic(target_conf, unique("idx"))
    p = producer(target_conf)
    p.produce(topic, value=b"x", partition=0)
    assert p.flush(30) == 0          # a segment's index files exist once the broker appended to it
    folder = clusters["target"].data_dir / f"{topic}-0"
    sizes = {p.suffix: p.stat().st_size for p in folder.glob("*index")}
    assert set(sizes) == {".index", ".timeindex"} and max(sizes.values()) <= size, sizes
