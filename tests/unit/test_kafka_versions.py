"""Local clusters of a chosen Kafka version (issue #53): which release a request means, ZooKeeper or KRaft, the
broker settings of each mode, the default cluster left exactly as it was, each line's tool names, and an
unknown version refused by `eosmirror local up` before anything starts."""

from __future__ import annotations

import pytest

from eosmirror.cliapp import main
from eosmirror_tools.kit import cluster, console, runtime


def test_a_line_means_its_release_and_a_release_of_a_known_line_itself():
    assert runtime.resolve_version(None) == runtime.kafka_version()
    assert runtime.resolve_version("2.8") == runtime.LINES["2.8"] == "2.8.2"
    assert runtime.resolve_version(" 3.9 ") == "3.9.2"
    assert runtime.resolve_version("3.9.0") == "3.9.0"


@pytest.mark.parametrize("asked", ["2.7", "2.7.1", "5.0", "3.9.x", "latest", "4"])
def test_an_unknown_version_is_refused_naming_the_available_ones(asked):
    with pytest.raises(runtime.KafkaRuntimeError) as info:
        runtime.resolve_version(asked)
    text = str(info.value)
    assert f"unknown Kafka version {asked!r}" in text
    assert "2.8 (2.8.2, ZooKeeper)" in text and "3.9 (3.9.2, KRaft)" in text and "fetched here:" in text


def test_zookeeper_before_3_3_kraft_from_3_3():
    assert runtime.uses_zookeeper("2.8.2") and runtime.uses_zookeeper("3.2.3")
    assert not runtime.uses_zookeeper("3.3.0") and not runtime.uses_zookeeper("4.4.0")
    assert runtime.log4j1("3.9.1") and not runtime.log4j1("4.0.0")


def test_the_default_cluster_is_unchanged_by_versions():
    """The pom's version: no version line in its config (a running default cluster is not restarted after
    an upgrade of this code), its data where it always was, and the same java command line."""
    plain = cluster.LocalCluster("source", 17300)
    assert cluster.local_cluster("source").version == "" and plain.default_release and plain.jars is None
    assert plain.data_dir.name == "data"
    assert cluster.VERSION_LINE not in cluster._config_text(plain)
    assert "process.roles" in plain.properties() and "zookeeper.connect" not in plain.properties()
    explicit = cluster.LocalCluster("source", 17300, version=runtime.kafka_version())
    assert explicit.data_dir == plain.data_dir and explicit.properties() == plain.properties()
    command = runtime.java_command("kafka.Kafka", "x.properties")
    assert command == runtime.java_command("kafka.Kafka", "x.properties", version=None)
    assert not any(arg.startswith("-Dlog4j.configuration=") for arg in command)


def test_a_2_8_cluster_runs_with_its_own_zookeeper_on_the_controller_port():
    old = cluster.LocalCluster("source", 17300, version="2.8.2")
    props = old.properties()
    assert old.zookeeper and props["zookeeper.connect"] == "127.0.0.1:17301"
    assert old.zookeeper_properties()["clientPort"] == "17301"
    assert not {"process.roles", "node.id", "controller.listener.names", "controller.quorum.voters"} & set(props)
    assert not any(k.startswith("share.") for k in props)
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:17300" and props["broker.id"] == "1"
    assert props["transaction.state.log.replication.factor"] == "1"
    assert old.data_dir.name == "data-2.8.2" and old.zookeeper_dir.name == "zookeeper-2.8.2"
    assert cluster.VERSION_LINE + "2.8.2" in cluster._config_text(old)


def test_a_3_9_cluster_runs_kraft_without_the_4_x_share_settings():
    props = cluster.LocalCluster("target", 27300, version="3.9.1").properties()
    assert props["process.roles"] == "broker,controller" and "zookeeper.connect" not in props
    assert not any(k.startswith("share.") for k in props)


def test_a_secure_cluster_runs_the_default_version_only():
    with pytest.raises(cluster.LocalClusterError, match="SASL cluster runs Kafka"):
        cluster.LocalCluster("secure", 17300, sasl_users={"admin": "x"}, version="3.9.1").properties()


def test_each_lines_console_consumer_and_its_option_names():
    assert console.console_consumer_class("2.8.2") == "kafka.tools.ConsoleConsumer"
    assert console.console_consumer_class("3.9.1") == "org.apache.kafka.tools.consumer.ConsoleConsumer"
    assert console.formatter_option("3.9.1") == "--property"
    assert console.formatter_option("4.3.1") == "--formatter-property"
    # find-hanging's stdout as Kafka 4.4.0 printed it: the client's log lines, then the table
    logged = ("[2026-11-28 22:23:49,926] INFO Kafka version: 4.4.0 (org.apache.kafka.common.utils.internals."
              "AppInfoParser)\nTopic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\t"
              "LastTimestamp\tDuration(min)\t\n")
    assert console.hanging_rows(logged) == []
    assert console.hanging_rows(logged + "orders\t0\t5\t0\t1\t10\t1795904629921\t16\n") == [
        "orders\t0\t5\t0\t1\t10\t1795904629921\t16"]
    with pytest.raises(console.ConsoleError, match="no table header"):
        console.hanging_rows("[2026-11-28 22:23:49,926] ERROR something\n")


def test_local_up_refuses_an_unknown_version_before_starting_anything(capsys, monkeypatch):
    started = []
    monkeypatch.setattr(cluster, "launch", lambda c: started.append(c) or 0)
    monkeypatch.setattr(runtime, "ensure_kafka_lib", lambda version=None: started.append(version))
    assert main(["local", "up", "--source-version", "2.7"]) == 2
    err = capsys.readouterr().err
    assert "the source cluster: unknown Kafka version '2.7'" in err and "available: 2.8 (2.8.2, ZooKeeper)" in err
    assert started == []


def test_mirrormaker_2_of_another_version_has_its_own_folder_the_default_keeps_its_own():
    default = runtime.kafka_version()
    assert runtime.lib_dir(default, mm2=True) == runtime.lib_dir(default)   # the default path is unchanged
    assert runtime.lib_dir("3.9.2", mm2=True).name == "3.9.2+mm2"           # the broker folder stays broker-only
    assert runtime.lib_dir("3.9.2").name == "3.9.2"
    assert [v for v in ("2.8.2", "3.4.1", "3.5.0", "3.9.2", "4.3.1") if runtime.has_exactly_once_mm2(v)] == [
        "3.5.0", "3.9.2", "4.3.1"]
