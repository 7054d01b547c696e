"""The minimums' read on real brokers: what eosmirror reads of a Kafka 4.3.1 broker's ApiVersions is what Kafka's
own kafka-broker-api-versions.sh reads (and is the committed fixture tests/data/apiversions/kafka-4.3.1.json);
the local clusters pass every command; the read works on a SASL_SSL listener that requires a client certificate
(before SASL authentication, with the cluster's TLS settings as PEM text or PKCS#12) and refuses a broker whose
certificate the settings do not trust; its cost per command is measured."""

import json
import os
import re
import statistics
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from eosmirror.core import brokerfeatures
from eosmirror.driver import minimums
from eosmirror.kafka import apiversions
from eosmirror.kafka.cluster import Cluster
from eosmirror_tools.kit import runtime, waits
from tests.support import tls
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "apiversions" / "kafka-4.3.1.json"


def kafkas_own_table(bootstrap: str, *extra: str) -> dict[int, tuple[int, int]]:
    """kafka-broker-api-versions.sh (BrokerApiVersionsCommand of the fetched 4.3.1 jars): {key: (min, max)}."""
    command = runtime.java_command("org.apache.kafka.tools.BrokerApiVersionsCommand", "--bootstrap-server",
                                   bootstrap, *extra, heap="256m", short_lived=True)
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    # "Produce(0): 0 to 13 [usable: 13]", "OffsetDelete(47): 0 [usable: 0]"; "UNSUPPORTED": not served
    found = {int(k): (int(lo), int(hi or lo))
             for k, lo, hi in re.findall(r"\w+\((\d+)\): (\d+)(?: to (\d+))? \[usable", done.stdout)}
    assert found, f"BrokerApiVersionsCommand exited {done.returncode}: {done.stdout[-800:]} {done.stderr[-800:]}"
    return found


def test_the_read_matches_kafkas_own_tool_and_the_committed_fixture(target_conf):
    answer = apiversions.read(target_conf)
    assert answer.broker == target_conf["bootstrap.servers"]
    assert answer.table == kafkas_own_table(target_conf["bootstrap.servers"])
    fixture = {api["key"]: (api["min"], api["max"]) for api in json.loads(FIXTURE.read_text())["apis"]}
    assert answer.table == fixture


def test_the_local_4_3_clusters_pass_every_command_and_the_cost_is_small(source_cluster, target_cluster):
    pair = (Cluster.from_settings("source", source_cluster.settings, "source cluster (local)"),
            Cluster.from_settings("target", target_cluster.settings, "target cluster (local)"))
    for command in brokerfeatures.NEEDS:
        assert minimums.require(command, pair, acl_sync=True) == [], command
    took = []
    for _ in range(20):
        began = time.perf_counter()
        minimums.require("run", pair, acl_sync=True)      # what a run adds: both clusters read and judged
        took.append((time.perf_counter() - began) * 1000)
    median = statistics.median(took)
    print(f"minimums of a run (2 clusters, plaintext loopback): median {median:.2f} ms, max {max(took):.2f} ms")
    assert median < 250, took


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory):
    pki = tls.make_pki(tmp_path_factory.mktemp("pki"))
    passwords = {"admin": "admin-" + uuid.uuid4().hex[:8]}
    broker = tls.tls_broker("minimums-tls", int(os.environ["EOSMIRROR_TARGET_PORT"]) + 60, pki, passwords)
    with tls.running(broker):
        settings = tls.client_settings(broker, pki)
        admin = AdminClient({**settings, "log_level": 2})
        wait_for("the SASL_SSL broker to list its topics to a librdkafka client with these settings",
                 lambda: _lists(admin), waits.service_budget(90, cap_seconds=240))
        yield broker, pki, settings


def _lists(admin):
    try:
        return True, admin.list_topics(timeout=2).brokers
    except Exception as exc:  # noqa: BLE001 - "not ready yet" while the broker starts
        return False, repr(exc)


def test_the_read_works_on_a_sasl_ssl_listener_requiring_client_certificates(tls_cluster):
    broker, pki, settings = tls_cluster
    kafkas = kafkas_own_table(broker.bootstrap, "--command-config", str(_command_config(broker, pki)))
    pem = apiversions.read(settings)
    assert pem.table == kafkas
    p12 = {k: v for k, v in settings.items() if k not in ("ssl.certificate.pem", "ssl.key.pem")}
    p12.update({"ssl.keystore.location": str(pki.client_p12), "ssl.keystore.password": tls.KEYSTORE_PASSWORD})
    assert apiversions.read(p12).table == kafkas
    # ApiVersions comes before SASL: a wrong password does not matter to it (the broker never sees it used).
    assert apiversions.read({**settings, "sasl.password": "wrong"}).table == kafkas
    cluster = Cluster.from_settings("target", settings, "target cluster (tls)")
    assert minimums.require("resume", (cluster,)) == []
    took = []
    for _ in range(10):
        began = time.perf_counter()
        apiversions.read(settings)
        took.append((time.perf_counter() - began) * 1000)
    print(f"ApiVersions read over SASL_SSL with a client certificate: median {statistics.median(took):.2f} ms")


def test_an_untrusted_or_missing_certificate_is_not_read_and_the_command_says_so(tls_cluster, tmp_path, caplog):
    broker, pki, settings = tls_cluster
    other = tls.make_pki(tmp_path / "other")
    with pytest.raises(apiversions.NotRead, match="CERTIFICATE_VERIFY_FAILED"):
        apiversions.read({**settings, "ssl.ca.location": str(other.ca)})
    no_client_cert = {k: v for k, v in settings.items() if k not in ("ssl.certificate.pem", "ssl.key.pem")}
    with pytest.raises(apiversions.NotRead):
        apiversions.read(no_client_cert)
    notes = minimums.require("run", (Cluster.from_settings("source", {**settings, "ssl.engine.id": "x"},
                                                          "source cluster (tls)"),))
    assert notes == ["the source cluster (tls) was not checked for `run`'s minimums: its ApiVersions could not be "
                     "read (TLS settings only librdkafka can honour: ssl.engine.id)"]
    assert settings["sasl.password"] not in caplog.text


def _command_config(broker, pki) -> Path:
    """The Java tool's client properties (0600, beside the broker's own config)."""
    path = broker.dir / "tool.properties"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
                  "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                  f'username="admin" password="{broker.sasl_users["admin"]}";\n'
                  f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca}\n"
                  f"ssl.keystore.type=PKCS12\nssl.keystore.location={pki.client_p12}\n"
                  f"ssl.keystore.password={tls.KEYSTORE_PASSWORD}\n")
    return path
