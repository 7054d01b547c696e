"""import-mm2 on three real-world MirrorMaker 2 files: the output loads, means what MM2 meant,
lists every setting it did not translate, and never holds a secret."""

from pathlib import Path

import pytest
import yaml

from eosmirror import cli
from eosmirror.core import config, mm2import

DATA = Path(__file__).resolve().parents[1] / "data" / "mm2"
FILES = ["connect-mirror-maker.properties", "strimzi-style.properties", "bidirectional.properties"]


def imported(name: str, **kwargs):
    text = (DATA / name).read_text()
    rendered = mm2import.render(mm2import.translate(text, **kwargs), name)
    return rendered, config.parse(yaml.safe_load(rendered), Path(name))


@pytest.mark.parametrize("name", FILES)
def test_every_file_yields_a_config_the_loader_accepts(name):
    rendered, mirrors = imported(name)
    assert mirrors.mirrors, rendered


@pytest.mark.parametrize("name", FILES)
def test_every_setting_is_translated_or_listed_never_dropped(name):
    props = mm2import.parse_properties((DATA / name).read_text())
    translation = mm2import.translate((DATA / name).read_text())
    rendered = mm2import.render(translation, name)
    listed = {key for key in props if f"#   {mm2import.shown(key, props[key])}:" in rendered}
    assert set(translation.translated) | listed == set(props)
    assert not set(translation.translated) & listed


def test_kafka_sample_two_prefixed_flows_with_cycle_guard():
    _, mirrors = imported("connect-mirror-maker.properties")
    a_to_b, b_to_a = mirrors.get("A-to-B"), mirrors.get("B-to-A")
    assert a_to_b.source.config["bootstrap.servers"] == "A_host1:9092,A_host2:9092,A_host3:9092"
    assert (a_to_b.replication_policy, a_to_b.source_alias, a_to_b.target_alias) == ("prefix", "A", "B")
    assert (b_to_a.source_alias, b_to_a.target_alias) == ("B", "A")
    assert a_to_b.topics == (".*",) and a_to_b.slots == 1 and a_to_b.target_replication_factor == 1
    assert a_to_b.sync_topic_acls is True   # MM2's default


def test_strimzi_style_identity_secrets_as_env_and_groups_noted():
    rendered, mirrors = imported("strimzi-style.properties")
    m = mirrors.get("cluster-a-to-cluster-b")
    assert m.replication_policy == "identity" and m.slots == 4
    assert m.topics == ("orders.*", "payments", "inventory-.*")
    assert m.topics_exclude == (".*-test", r"orders\.dlq")
    assert m.source.config["sasl.password"] == "${CLUSTER_A_SASL_PASSWORD}"
    assert m.source.config["sasl.username"] == "mm2-user"
    assert m.target.config["sasl.password"] == "${CLUSTER_B_SASL_PASSWORD}"
    assert "retention.bytes" not in m.sync_topic_configs and "retention.ms" in m.sync_topic_configs
    assert m.sync_topic_acls is False   # sync.topic.acls.enabled = false
    for secret in ("s3cr3t-from-a-kubernetes-secret", "another-secret", "truststore-pass"):
        assert secret not in rendered
    assert "#   sync.group.offsets.enabled = true" in rendered
    assert "#   groups = .*" in rendered
    assert "cluster-a.ssl.truststore.password = <hidden>" in rendered


def test_bidirectional_separator_per_flow_overrides_and_default_excludes_dropped():
    rendered, mirrors = imported("bidirectional.properties")
    east, west = mirrors.get("us-east-to-us-west"), mirrors.get("us-west-to-us-east")
    assert east.replication_separator == "_" and east.source_alias == "us-east"
    assert east.slots == 8 and west.slots == 2
    assert east.topics_exclude == ("_schemas",) and west.topics_exclude == (r"audit\..*",)
    from eosmirror.core import naming

    assert naming.policy_of(east).target_topic("orders") == "us-east_orders"
    assert naming.select_topics(["us-west_orders", "orders"], east.topics, east.topics_exclude,
                                east.target_alias, east.replication_separator) == ["orders"]
    assert "us-west.producer.compression.type = zstd" in rendered


def test_connection_style_names_clusters_after_aliases():
    _, mirrors = imported("strimzi-style.properties", clusters="connection")
    m = mirrors.get("cluster-a-to-cluster-b")
    assert (m.source.connection, m.target.connection) == ("cluster-a", "cluster-b")


def test_properties_parser_handles_continuations_separators_and_comments():
    props = mm2import.parse_properties("# c\n! c\na = 1\nb:2\nc 3\nd = x \\\n    y\n")
    assert props == {"a": "1", "b": "2", "c": "3", "d": "x y"}


def test_no_enabled_flow_says_so():
    out = mm2import.translate("clusters = A, B\nA->B.enabled = false\n")
    assert out.mirrors == [] and "No enabled flow" in mm2import.render(out, "x")


def test_cli_prints_a_loadable_file(tmp_path, capsys):
    assert cli.main(["import-mm2", str(DATA / "bidirectional.properties")]) == 0
    printed = capsys.readouterr().out
    assert config.parse(yaml.safe_load(printed), tmp_path / "m.yaml").names() == [
        "us-east-to-us-west", "us-west-to-us-east"]
    assert cli.main(["import-mm2", str(tmp_path / "missing.properties")]) == 2


def test_topic_acl_sync_follows_mm2_per_flow_and_its_interval_is_explained():
    out = mm2import.translate("clusters = A, B\nA->B.enabled = true\nB->A.enabled = true\n"
                              "B->A.sync.topic.acls.enabled = false\nsync.topic.acls.interval.seconds = 60\n")
    assert [m["sync_topic_acls"] for m in out.mirrors] == [True, False]
    assert any("sync.topic.acls.interval.seconds" in u and "syncs topic ACLs" in u for u in out.unmapped)
