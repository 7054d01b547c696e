"""One rule decides which settings are secret (eosmirror.core.secrets), and no path that prints,
logs or stores a setting shows the value of any Kafka or librdkafka secret property: import-mm2's
output (printed and written), mirror-file errors, redacted client configs."""

from pathlib import Path

import pytest
import yaml

from eosmirror import cli
from eosmirror.core import config, secrets
from eosmirror.core.errors import ConfigError
from eosmirror.kafka import clients

# Kafka 4.3's ConfigDef.Type.PASSWORD keys of the clients, MirrorMaker 2 and Connect (the integration
# test test_mm2_selection re-reads them from the jars and checks this list holds them all).
KAFKA_PASSWORD_KEYS = ["sasl.jaas.config", "sasl.oauthbearer.assertion.private.key.passphrase",
                       "sasl.oauthbearer.client.credentials.client.secret", "ssl.key.password",
                       "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.password",
                       "ssl.truststore.certificates", "ssl.truststore.password"]
# librdkafka's sensitive properties (CONFIGURATION.md) and the Schema Registry client's credentials.
LIBRDKAFKA_SECRET_KEYS = ["sasl.password", "ssl.key.password", "ssl.key.pem", "ssl_key", "ssl.keystore.password",
                          "sasl.oauthbearer.config", "sasl.oauthbearer.client.secret",
                          "sasl.oauthbearer.assertion.private.key.pem",
                          "sasl.oauthbearer.assertion.private.key.passphrase", "basic.auth.user.info",
                          "bearer.auth.token"]
SECRET_KEYS = sorted(set(KAFKA_PASSWORD_KEYS + LIBRDKAFKA_SECRET_KEYS))
SECRET = "SUPERSECRET-4711"
PLAIN_KEYS = ["bootstrap.servers", "sasl.username", "sasl.mechanism", "security.protocol", "ssl.ca.location",
              "ssl.keystore.location", "ssl.endpoint.identification.algorithm", "topics", "groups"]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_every_secret_property_is_secret_however_it_is_prefixed(key):
    for spelled in (key, key.upper(), f"A.{key}", f"A->B.consumer.{key}", f"source.admin.{key}"):
        assert secrets.is_secret_key(spelled), spelled
    assert clients.is_secret_key is secrets.is_secret_key   # one rule, re-exported


@pytest.mark.parametrize("key", PLAIN_KEYS)
def test_ordinary_settings_are_shown(key):
    assert not secrets.is_secret_key(key)
    assert secrets.shown(key, "v") == f"{key} = v"


def mm2_file(key: str) -> str:
    return (f"clusters = A, B\nA->B.enabled = true\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
            f"A.{key} = clientId=x clientSecret={SECRET}\nB.{key}:{SECRET}\n{key} = {SECRET}\n"
            f"A->B.consumer.{key} = {SECRET}\nA->B.admin.{key} {SECRET}\n")


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_import_mm2_never_prints_or_writes_a_secret(key, tmp_path, capsys):
    source = tmp_path / "mm2.properties"
    source.write_text(mm2_file(key))
    assert cli.main(["import-mm2", str(source)]) == 0
    printed = capsys.readouterr()
    assert SECRET not in printed.out + printed.err
    assert f"A.{key} = <hidden>" in printed.out or key == "sasl.jaas.config"   # listed, value hidden
    out = tmp_path / "mirrors.yaml"
    assert cli.main(["import-mm2", str(source), "--output", str(out)]) == 0
    written = out.read_text()
    assert SECRET not in written and written == printed.out
    assert config.parse(yaml.safe_load(written), out).names() == ["A-to-B"]


@pytest.mark.parametrize("key", SECRET_KEYS)
@pytest.mark.parametrize("where", ["inline", "not a scalar", "bad mapping", "spark"])
def test_a_mirror_file_error_never_echoes_a_secret(key, where):
    settings = {"bootstrap.servers": "h:1", key: SECRET}
    mirror = {"name": "m1", "source": {"config": settings}, "target": {"local": "target"}, "topics": ["t"]}
    if where == "not a scalar":
        mirror["source_consumer"] = {key: [SECRET]}
    elif where == "bad mapping":
        mirror["source_consumer"] = {key: SECRET, 7: "x"}
    elif where == "spark":
        mirror["source"] = {"local": "source"}
        mirror["spark_conf"] = {f"spark.{key}": [SECRET]}
    with pytest.raises(ConfigError) as info:
        config.parse({"mirrors": [mirror]}, Path("mirrors.yaml"))
    assert SECRET not in str(info.value) and "mirror 'm1'" in str(info.value)


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_a_redacted_client_config_holds_no_secret(key):
    conf = {"bootstrap.servers": "h:1", key: SECRET, "nested": {key: SECRET}, "list": [{key: SECRET}]}
    redacted = clients.redact(conf)
    assert SECRET not in repr(redacted) and SECRET not in str(redacted)
    assert redacted["bootstrap.servers"] == "h:1" and redacted[key] == "<hidden>"
