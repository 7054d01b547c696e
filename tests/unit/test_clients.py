import pytest

from eosmirror.kafka import clients
from eosmirror.core.errors import ConfigError


def test_source_consumer_forces_exactly_once_settings():
    c = clients.source_consumer({"bootstrap.servers": "127.0.0.1:1", "acks": "all"}, {}, "g", "c")
    c.close()  # built without contacting a broker: the forced settings are accepted by librdkafka


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
    assert clients.redact(conf) == {"bootstrap.servers": "h:1", "sasl.password": "***", "ssl.key.password": "***",
                                    "sasl.username": "u"}
