import datetime as dt
import pickle
from pathlib import Path

import pytest

from eosmirror.core import config
from eosmirror.core.errors import ConfigError
from tests.support.configs import P, error_of, one


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
    ({"max_transaction_seconds": 3600}, "max_transaction_seconds", "from 0.1 to 300.0"),
    ({"on_truncation": "ignore"}, "on_truncation", "fail, skip_to_log_start"),
    ({"max_records_per_partition": -5}, "max_records_per_partition", "integer"),
    ({"slotz": 3}, "slotz", "no such field"),
    ({"airflow": {"schedule": "hourly"}}, "airflow.schedule", "cron"),
    ({"airflow": {"retry": 1}}, "airflow.retry", "no such field"),
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


# --- one table of fields: suggestions, nested paths, secrets, cron, defaults, YAML ----------------------

@pytest.mark.parametrize("fields, field, guess", [
    ({"slot": 3}, "slot", "slots"),
    ({"max_records_per_partiton": 5}, "max_records_per_partiton", "max_records_per_partition"),
    ({"airflow": {"retry": 1}}, "airflow.retry", "retries"),
    ({"source": {"conection": "kafka_dc1"}}, "source.conection", "connection"),
    ({"delivery": "exactly-once"}, "delivery", "exactly_once"),
    ({"start_from": "earlist"}, "start_from", "earliest"),
    ({"airflow": {"schedule": "hourly"}}, "airflow.schedule", "@hourly"),
])
def test_an_unknown_field_or_value_suggests_the_nearest_known_one(fields, field, guess):
    text = error_of(**fields)
    assert f"field `{field}`" in text and f"did you mean `{guess}`?" in text, text


def test_an_unknown_field_lists_the_known_ones_of_its_own_level():
    text = error_of(airflow={"retry": 1})
    assert ("known fields: catchup, owner, readiness_schedule, retries, run_server, schedule, spark_conn_id, "
            "start_date, tags") in text
    assert "slots" not in text


@pytest.mark.parametrize("fields, field, shown", [
    ({"airflow": {"schedule": "61 * * * *"}}, "airflow.schedule", "'61 * * * *'"),
    ({"airflow": {"start_date": "soon"}}, "airflow.start_date", "'soon'"),
    ({"airflow": {"retries": 99}}, "airflow.retries", "99"),
    ({"airflow": {"catchup": "yes"}}, "airflow.catchup", "'yes'"),
    ({"airflow": {"owner": ""}}, "airflow.owner", "''"),
    ({"airflow": {"tags": "orders"}}, "airflow.tags", "'orders'"),
    ({"airflow": ["schedule"]}, "airflow", "['schedule']"),
    ({"target": {"connection": "bad id!"}}, "target.connection", "'bad id!'"),
    ({"source_consumer": {"fetch.max.bytes": [1, 2]}}, "source_consumer.fetch.max.bytes", "[1, 2]"),
    ({"topics": None}, "topics", "null"),
])
def test_nested_fields_are_named_by_their_dotted_path_with_the_value(fields, field, shown):
    text = error_of(**fields)
    assert f"mirror 'm1': field `{field}`: {shown} is not allowed; expected " in text, text


def test_a_missing_field_says_what_it_expects():
    with pytest.raises(ConfigError, match=r"field `topics`: missing; expected a non-empty list of regular"):
        config.parse({"mirrors": [{"name": "m1", "source": {"local": "source"}, "target": {"local": "target"}}]}, P)


@pytest.mark.parametrize("fields", [
    {"source": {"config": {"sasl.password": "hunter2-secret"}}},                     # no bootstrap.servers
    {"source": {"local": "source", "config": {"sasl.password": "hunter2-secret"}}},  # two kinds of ref
    {"target": {"config": {"bootstrap.servers": "h:1", "ssl.key.password": ["hunter2-secret"]}}},
    {"source_consumer": {"sasl.oauthbearer.client.secret": 12345}},
    {"source_consumer": "sasl.password=hunter2-secret"},
    {"spark_conf": {"spark.ssl.keyPassword": ["hunter2-secret"]}},
    {"sasl.password": "hunter2-secret"},                                               # unknown field
])
def test_a_secret_is_never_echoed_whatever_the_error(fields):
    text = error_of(**fields)
    assert "hunter2-secret" not in text and "12345" not in text, text
    assert "mirrors.yaml: mirror 'm1': field `" in text


def test_a_secret_in_a_yaml_syntax_error_is_not_quoted(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text('mirrors:\n  - name: m1\n    source: {config: {sasl.password: "hunter2-secret}}\n')
    with pytest.raises(ConfigError) as info:
        config.load(bad)
    assert "not valid YAML at line" in str(info.value) and "hunter2-secret" not in str(info.value)


def test_a_key_written_twice_in_one_mapping_is_refused(tmp_path):
    twice = tmp_path / "twice.yaml"
    twice.write_text("mirrors:\n  - name: m1\n    source: {local: source}\n    target: {local: target}\n"
                     "    topics: [a]\n    slots: 4\n    slots: 1\n")
    with pytest.raises(ConfigError, match=r"line 7, column 5: key `slots` is written twice"):
        config.load(twice)


@pytest.mark.parametrize("schedule", ["*/15 * * * *", "0 3 * * MON-FRI", "0 0 L * *", "@hourly", "@quarterly", None])
def test_schedules_airflow_accepts_are_accepted(schedule):
    assert one(airflow={"schedule": schedule}).airflow.schedule == schedule


@pytest.mark.parametrize("schedule, why", [
    ("61 * * * *", "out of range"),
    ("*/0 * * * *", "croniter refuses it"),
    ("* * * *", "5-field cron"),
    ("*/15 * * * * *", "5-field cron"),         # croniter reads a 6th field as seconds; Airflow refuses it
    ("0 0 30 2 *", "never fires"),
    ("@reboot", "5-field cron"),
    (15, "5-field cron"),
])
def test_cron_is_checked_by_croniter_like_airflow_does(schedule, why):
    text = error_of(airflow={"schedule": schedule})
    assert "field `airflow.schedule`" in text and why in text, text


def test_defaults_are_checked_and_errors_from_them_say_so():
    mirror = {"name": "m1", "source": {"local": "source"}, "target": {"local": "target"}, "topics": ["a"]}
    with pytest.raises(ConfigError, match=r"`defaults`: field `slot`: no such field \(did you mean `slots`\?\)"):
        config.parse({"defaults": {"slot": 2}, "mirrors": [mirror]}, P)
    with pytest.raises(ConfigError, match=r"mirror 'm1': field `slots` \(from `defaults`\): 0 is not allowed"):
        config.parse({"defaults": {"slots": 0}, "mirrors": [mirror]}, P)
    with pytest.raises(ConfigError, match=r"unknown top-level key `mirror` \(did you mean `mirrors`\?\)"):
        config.parse({"mirror": [mirror]}, P)


def test_settings_are_scalars_and_spark_values_become_spark_strings():
    m = one(spark_conf={"spark.ui.enabled": False, "spark.executor.cores": 2},
            source_consumer={"fetch.wait.max.ms": 50})
    assert dict(m.spark_conf) == {"spark.ui.enabled": "false", "spark.executor.cores": "2"}
    assert m.source_consumer == {"fetch.wait.max.ms": 50}
    assert "did you mean `spark.executor.memory`?" in error_of(spark_conf={"executor.memory": "1g"})


def test_a_mirror_is_frozen_hashable_picklable_and_equal_to_its_copy():
    m = one(source={"config": {"bootstrap.servers": "h:9092", "sasl.password": "${PW}"}},
            spark_conf={"spark.ui.enabled": "false"}, airflow={"tags": ["x"]})
    assert pickle.loads(pickle.dumps(m)) == m and hash(pickle.loads(pickle.dumps(m))) == hash(m)
    assert one(source={"config": {"bootstrap.servers": "h:9092", "sasl.password": "${PW}"}},
               spark_conf={"spark.ui.enabled": "false"}, airflow={"tags": ["x"]}) == m
    with pytest.raises(TypeError):
        m.spark_conf["spark.ui.enabled"] = "true"
    with pytest.raises(AttributeError):
        m.slots = 3
    assert m.with_bounds(max_records_per_partition=7).max_records_per_partition == 7
    assert m.with_bounds().max_records_per_partition is None


def test_dates_and_timestamps_from_yaml_are_timezone_aware():
    assert one(start_from=dt.date(2026, 1, 31)).start_from == dt.datetime(2026, 1, 31, tzinfo=dt.timezone.utc)
    assert one(airflow={"start_date": dt.date(2026, 2, 1)}).airflow.start_date == dt.datetime(
        2026, 2, 1, tzinfo=dt.timezone.utc)
    assert one(start_from="2026-01-31T10:00:00Z").start_from.utcoffset() == dt.timedelta(0)


def test_the_default_path_honours_eosmirror_config(monkeypatch, tmp_path):
    monkeypatch.setenv("EOSMIRROR_CONFIG", str(tmp_path / "elsewhere.yaml"))
    assert config.default_config_path() == tmp_path / "elsewhere.yaml"


def test_every_field_is_documented_in_the_reference():
    import dataclasses

    table = config.field_reference()
    for cls, prefix in ((config.MirrorConfig, ""), (config.AirflowSettings, "airflow.")):
        for f in dataclasses.fields(cls):
            assert f.metadata["doc"], f.name
            assert f"| `{prefix}{f.name}` |" in table, f.name
    assert "| `slots` | an integer from 1 to 1024 | 2 |" in table
    assert "| `progress_group` |" in table and "`eosmirror.<name>`" in table
