import datetime as dt
from pathlib import Path

import pytest

from eosmirror import config
from eosmirror.errors import ConfigError

P = Path("mirrors.yaml")


def one(**fields):
    raw = {"name": "m1", "source": {"local": "source"}, "target": {"local": "target"}, "topics": ["a\\..*"], **fields}
    return config.parse({"mirrors": [raw]}, P).mirrors[0]


def error_of(**fields) -> str:
    with pytest.raises(ConfigError) as info:
        one(**fields)
    return str(info.value)


def test_minimal_mirror_gets_documented_defaults():
    m = one()
    assert (m.slots, m.delivery, m.replication_policy, m.on_truncation) == (2, "exactly_once", "identity", "fail")
    assert m.progress_group == "eosmirror.m1"
    assert m.transactional_id_prefix == "eosmirror"
    assert m.start_from == "earliest"
    assert "message.timestamp.type" not in m.sync_topic_configs


def test_the_repository_mirrors_file_is_valid():
    names = config.load(Path(__file__).parents[2] / "dags" / "mirrors.yaml").names()
    assert "demo" in names


@pytest.mark.parametrize("fields, field, hint", [
    ({"slots": 0}, "slots", "an integer from 1 to 1024"),
    ({"slots": "2"}, "slots", "an integer"),
    ({"delivery": "exactly-once"}, "delivery", "exactly_once, at_least_once"),
    ({"replication_policy": "default"}, "replication_policy", "identity, prefix"),
    ({"topics": ["(unclosed"]}, "topics", "valid regular expression"),
    ({"start_from": "yesterday"}, "start_from", "ISO-8601"),
    ({"max_transaction_seconds": 3600}, "max_transaction_seconds", "from 1.0 to 300.0"),
    ({"on_truncation": "ignore"}, "on_truncation", "fail, skip_to_log_start"),
    ({"max_records_per_partition": -5}, "max_records_per_partition", "integer"),
    ({"slotz": 3}, "slotz", "no such field"),
    ({"airflow": {"schedule": "hourly"}}, "airflow.schedule", "cron"),
    ({"airflow": {"retry": 1}}, "airflow.retry", "no such key"),
    ({"sync_topic_configs": ["message.timestamp.type"]}, "sync_topic_configs", "owned by"),
    ({"source": {"local": "elsewhere"}}, "source.local", "source or target"),
    ({"source": {"config": {"acks": "all"}}}, "source.config", "bootstrap.servers"),
    ({"spark_conf": {"executor.memory": "1g"}}, "spark_conf.executor.memory", "spark."),
])
def test_every_error_names_mirror_field_value_and_what_is_allowed(fields, field, hint):
    text = error_of(**fields)
    assert "mirror 'm1'" in text and f"`{field}`" in text and hint in text and str(P) in text


def test_prefix_policy_needs_an_alias():
    assert "source_alias" in error_of(replication_policy="prefix")
    assert one(replication_policy="prefix", source_alias="dc1").source_alias == "dc1"


def test_inline_secret_is_refused_without_echoing_it():
    text = error_of(source={"config": {"bootstrap.servers": "h:9092", "sasl.password": "hunter2-secret"}})
    assert "sasl.password" in text and "hunter2-secret" not in text


def test_secret_as_environment_reference_is_allowed():
    m = one(source={"config": {"bootstrap.servers": "h:9092", "sasl.password": "${SRC_PASSWORD}"}})
    assert m.source.config["sasl.password"] == "${SRC_PASSWORD}"


def test_override_that_contradicts_exactly_once_is_refused_with_the_reason():
    text = error_of(source_consumer={"isolation.level": "read_uncommitted"})
    assert "isolation.level" in text and "read_committed" in text and "aborted" in text
    text = error_of(target_producer={"acks": "1"})
    assert "acks" in text and "all" in text
    assert "transactional.id" in error_of(target_producer={"transactional.id": "x"})


def test_start_from_timestamp_is_timezone_aware():
    m = one(start_from="2026-01-31T10:00:00")
    assert m.start_from == dt.datetime(2026, 1, 31, 10, tzinfo=dt.timezone.utc)


def test_defaults_merge_and_names_must_be_unique():
    doc = {"defaults": {"slots": 4}, "mirrors": [
        {"name": "b", "source": {"local": "source"}, "target": {"local": "target"}, "topics": ["x"]},
        {"name": "a", "source": {"local": "source"}, "target": {"local": "target"}, "topics": ["y"], "slots": 1}]}
    parsed = config.parse(doc, P)
    assert parsed.names() == ["a", "b"]  # sorted: stable DAG order
    assert parsed.get("b").slots == 4 and parsed.get("a").slots == 1
    doc["mirrors"][1]["name"] = "b"
    with pytest.raises(ConfigError, match="more than once"):
        config.parse(doc, P)


def test_unknown_mirror_name_lists_the_configured_ones():
    with pytest.raises(ConfigError, match=r"no mirror named 'nope' \(configured: m1\)"):
        config.parse({"mirrors": [{"name": "m1", "source": {"local": "source"}, "target": {"local": "target"},
                                   "topics": ["a"]}]}, P).get("nope")


def test_unreadable_or_invalid_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        config.load(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("mirrors: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        config.load(bad)


def test_transaction_timeout_leaves_room_for_flush_and_commit():
    m = one(max_transaction_seconds=20)
    assert m.transaction_timeout_ms == 70_000
