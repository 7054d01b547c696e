"""The mirror import-mm2 writes selects what MirrorMaker 2 selects, name by name: MM2's own classes
(Kafka 4.3.1's connect-mirror: MirrorMakerConfig builds the flow's connector configs, then
MirrorSourceConnector.shouldReplicateTopic, the configured group filter and config-property filter --
tests/integration/java/MM2Selection.java) against eosmirror's selection functions on the imported
mirror, and one `eosmirror plan` against the project's brokers."""

from __future__ import annotations

import re

import pytest
import yaml

from eosmirror.core import config, groupfailover, mm2import, mm2props, naming, secrets
from tests import helpers
from tests.integration import mm2java

pytestmark = pytest.mark.integration

TOPICS = ["orders", "orders.t", "ordersXt", "orders.t.v2", "Orders.T", "payments", "pay.x", "payXx", "pay",
          "inventory-eu", "inventory", "orders-dlq", "orders.dlq", "audit.log", "auditXlog", "test-1", "_schemas",
          "a.b.c", "B.orders", "B_orders", "A.orders", "A_orders", ".hidden", "x.internal", "x-internal",
          "mm2-offsets.A.internal", "A.checkpoints.internal", "foo.replica", "fooXreplica", "__consumer_offsets",
          "heartbeats", "B.heartbeats", "eosmirror-state.m.internal"]
GROUPS = ["app", "app.1", "appX1", "App.1", "orders-consumer", "legacy-app", "team.a.app", "console-consumer-42",
          "connect-mm2", "__internal", "eosmirror.A-to-B", "eosmirror-A-to-B-lag"]
CONFIGS = list(config.DEFAULT_SYNC_TOPIC_CONFIGS + config.NEVER_SYNCED_CONFIGS)
NAMES = {"topic": TOPICS, "group": GROUPS, "config": CONFIGS}
CLUSTERS = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"

# Each file: its text after `clusters` and the flows to check. Backslashes are as a user types them.
FILES = {
    "the-issue": ("A->B.enabled = true\nA->B.topics = orders\\.t\nA->B.groups = app\\\\..*\n", [("A", "B")]),
    "escaped-as-java-needs": ("A->B.enabled = true\nA->B.topics = orders\\\\..*, pay\\\\.x\n"
                              "A->B.topics.exclude = orders\\\\.t\\\\.v2\n", [("A", "B")]),
    "excludes-and-overrides": (
        "A->B.enabled = true\nB->A.enabled = true\ntopics = .*\ntopics.exclude = .*-dlq, audit\\\\..*, _schemas\n"
        "A->B.topics.exclude = .*\\\\.dlq\ngroups = .*\ngroups.exclude = legacy-.*\nB->A.groups = app.*, team\\\\..*\n"
        "B->A.groups.exclude = appX.*\nreplication.policy.separator = _\n", [("A", "B"), ("B", "A")]),
    "comma-lists": ("A->B.enabled = true\nA->B.topics = orders.* , pay.*,\\\n    inventory-eu \t\n"
                    "A->B.groups = app , orders-.*,team.*\nA->B.groups.exclude =\n", [("A", "B")]),
    "legacy-blacklist": ("A->B.enabled = true\ntopics.blacklist = orders-dlq, audit.*\ngroups.blacklist = app.*\n"
                         "config.properties.blacklist = retention.*\n", [("A", "B")]),
    "identity-and-config-excludes": (
        "A->B.enabled = true\nreplication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
        "A->B.config.properties.exclude = retention\\\\..*, segment\\\\.bytes, min\\\\.insync\\\\.replicas, "
        "message\\\\.timestamp\\\\.type, unclean\\\\.leader\\\\.election\\\\.enable, .*throttled.*\n", [("A", "B")]),
    "inline-flag": ("A->B.enabled = true\nA->B.topics = (?i)orders, pay\n", [("A", "B")]),
    "defaults-only": ("A->B.enabled = true\n", [("A", "B")]),
}
# Where the mirror rightly differs (checked, not skipped): eosmirror never copies a topic its built-in
# excludes name, nor syncs its own groups, nor the topic configs the target owns.
ALLOWED = {"topic": naming.is_builtin_excluded, "group": lambda g: g.startswith("eosmirror"),
           "config": lambda c: c in config.NEVER_SYNCED_CONFIGS}


@pytest.fixture(scope="session")
def classpath(tmp_path_factory) -> str:
    return mm2java.compile_helpers(tmp_path_factory.mktemp("java-classes"))


def eosmirror_selects(m: config.MirrorConfig) -> dict[str, set[str]]:
    return {"topic": set(naming.select_topics(TOPICS, m.topics, m.topics_exclude, m.target_alias,
                                              m.replication_separator)),
            "group": set(groupfailover.select_groups(GROUPS, m.groups.include, m.groups.exclude, never=(m.progress_group,))),
            "config": set(CONFIGS) & set(m.sync_topic_configs)}


@pytest.mark.parametrize("name", FILES)
def test_the_imported_mirror_selects_what_mm2_selects(classpath, tmp_path, name):
    text, flows = FILES[name]
    path = tmp_path / f"{name}.properties"
    path.write_bytes((CLUSTERS + text).encode("iso-8859-1"))
    imported = mm2import.translate(mm2props.read(str(path)))
    mirrors = config.parse(yaml.safe_load(mm2import.render(imported, path.name)), tmp_path / "mirrors.yaml")
    for source, target in flows:
        by_mm2 = mm2java.mm2_selects(classpath, path, source, target, NAMES)
        ours = eosmirror_selects(mirrors.get(f"{source}-to-{target}"))
        for kind in NAMES:
            differ = by_mm2[kind] ^ ours[kind]
            assert {n for n in differ if not ALLOWED[kind](n)} == set(), (name, kind, sorted(by_mm2[kind]),
                                                                          sorted(ours[kind]))
            assert not ours[kind] - by_mm2[kind] or kind != "topic", (name, "the mirror copies more than MM2")
        assert by_mm2["topic"], (name, "a test file must select something")


def test_the_issue_pattern_is_the_regex_mm2_uses(classpath, tmp_path):
    """`orders\\.t` selects `orders.t` AND `ordersXt` in MM2 (the regex `orders.t`): so does the mirror."""
    path = tmp_path / "issue.properties"
    path.write_text(CLUSTERS + FILES["the-issue"][0], encoding="iso-8859-1")
    m = config.parse(yaml.safe_load(mm2import.render(mm2import.translate(mm2props.read(str(path))), "x")),
                     tmp_path / "m.yaml").get("A-to-B")
    assert m.topics == ("orders.t",)
    by_mm2 = mm2java.mm2_selects(classpath, path, "A", "B", {"topic": TOPICS})["topic"]
    # MM2 also copies heartbeats topics whatever `topics` says; eosmirror never (a built-in exclude).
    assert {t for t in by_mm2 if not naming.is_builtin_excluded(t)} == {"orders.t", "ordersXt"}
    assert eosmirror_selects(m)["topic"] == {"orders.t", "ordersXt"}


def test_where_they_cannot_agree_the_import_says_so(classpath, tmp_path):
    """An inline flag leaks onto later patterns in MM2's joined regex; a legacy key is version-dependent."""
    for name, expect in (("inline-flag", "inline flag"), ("legacy-blacklist", "ignored by MirrorMaker 2 since Kafka 4.0")):
        out = mm2import.translate((CLUSTERS + FILES[name][0]).encode())
        assert any(expect in p for p in out.partial), out.partial
    path = tmp_path / "flag.properties"
    path.write_text(CLUSTERS + FILES["inline-flag"][0])
    assert "PAY" not in TOPICS
    assert mm2java.mm2_selects(classpath, path, "A", "B", {"topic": ["PAY", "pay", "ORDERS"]})["topic"] == {
        "PAY", "pay", "ORDERS"}   # (?i) reaches `pay` in Java: the mirror's `pay` would not match PAY
    nested = tmp_path / "nested.properties"
    nested.write_text(CLUSTERS + "A->B.enabled = true\nA->B.groups = [a[b]]\n")
    assert any("class inside a class" in p for p in mm2import.translate(nested.read_bytes()).partial)
    # Java reads a union [ab]; Python a class [a[b] then a literal ]: they really select differently.
    assert mm2java.mm2_selects(classpath, nested, "A", "B", {"group": ["b", "b]"]})["group"] == {"b"}
    assert [n for n in ("b", "b]") if re.fullmatch("[a[b]]", n)] == ["b]"]


def commit_offsets(conf, group, topic, offset):
    """A consumer group that has read ``topic`` up to ``offset`` (as an application commits it)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def test_plan_and_groups_plan_on_the_imported_file_select_what_mm2_would(clusters, source_conf, target_conf, unique,
                                                                        classpath, tmp_path):
    """Real topics and groups on the project's source cluster; a real `eosmirror plan` and `eosmirror groups
    plan` on the file import-mm2 wrote; MM2's classes on the same mm2.properties."""
    import json

    from confluent_kafka.admin import AdminClient

    p, g = unique("mm2"), unique("grp")
    names = [f"{p}orders.t", f"{p}ordersXt", f"{p}orders.t.v2", f"{p}pay.x", f"{p}payXx", f"{p}audit.log",
             f"{p}audit-eu"]
    for topic in names:
        helpers.create_topic(source_conf, topic)
    helpers.seed_sequence(source_conf, f"{p}orders.t", 1, 3)
    groups = [f"{g}app.1", f"{g}appX1", f"{g}team.a", f"{g}teamXa", f"{g}team.b", f"{g}other"]
    for group in groups:
        commit_offsets(source_conf, group, f"{p}orders.t", 2)
    props = tmp_path / "mm2.properties"
    props.write_text(f"clusters = src, dst\nsrc.bootstrap.servers = {source_conf['bootstrap.servers']}\n"
                     f"dst.bootstrap.servers = {target_conf['bootstrap.servers']}\nsrc->dst.enabled = true\n"
                     f"src->dst.topics = {p}orders\\.t, {p}pay\\\\..*, {p}audit.*\n"
                     f"src->dst.topics.exclude = {p}audit\\\\.log\nreplication.factor = 1\n"
                     f"src->dst.groups = {g}app\\\\..*, {g}team.*\ngroups.exclude = {g}team\\.a\n")
    mirrors = tmp_path / "mirrors.yaml"
    imported = helpers.cli("import-mm2", str(props), "--output", str(mirrors))
    assert imported.returncode == 0, imported.stderr
    on_cluster = sorted(t for t in AdminClient(source_conf).list_topics(timeout=30).topics if t.startswith(p))
    assert on_cluster == sorted(names)
    by_mm2 = mm2java.mm2_selects(classpath, props, "src", "dst", {"topic": on_cluster, "group": groups})
    assert by_mm2["topic"] == {f"{p}orders.t", f"{p}ordersXt", f"{p}pay.x", f"{p}audit-eu"}
    assert by_mm2["group"] == {f"{g}app.1", f"{g}team.b"}   # `team\.a` is the regex team.a: teamXa goes too

    planned = helpers.cli("plan", "src-to-dst", "--config", str(mirrors))
    assert planned.returncode == 0, planned.stderr
    in_plan = set(re.findall(r"^(\S+)\[0\] -> ", planned.stdout, flags=re.MULTILINE))
    assert {t for t in in_plan if t.startswith(p)} == by_mm2["topic"], planned.stdout
    group_plan = helpers.cli("groups", "plan", "src-to-dst", "--config", str(mirrors), "--json")
    assert group_plan.returncode == 0, group_plan.stdout + group_plan.stderr
    in_group_plan = {r["group"] for r in json.loads(group_plan.stdout)["groups"]}
    assert {x for x in in_group_plan if x.startswith(g)} == by_mm2["group"], group_plan.stdout


def test_an_error_shows_the_pattern_as_written_in_the_mirror_file(clusters, source_conf, unique, tmp_path):
    p = unique("none")
    mirrors = helpers.mirrors_file(tmp_path / "m.yaml", [{"name": "m", "source": {"local": "source"},
                                                         "target": {"local": "target"}, "topics": [f"{p}\\.x"]}])
    planned = helpers.cli("plan", "m", "--config", str(mirrors))
    assert planned.returncode == 2, planned.stdout + planned.stderr
    assert f"topics: `{p}\\.x`" in planned.stderr and "\\\\" not in planned.stderr, planned.stderr


def test_kafkas_secret_settings_are_all_secret_for_eosmirror(classpath):
    """Every PASSWORD-typed key of Kafka's client, MM2 and Connect configs (read from the jars)."""
    ran = mm2java.run(classpath, "PasswordKeys")
    keys = ran.stdout.split()
    assert ran.returncode == 0 and "sasl.jaas.config" in keys, ran.stderr[-2000:]
    assert [k for k in keys if not secrets.is_secret_key(k)] == []
