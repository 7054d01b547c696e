import re

import pytest

from eosmirror.core.errors import ConfigError
from eosmirror.kafka import clients

DUMP = {"debug": "conf", "log_level": 7}   # librdkafka prints every property a client is created with


def librdkafka_settings(capfd, build) -> dict[str, str]:
    """The configuration librdkafka itself reports for a client (``debug: conf`` dumps the properties
    it was created with, on stderr, at creation): ``build(settings)`` creates and closes one client,
    ``settings`` to be merged into its cluster settings."""
    capfd.readouterr()
    build(DUMP)
    err = capfd.readouterr().err
    found = dict(re.findall(r"\|CONF\|[^|]*\| \[thrd:app\]:   (\S+) = (.*)", err))
    assert found, f"librdkafka reported no configuration:\n{err[-2000:]}"
    return found


def test_source_consumer_forces_exactly_once_settings():
    conf = clients.source_consumer_config({"bootstrap.servers": "127.0.0.1:1", "acks": "all"},
                                          {"fetch.wait.max.ms": 50}, "g", "c")
    assert {k: str(conf[k]).lower() for k in ("isolation.level", "enable.auto.commit", "enable.auto.offset.store",
                                              "auto.offset.reset", "enable.partition.eof")} == {
        "isolation.level": "read_committed", "enable.auto.commit": "false", "enable.auto.offset.store": "false",
        "auto.offset.reset": "error", "enable.partition.eof": "true"}
    assert "acks" not in conf                      # a producer setting of the shared cluster config is dropped
    assert conf["fetch.wait.max.ms"] == 50 and conf["group.id"] == "g" and conf["client.id"] == "c"
    c = clients.source_consumer({"bootstrap.servers": "127.0.0.1:1", "acks": "all"}, {}, "g", "c")
    c.close()  # built without contacting a broker: the forced settings are accepted by librdkafka


def test_a_slots_consumer_waits_at_most_20_ms_bounded_100_ms_following_unless_the_user_says_otherwise():
    bounded = clients.source_consumer_config({"bootstrap.servers": "x:1"}, {}, "g", "c")
    follow = clients.source_consumer_config({"bootstrap.servers": "x:1"}, {}, "g", "c", follow=True)
    mine = clients.source_consumer_config({"bootstrap.servers": "x:1"}, {"fetch.wait.max.ms": 250}, "g", "c",
                                          follow=True)
    cluster = clients.source_consumer_config({"bootstrap.servers": "x:1", "fetch.wait.max.ms": 300}, {}, "g", "c")
    assert bounded["fetch.wait.max.ms"] == 20 and follow["fetch.wait.max.ms"] == 100
    assert mine["fetch.wait.max.ms"] == 250 and cluster["fetch.wait.max.ms"] == 300


@pytest.mark.parametrize("key, value, reason", [
    ("isolation.level", "read_uncommitted", "aborted"),
    ("enable.auto.commit", "true", "never by the consumer"),
    ("auto.offset.reset", "earliest", "skipping records"),
])
def test_contradicting_consumer_settings_are_refused_with_reason(key, value, reason):
    with pytest.raises(ConfigError) as info:
        clients.source_consumer({"bootstrap.servers": "x:1"}, {key: value}, "g", "c")
    assert key in str(info.value) and reason in str(info.value)


def test_producer_refuses_weak_acks_and_own_transactional_id():
    with pytest.raises(ConfigError, match="acks"):
        clients.transactional_producer({"bootstrap.servers": "x:1"}, {"acks": 1}, "id", 60000, "p")
    with pytest.raises(ConfigError, match="transactional.id"):
        clients.transactional_producer({"bootstrap.servers": "x:1", "transactional.id": "mine"}, {}, "id", 60000, "p")


def test_equivalent_spellings_are_accepted():
    p = clients.transactional_producer({"bootstrap.servers": "x:1"}, {"acks": "-1", "enable.idempotence": "true"},
                                       "id", 60000, "p")
    assert p is not None


def test_redact_hides_secrets_only():
    conf = {"bootstrap.servers": "h:1", "sasl.password": "s3cret", "ssl.key.password": "k", "sasl.username": "u"}
    assert clients.redact(conf) == {"bootstrap.servers": "h:1", "sasl.password": "<hidden>", "ssl.key.password": "<hidden>",
                                    "sasl.username": "u"}


def test_librdkafka_logs_only_critical_lines_unless_asked(monkeypatch):
    monkeypatch.delenv(clients.KAFKA_LOG_LEVEL_ENV, raising=False)
    assert clients.librdkafka_log_level() == 2
    monkeypatch.setenv(clients.KAFKA_LOG_LEVEL_ENV, "debug")
    assert clients.librdkafka_log_level() == 7
    monkeypatch.setenv(clients.KAFKA_LOG_LEVEL_ENV, "4")
    assert clients.librdkafka_log_level() == 4
    monkeypatch.setenv(clients.KAFKA_LOG_LEVEL_ENV, "loud")
    with pytest.raises(ConfigError, match="EOSMIRROR_KAFKA_LOG_LEVEL='loud'"):
        clients.librdkafka_log_level()


def test_a_cluster_config_log_level_wins_over_the_default(monkeypatch):
    monkeypatch.delenv(clients.KAFKA_LOG_LEVEL_ENV, raising=False)
    admin_conf = clients._with_logger({"log_level": 6}, "x")
    assert admin_conf["log_level"] == 6 and clients._with_logger({}, "y")["log_level"] == 2


def test_range_readers_refetch_after_10_ms_unless_the_user_says_otherwise():
    """librdkafka's 1 s fetch.queue.backoff.ms idled the copy 3/4 of the time (bench: 126 k -> 499 k records/s)."""
    base = {"bootstrap.servers": "127.0.0.1:1"}
    assert clients.source_consumer_config(base, {}, "g", "c")["fetch.queue.backoff.ms"] == 10
    assert clients.source_consumer_config({**base, "fetch.queue.backoff.ms": 200}, {}, "g", "c")[
        "fetch.queue.backoff.ms"] == 200                      # the cluster's own setting wins
    assert clients.source_consumer_config(base, {"fetch.queue.backoff.ms": 50}, "g", "c")[
        "fetch.queue.backoff.ms"] == 50                       # and so does the mirror's source_consumer override
    reader = clients.plain_consumer(base, "r")               # librdkafka accepts it (a typo would raise here)
    reader.close()


def test_a_slots_consumer_fetches_8_mb_a_partition_unless_the_user_says_otherwise():
    """One fetch in flight per broker, at most max.partition.fetch.bytes a partition: with librdkafka's 1 MB a slot
    of 2 KB records 100 ms from its source spent 5.89 s copying where 8 MB took 2.66 s (docs/results.md)."""
    base = {"bootstrap.servers": "127.0.0.1:1"}
    for follow in (False, True):
        assert clients.source_consumer_config(base, {}, "g", "c", follow=follow)["max.partition.fetch.bytes"] == 8 << 20
    assert clients.source_consumer_config({**base, "max.partition.fetch.bytes": 1 << 20}, {}, "g", "c")[
        "max.partition.fetch.bytes"] == 1 << 20               # the cluster's own setting wins
    assert clients.source_consumer_config(base, {"max.partition.fetch.bytes": 2 << 20}, "g", "c")[
        "max.partition.fetch.bytes"] == 2 << 20               # and so does the mirror's source_consumer override
    clients.source_consumer(base, {}, "g", "c").close()     # librdkafka accepts it (a typo would raise here)


def test_the_lag_history_writer_acknowledges_with_all_replicas_but_skips_the_producer_id_wait():
    cluster = {"bootstrap.servers": "127.0.0.1:1", "enable.idempotence": True, "fetch.wait.max.ms": 5}
    conf = clients.observation_producer_config(cluster, "w", extra={"compression.type": "lz4"})
    assert (conf["acks"], conf["enable.idempotence"], conf["compression.type"]) == ("all", False, "lz4")
    assert "fetch.wait.max.ms" not in conf
    clients.observation_producer(cluster, "w").flush(0)   # librdkafka accepts the result


def test_a_range_reader_accepts_the_clusters_own_fetch_wait(capfd):
    base = {"bootstrap.servers": "127.0.0.1:1"}
    default = librdkafka_settings(capfd, lambda dump: clients.plain_consumer({**base, **dump}, "r").close())
    own = librdkafka_settings(capfd, lambda dump: clients.plain_consumer({**base, "fetch.wait.max.ms": 100, **dump},
                                                                         "r").close())
    assert own["fetch.wait.max.ms"] == "100" != default.get("fetch.wait.max.ms"), (own, default)   # the cluster's wins


def test_producers_connect_to_every_broker_at_once_unless_the_user_says_otherwise(capfd):
    """Sparse connections made init_transactions wait librdkafka's fixed 500 ms for a broker in 4 of 5
    starts (clientrules.PRODUCER_DEFAULTS)."""
    base = {"bootstrap.servers": "127.0.0.1:1"}
    conf = clients.transactional_producer_config(base, {}, "id", 60000, "p")
    assert conf["enable.sparse.connections"] is False and conf["transactional.id"] == "id"
    assert clients.transactional_producer_config({**base, "enable.sparse.connections": True}, {}, "id", 60000, "p")[
        "enable.sparse.connections"] is True                 # the cluster's own setting wins
    assert clients.transactional_producer_config(base, {"enable.sparse.connections": "true"}, "id", 60000, "p")[
        "enable.sparse.connections"] == "true"               # and so does the mirror's target_producer override
    # librdkafka's default is sparse connections: both producers are created with them off
    for build in (lambda dump: clients.transactional_producer({**base, **dump}, {}, "id", 60000, "p").flush(0),
                  lambda dump: clients.idempotent_producer({**base, **dump}, {}, "p").flush(0)):
        assert librdkafka_settings(capfd, build)["enable.sparse.connections"] == "false"
    own = librdkafka_settings(capfd, lambda dump: clients.transactional_producer(
        {**base, "enable.sparse.connections": True, **dump}, {}, "id", 60000, "p").flush(0))
    assert own.get("enable.sparse.connections", "true") == "true", own          # librdkafka got the cluster's


def test_a_local_cluster_never_started_here_says_where_local_clusters_come_from(tmp_path, monkeypatch):
    # An installed eosmirror keeps its state in ~/.eosmirror, a checkout in its var/: the error names
    # both ways out (a checkout's `eosmirror local up` and EOSMIRROR_HOME, or a real cluster).
    from eosmirror.core.sections import ClusterRef
    from eosmirror.kafka import connections

    monkeypatch.setenv("EOSMIRROR_HOME", str(tmp_path))
    with pytest.raises(ConfigError) as err:
        connections.resolve(ClusterRef(local="source"), "mirror 'm': source")
    text = str(err.value)
    assert "mirror 'm': source: the local cluster 'source' was never started" in text
    assert "eosmirror local up" in text and "EOSMIRROR_HOME=<checkout>/var" in text and "connection:" in text


def test_no_slot_producer_asks_the_broker_to_create_a_topic(capfd):
    base = {"bootstrap.servers": "127.0.0.1:1"}
    assert clients.transactional_producer_config(base, {}, "t", 60_000, "c")["allow.auto.create.topics"] is False
    for build in (lambda dump: clients.transactional_producer({**base, **dump}, {}, "t", 60_000, "c").flush(0),
                  lambda dump: clients.idempotent_producer({**base, **dump}, {}, "c").flush(0)):
        assert librdkafka_settings(capfd, build)["allow.auto.create.topics"] == "false"   # librdkafka took it


class _Mirror:
    def __init__(self, delivery="exactly_once", source_consumer=None, target_producer=None):
        self.delivery, self.source_consumer, self.target_producer = delivery, source_consumer or {}, target_producer or {}


@pytest.mark.parametrize("delivery", ["exactly_once", "at_least_once"])
def test_settings_librdkafka_refuses_are_a_config_error_naming_the_field_before_any_slot(delivery):
    base = {"bootstrap.servers": "127.0.0.1:1"}
    clients.check_slot_settings(base, base, _Mirror(delivery), "mirror 'm'")          # the usual settings pass
    with pytest.raises(ConfigError, match=r"mirror 'm': source_consumer .*fetch\.wait\.max\.ms"):
        clients.check_slot_settings(base, base, _Mirror(delivery, {"fetch.wait.max.ms": "soon"}), "mirror 'm'")
    with pytest.raises(ConfigError, match=r"mirror 'm': target_producer .*no\.such\.property"):
        clients.check_slot_settings(base, base, _Mirror(delivery, target_producer={"no.such.property": 1}),
                                    "mirror 'm'")


def test_a_refused_secret_value_is_never_in_the_error():
    base = {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "NOPE",
            "sasl.password": "hunter2-NOPE"}
    with pytest.raises(ConfigError) as info:
        clients.check_slot_settings(base, {"bootstrap.servers": "127.0.0.1:1"}, _Mirror(), "mirror 'm'")
    assert "hunter2" not in str(info.value) and "source_consumer" in str(info.value)
