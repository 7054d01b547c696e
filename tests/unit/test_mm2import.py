"""import-mm2 on three real-world MirrorMaker 2 files: the output loads, means what MM2 meant,
lists every setting it did not translate, and never holds a secret."""

import re
from pathlib import Path

import pytest
import yaml

from eosmirror import cli
from eosmirror.core import config, mm2import, mm2props
from eosmirror.core.errors import ConfigError

DATA = Path(__file__).resolve().parents[1] / "data" / "mm2"
FILES = ["connect-mirror-maker.properties", "strimzi-style.properties", "bidirectional.properties"]


def imported(name: str, **kwargs):
    rendered = mm2import.render(mm2import.translate((DATA / name).read_bytes(), **kwargs), name)
    return rendered, config.parse(yaml.safe_load(rendered), Path(name))


@pytest.mark.parametrize("name", FILES)
def test_every_file_yields_a_config_the_loader_accepts(name):
    rendered, mirrors = imported(name)
    assert mirrors.mirrors, rendered


@pytest.mark.parametrize("name", FILES)
def test_every_setting_is_translated_or_listed_never_dropped(name):
    props = mm2props.parse((DATA / name).read_bytes()).values
    translation = mm2import.translate((DATA / name).read_bytes())
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
    # `orders\.dlq` in the file is the regex `orders.dlq` for MM2: Java's Properties drops the backslash.
    assert m.topics_exclude == (".*-test", "orders.dlq", r"\..*")
    assert m.source.config["sasl.password"] == "${CLUSTER_A_SASL_PASSWORD}"
    assert m.source.config["sasl.username"] == "mm2-user"
    assert m.target.config["sasl.password"] == "${CLUSTER_B_SASL_PASSWORD}"
    assert "retention.bytes" not in m.sync_topic_configs and "retention.ms" in m.sync_topic_configs
    assert m.sync_topic_acls is False   # sync.topic.acls.enabled = false
    for secret in ("s3cr3t-from-a-kubernetes-secret", "another-secret", "truststore-pass"):
        assert secret not in rendered
    assert m.groups.include == (".*",) and m.groups.schedule == "*/1 * * * *"   # synced every 60 s by MM2
    assert m.groups.exclude == ("console-consumer-.*", "connect-.*", "__.*", r"eosmirror\..*", "eosmirror-.*")
    assert "cluster-a.ssl.truststore.password = <hidden>" in rendered


def test_bidirectional_separator_per_flow_overrides_and_default_excludes_dropped():
    rendered, mirrors = imported("bidirectional.properties")
    east, west = mirrors.get("us-east-to-us-west"), mirrors.get("us-west-to-us-east")
    assert east.replication_separator == "_" and east.source_alias == "us-east"
    assert east.slots == 8 and west.slots == 2
    # Java's Properties reads `.*\.replica` as `.*.replica` and `audit\..*` as `audit..*`: MM2's regexes.
    assert east.topics_exclude == (".*.replica", "_schemas", r"\..*")
    assert west.topics_exclude == (".*.replica", "audit..*", r"\..*")
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
    props = mm2props.parse(b"# c\n! c\na = 1\nb:2\nc 3\nd = x \\\n    y\ne = orders\\.t\n")
    assert props.values == {"a": "1", "b": "2", "c": "3", "d": "x y", "e": "orders.t"}
    assert props.lines == {"a": 3, "b": 4, "c": 5, "d": 6, "e": 8}


def test_no_enabled_flow_says_so():
    out = mm2import.translate("clusters = A, B\nA->B.enabled = false\n")
    assert out.mirrors == [] and "No enabled flow" in mm2import.render(out, "x")


def test_cli_prints_a_loadable_file(tmp_path, capsys):
    assert cli.main(["import-mm2", str(DATA / "bidirectional.properties")]) == 0
    printed = capsys.readouterr().out
    assert config.parse(yaml.safe_load(printed), tmp_path / "m.yaml").names() == [
        "us-east-to-us-west", "us-west-to-us-east"]
    assert cli.main(["import-mm2", str(tmp_path / "missing.properties")]) == 2


FLOWS = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"


def test_topic_acl_sync_follows_mm2_per_flow_and_its_interval_is_explained():
    out = mm2import.translate(FLOWS + "B->A.enabled = true\n"
                              "B->A.sync.topic.acls.enabled = false\nsync.topic.acls.interval.seconds = 60\n")
    assert [m["sync_topic_acls"] for m in out.mirrors] == [True, False]
    assert any("sync.topic.acls.interval.seconds" in u and "syncs topic ACLs" in u for u in out.unmapped)


# --- bad input: a clear error naming the key and its line, exit 2, nothing written --------------------

@pytest.mark.parametrize("text, expected", [
    (b"clusters = A, B\nB.bootstrap.servers = b:1\n\nA->B.enabled = true\n",
     "mm2.properties line 4: `A->B.enabled` enables a flow, but `A.bootstrap.servers` is not set"),
    (FLOWS.encode() + b"x = 1\nA->B.replication.policy.class = com.example.MyPolicy\n",
     "mm2.properties line 6: `A->B.replication.policy.class` = com.example.MyPolicy: not a replication policy"),
    (FLOWS.encode() + b"A->B.topics = orders, \\\n   , pay\n",
     "mm2.properties line 5: `A->B.topics` = orders, , pay: an empty item in the comma list"),
    (FLOWS.encode() + b"A.sasl.password = x\\u00zz\n", "mm2.properties line 5: the setting that starts here holds "
                                                     "a malformed \\uXXXX escape"),
])
def test_bad_input_names_key_and_line_exits_2_and_writes_nothing(text, expected, tmp_path, capsys):
    source, out = tmp_path / "mm2.properties", tmp_path / "mirrors.yaml"
    source.write_bytes(text)
    assert cli.main(["import-mm2", str(source), "--output", str(out)]) == 2
    assert cli.main(["import-mm2", str(source)]) == 2
    printed = capsys.readouterr()
    assert expected in printed.err and printed.out == "", printed.err
    assert not out.exists() and list(tmp_path.iterdir()) == [source]
    assert "00zz" not in printed.err   # part of a password


def test_an_unreadable_file_is_named(tmp_path, capsys):
    assert cli.main(["import-mm2", str(tmp_path / "missing.properties"), "-o", str(tmp_path / "m.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err and not (tmp_path / "m.yaml").exists()


def test_a_custom_filter_class_is_refused_unless_allow_partial(tmp_path, capsys):
    source, out = tmp_path / "mm2.properties", tmp_path / "mirrors.yaml"
    source.write_text(FLOWS + "\ntopic.filter.class = com.example.TeamFilter\n")
    assert cli.main(["import-mm2", str(source), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "mm2.properties line 6: `topic.filter.class` = com.example.TeamFilter" in err and not out.exists()
    assert cli.main(["import-mm2", str(source), "-o", str(out), "--allow-partial"]) == 0
    written = out.read_text()
    assert "# NOT WHAT MIRRORMAKER 2 SELECTS" in written and "com.example.TeamFilter: a filter class" in written
    assert config.parse(yaml.safe_load(written), out).names() == ["A-to-B"]


@pytest.mark.parametrize("pattern, differs", [
    (r"orders\.t", False), (r"\d+-[a-z_]+", False), (r"a&&b", False), (r"x\\p", False), (r"(?i)orders", False),
    (r"\p{Lower}+", True), (r"\Qa.b\E", True), (r"[a-z&&[^x]]", True), (r"[a[b]]", True), (r"a\z", True),
    (r"(?<name>a)", True), (r"(?P<name>a)", True), (r"a\v", True), (r"a(", True),
])
def test_patterns_java_reads_differently_are_found(pattern, differs):
    from eosmirror.core import mm2select

    assert (mm2select.regex_difference(pattern, later=False) is not None) is differs
    assert mm2select.regex_difference("(?i)a", later=True) is not None   # leaks onto the next pattern in Java


def test_a_java_only_pattern_makes_the_import_partial():
    out = mm2import.translate((FLOWS + "A->B.groups = \\\\p{Alpha}+\n").encode())
    assert out.partial == ["A->B: mm2.properties line 5: `A->B.groups`: pattern `\\p{Alpha}+`: a \\p{...} class "
                           "means something else (or nothing) in Python; left out of the mirror (it selects less "
                           "than MM2)"], out.partial
    assert out.mirrors[0]["groups"]["include"] == ["(?!)"]   # nothing left: selects no group


def test_a_pattern_error_shows_the_pattern_as_written_in_the_mirror_file():
    mirror = {"name": "m", "source": {"local": "source"}, "target": {"local": "target"}, "topics": ["orders\\.(t"]}
    with pytest.raises(ConfigError) as info:
        config.parse({"mirrors": [mirror]}, Path("mirrors.yaml"))
    assert "`orders\\.(t` is not allowed; expected a valid regular expression" in str(info.value)
    assert "\\\\" not in str(info.value), str(info.value)
    from eosmirror.core import naming

    assert naming.as_written(("orders\\.t", "pay")) == "`orders\\.t`, `pay`"


def test_a_pattern_python_cannot_read_is_left_out_of_includes_and_refused_in_excludes():
    out = mm2import.translate((FLOWS + "A->B.topics = orders, \\\\p{Lower}+\n").encode())
    assert out.mirrors[0]["topics"] == ["orders"]
    assert out.partial and "left out of the mirror (it selects less than MM2)" in out.partial[0]
    for key in ("topics.exclude", "groups.exclude", "config.properties.exclude"):
        with pytest.raises(ConfigError, match=rf"line 5: `A->B.{re.escape(key)}`: pattern `x\\Qa\\E`: .*cannot "
                                              rf"exclude what it excludes"):
            mm2import.translate((FLOWS + f"A->B.{key} = x\\\\Qa\\\\E\n").encode())


def test_top_level_client_settings_apply_to_every_cluster_as_in_mm2():
    """MirrorMakerConfig.clusterProps: `A.x` over a top-level `x` (checked against MM2 4.3.1)."""
    out = mm2import.translate(b"clusters = A, B\nbootstrap.servers = shared:9092\nA.bootstrap.servers = a:9092\n"
                              b"security.protocol = SASL_SSL\nsasl.mechanism = PLAIN\nA->B.enabled = true\n"
                              b"sasl.jaas.config = x required username=\"u\" password=\"pw-top\";\n")
    source, target = out.mirrors[0]["source"]["config"], out.mirrors[0]["target"]["config"]
    assert (source["bootstrap.servers"], target["bootstrap.servers"]) == ("a:9092", "shared:9092")
    assert source["security.protocol"] == target["security.protocol"] == "sasl_ssl"
    assert (source["sasl.password"], target["sasl.password"]) == ("${A_SASL_PASSWORD}", "${B_SASL_PASSWORD}")
    assert "pw-top" not in mm2import.render(out, "x")
