"""The minimums: real ApiVersions answers of Kafka 2.8.2, 3.9.1 and 4.3.1 (tests/data/apiversions, each captured
from a running broker and checked against Kafka's own kafka-broker-api-versions.sh of that version) pass every
command; a 2.4-like answer (no TxnOffsetCommit v3) is refused as a target with a message naming the cluster, the
release, the feature and the minimum, and passes as a source; what a degradable feature leaves out is listed."""

import json
import struct
from pathlib import Path

import pytest

from eosmirror.core import brokerfeatures as bf
from eosmirror.core.errors import EXIT_CONFIG, BrokerTooOldError
from eosmirror.kafka import apiversions

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "apiversions"
LABEL = "target cluster (connection:old, old-kafka:9092)"


def table(version: str) -> dict[int, tuple[int, int]]:
    doc = json.loads((FIXTURES / f"kafka-{version}.json").read_text())
    assert doc["kafka"] == version and doc["apis"]
    return {api["key"]: (api["min"], api["max"]) for api in doc["apis"]}


def like_2_4() -> dict[int, tuple[int, int]]:
    """The 2.8.2 answer cut back to what Kafka 2.4 serves of the APIs the minimums look at: no API added in 2.5
    or later (keys 48-61), TxnOffsetCommit up to v2, OffsetFetch up to v6, Metadata up to v9 (no topic ids)."""
    cut = {k: v for k, v in table("2.8.2").items() if not 48 <= k <= 61}
    cut[28], cut[9], cut[3] = (0, 2), (0, 6), (0, 9)
    return cut


@pytest.mark.parametrize("version", ["3.9.1", "4.3.1"])
def test_a_3_x_or_4_x_broker_passes_every_command_on_every_side_with_nothing_left_out(version):
    for command, roles in bf.NEEDS.items():
        for role in roles:
            verdict = bf.check(table(version), command, role, LABEL, acl_sync=True)
            assert verdict.ok and verdict.left_out == (), (command, role, verdict)
    assert bf.release_of(table(version)) == "Kafka 3.0 or newer"


def test_a_2_8_broker_passes_every_command_and_says_what_the_transaction_tools_leave_out():
    for command, roles in bf.NEEDS.items():
        for role in roles:
            assert bf.check(table("2.8.2"), command, role, LABEL, acl_sync=True).ok, (command, role)
    verdict = bf.check(table("2.8.2"), "run", "target", LABEL)
    assert verdict.release == "Kafka 2.8 (its ApiVersions lack DescribeTransactions, new in 3.0)"
    assert verdict.left_out == (
        f"{bf.TXN_STATES.left_out}: the state of a transactional id (KIP-664, kafka-transactions.sh describe) needs "
        f"DescribeTransactions v0 (API key 65), Kafka 3.0; the broker does not serve DescribeTransactions at all",
        f"{bf.HANGING.left_out}: finding hanging transactions (KIP-664, kafka-transactions.sh find-hanging) needs "
        f"ListTransactions v0 (API key 66), Kafka 3.0; the broker does not serve ListTransactions at all")
    assert bf.check(table("2.8.2"), "run", "source", LABEL).left_out == ()


def test_a_2_4_like_target_is_refused_naming_cluster_release_feature_and_minimum():
    verdict = bf.check(like_2_4(), "run", "target", LABEL)
    assert not verdict.ok
    assert verdict.refusal.startswith(f"`eosmirror run` refused: the {LABEL} answers as Kafka 2.4 (its ApiVersions "
                                      f"lack TxnOffsetCommit v3, new in 2.5), and run needs Kafka 2.5 or newer there:")
    assert ("transactional offset commits with the consumer-group metadata (KIP-447) needs TxnOffsetCommit v3 "
            "(API key 28), Kafka 2.5; the broker serves TxnOffsetCommit v0-v2") in verdict.refusal
    assert "needs OffsetFetch v7 (API key 9), Kafka 2.5; the broker serves OffsetFetch v0-v6" in verdict.refusal
    assert "Nothing was written" in verdict.refusal
    # Still listed: what the degradable features leave out (topic ids and producers of 2.8, transactions of 3.0).
    assert [line.split(": ")[0] for line in verdict.left_out] == [
        f.left_out for f in (bf.TOPIC_IDS, bf.PRODUCERS, bf.TXN_STATES, bf.HANGING)]


def test_a_2_4_like_source_is_mirrored_from_but_not_reversed_onto():
    for command in ("run", "switchover", "verify", "lag", "migrate"):
        assert bf.check(like_2_4(), command, "source", LABEL).ok, command
    for command in ("reverse", "resume"):   # the old source receives the reverse mirror's progress and state
        assert "TxnOffsetCommit v3" in bf.check(like_2_4(), command, "source", LABEL).refusal
    assert bf.check(like_2_4(), "run", "source", LABEL).left_out == (
        f"{bf.TOPIC_IDS.left_out}: topic ids (KIP-516) needs Metadata v10 (API key 3), Kafka 2.8; the broker serves "
        f"Metadata v0-v9",)


def test_acl_sync_degrades_on_a_broker_without_describe_cluster():
    verdict = bf.check(like_2_4(), "run", "source", LABEL, acl_sync=True)
    assert verdict.ok
    assert any(line.startswith("topic ACLs are not synced (sync_topic_acls): ACL sync: the principal's cluster "
                               "permissions (KIP-700) needs DescribeCluster v0 (API key 60), Kafka 2.8")
               for line in verdict.left_out)
    assert not any("ACL" in line for line in bf.check(like_2_4(), "run", "source", LABEL).left_out)


def test_a_pre_transactions_target_is_refused_and_named_by_its_markers():
    old = {k: v for k, v in like_2_4().items() if k < 23}     # as 0.10.2: no transactions, no TxnOffsetCommit
    old[1], old[2] = (0, 3), (0, 1)
    assert bf.release_of(old) == "Kafka 0.10.1 (its ApiVersions lack TxnOffsetCommit, new in 0.11)"
    verdict = bf.check(old, "run", "source", "source cluster (x)")
    assert "read_committed fetches needs Fetch v4 (API key 1), Kafka 0.11; the broker serves Fetch v0-v3" in \
        verdict.refusal
    assert "transactions needs EndTxn v0" in bf.check(old, "switchover --cancel", "target", LABEL).refusal


def test_an_unknown_command_is_a_programming_error():
    with pytest.raises(ValueError, match="no broker needs"):
        bf.needs("fence", "target")


def test_the_refusal_is_a_config_error_exit_2():
    assert issubclass(BrokerTooOldError, Exception) and BrokerTooOldError("x").exit_code == EXIT_CONFIG


def encoded(version: str, correlation_id: int) -> bytes:
    """ApiVersionsResponse v0 as a broker writes it: correlation id, error code, [key, min, max]."""
    apis = sorted(table(version).items())
    return (struct.pack(">ihi", correlation_id, 0, len(apis))
            + b"".join(struct.pack(">hhh", k, lo, hi) for k, (lo, hi) in apis))


def test_the_wire_answer_parses_back_to_the_table_and_bad_answers_are_named():
    assert apiversions.parse(encoded("4.3.1", 7), 7) == table("4.3.1")
    with pytest.raises(apiversions.NotRead, match="another request"):
        apiversions.parse(encoded("4.3.1", 7), 8)
    with pytest.raises(apiversions.NotRead, match="truncated"):
        apiversions.parse(encoded("4.3.1", 7)[:40], 7)
    with pytest.raises(apiversions.NotRead, match="error code 35"):
        apiversions.parse(struct.pack(">ihi", 7, 35, 0), 7)
    # The request: size, api key 18, version 0, correlation id, client id; no body.
    sent = apiversions.request(7)
    assert struct.unpack(">ihhih", sent[:14]) == (len(sent) - 4, 18, 0, 7, len(apiversions.CLIENT_ID))
    assert sent[14:] == apiversions.CLIENT_ID


def test_bootstrap_addresses_keep_their_order_and_ipv6_hosts():
    assert apiversions.addresses({"bootstrap.servers": "a:9092, SASL_SSL://b:9093,[::1]:9094,bad"}) == [
        ("a", 9092), ("b", 9093), ("::1", 9094)]


def test_nothing_listening_is_not_read_naming_the_address():
    with pytest.raises(apiversions.NotRead, match="127.0.0.1:1: ") as info:
        apiversions.read({"bootstrap.servers": "127.0.0.1:1"}, budget_s=1.0)
    assert info.value.unreachable


def test_a_silent_broker_gets_its_share_of_the_budget_and_the_next_one_is_asked():
    """Two peers that accept the connection and never answer: both are asked, and named, within the budget."""
    import socket
    import time

    with socket.create_server(("127.0.0.1", 0)) as first, socket.create_server(("127.0.0.1", 0)) as second:
        ports = [s.getsockname()[1] for s in (first, second)]
        began = time.monotonic()
        with pytest.raises(apiversions.NotRead) as info:
            apiversions.read({"bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in ports)}, budget_s=1.0)
        took = time.monotonic() - began
    assert all(f"127.0.0.1:{p}: " in str(info.value) for p in ports), str(info.value)
    assert 0.9 <= took < 1.6 and info.value.unreachable   # timed out: the command's own request will tell


def test_a_group_move_is_judged_on_the_side_it_writes():
    """Failover writes the target's groups, failback the source's: either side, as written, needs KIP-447."""
    for role in ("source", "target"):
        assert "TxnOffsetCommit v3" in bf.check(like_2_4(), "groups", role, LABEL).refusal
        assert bf.check(table("2.8.2"), "groups", role, LABEL).ok


def test_a_kraft_controller_answer_is_named_as_a_wrong_address_not_an_old_broker():
    # the API keys a local Kafka 4.3.1 KRaft controller listener answered (Fetch for the Raft log, no
    # Produce, no Metadata)
    keys = [1, 17, 18, 19, 20, 29, 30, 31, 32, 33, 36, 37, 38, 39, 40, 41, 43, 44, 45, 46, 49, 50, 51, 52, 53, 54,
            55, 56, 57, 58, 59, 60, 62, 63, 64, 67, 70, 73, 80, 81, 82]
    controller = dict.fromkeys(keys, (0, 1))
    verdict = bf.check(controller, "run", "source", "source cluster (127.0.0.1:9093)")
    assert not verdict.ok
    assert "Is it a KRaft controller port?" in verdict.refusal and "127.0.0.1:9093" in verdict.refusal
    assert "Upgrade" not in verdict.refusal
