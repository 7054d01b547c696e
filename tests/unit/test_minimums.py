"""driver/minimums: a command refuses (exit 2) when a cluster it touches answers as too old, reads each cluster's
answer once within a command's scope, and goes on (saying so) when a cluster's answer cannot be read. The answers
are real ones (tests/data/apiversions); only their transport is replaced here (test_broker_minimums reads them
from live brokers)."""

import json
import logging
from pathlib import Path

import pytest

from eosmirror.core.errors import BrokerTooOldError
from eosmirror.driver import minimums
from eosmirror.kafka import apiversions
from eosmirror.kafka.cluster import Cluster

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "apiversions"


def table(version):
    doc = json.loads((FIXTURES / f"kafka-{version}.json").read_text())
    return {api["key"]: (api["min"], api["max"]) for api in doc["apis"]}


@pytest.fixture
def answers(monkeypatch):
    """bootstrap -> the table its broker answers (or None: nothing answers); the reads made, in order."""
    known, asked = {}, []

    def read(settings, budget_s=apiversions.BUDGET_SECONDS):
        asked.append(settings["bootstrap.servers"])
        found = known.get(settings["bootstrap.servers"])   # a table, "down" (no connection) or None (TLS failed)
        if found is None:
            raise apiversions.NotRead("127.0.0.1:1: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
        if found == "down":
            raise apiversions.NotRead("127.0.0.1:1: [Errno 111] Connection refused", unreachable=True)
        return apiversions.Answer(settings["bootstrap.servers"], found, 0.001)

    monkeypatch.setattr(apiversions, "read", read)
    return known, asked


def clusters(source="old:9092", target="new:9092"):
    return (Cluster.from_settings("source", {"bootstrap.servers": source, "sasl.password": "s3cret"},
                                  label=f"source cluster ({source})"),
            Cluster.from_settings("target", {"bootstrap.servers": target}, label=f"target cluster ({target})"))


def test_an_old_target_refuses_the_command_with_exit_2(answers):
    known, _ = answers
    old = {k: v for k, v in table("2.8.2").items() if not 48 <= k <= 61}
    old[28], old[9] = (0, 2), (0, 6)
    known.update({"old:9092": table("4.3.1"), "new:9092": old})
    with pytest.raises(BrokerTooOldError) as refused:
        minimums.require("run", clusters())
    assert refused.value.exit_code == 2
    assert "the target cluster (new:9092) answers as Kafka 2.4" in str(refused.value)
    assert "TxnOffsetCommit v3 (API key 28), Kafka 2.5" in str(refused.value)


def test_a_2_8_target_runs_and_the_left_out_features_are_logged(answers, caplog):
    known, _ = answers
    known.update({"old:9092": table("2.8.2"), "new:9092": table("2.8.2")})
    with caplog.at_level(logging.WARNING, logger=minimums.log.name):
        notes = minimums.require("run", clusters())
    assert len(notes) == 2 and all(n.startswith("the target cluster (new:9092), answering as Kafka 2.8 (its ApiVersions "
                                                "lack DescribeTransactions, new in 3.0): ") for n in notes)
    assert [r.getMessage() for r in caplog.records] == notes


def test_one_read_per_cluster_within_a_command_scope(answers):
    known, asked = answers
    known.update({"old:9092": table("4.3.1"), "new:9092": table("4.3.1")})
    with minimums.scope():
        for command in ("switchover", "run", "verify"):   # a switchover's own check, its final run, its verify
            assert minimums.require(command, clusters()) == []
    assert sorted(asked) == ["new:9092", "old:9092"]   # the two clusters are asked at once: in either order
    minimums.require("run", clusters())   # outside a scope: read again
    assert sorted(asked[2:]) == ["new:9092", "old:9092"]


def test_a_cluster_that_does_not_answer_is_not_checked_and_that_is_said(answers, caplog):
    known, asked = answers
    known["new:9092"] = table("4.3.1")
    with minimums.scope():
        notes = minimums.require("run", clusters())
        minimums.require("verify", clusters())
    assert notes == ["the source cluster (old:9092) was not checked for `run`'s minimums: its ApiVersions could not "
                     "be read (127.0.0.1:1: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed)"]
    assert asked == ["old:9092", "new:9092"]   # the failure is remembered for the command too
    assert "s3cret" not in caplog.text


def test_a_cluster_nothing_reaches_is_left_to_the_commands_own_request(answers, caplog):
    known, _ = answers
    known.update({"old:9092": "down", "new:9092": table("4.3.1")})
    with caplog.at_level(logging.INFO, logger=minimums.log.name):
        assert minimums.require("run", clusters()) == []
    assert [r.levelname for r in caplog.records] == ["INFO"] and "Connection refused" in caplog.text


def too_old():
    """The 2.8.2 answer cut back as Kafka 2.4 answers (TxnOffsetCommit up to v2)."""
    old = {k: v for k, v in table("2.8.2").items() if not 48 <= k <= 61}
    old[28], old[9] = (0, 2), (0, 6)
    return old


def test_a_transition_refuses_before_it_records_anything(answers):
    from eosmirror.core.mirrorstate import MirrorState, Phase
    from eosmirror.core.transitions import Command
    from eosmirror.driver.transition import Transition

    known, asked = answers
    known["new:9092"] = too_old()
    written = []
    run = Transition(Command.PROMOTE, "m1", record_to=written.append, clusters=clusters()[1:])
    with pytest.raises(BrokerTooOldError, match=r"`eosmirror promote` refused: the target cluster \(new:9092\)"):
        run.check(MirrorState(Phase.MIRRORING, 1, "cli:ops"))
    assert written == [] and run.steps == []
    # Done already: nothing is written, so nothing is asked of the brokers.
    done = Transition(Command.SWITCHOVER, "m1", record_to=written.append, clusters=clusters()[1:])
    assert done.check(MirrorState(Phase.SWITCHED_OVER, 1, "cli:ops")).value == "done"
    assert asked == ["new:9092"]


def test_a_run_refuses_in_its_resolve_step_before_its_first_request(answers, tmp_path):
    from eosmirror.driver.run import MirrorRun
    from tests.support.configs import one

    known, asked = answers
    known.update({"127.0.0.1:1": table("4.3.1"), "127.0.0.1:2": too_old()})
    mirror = one(source={"config": {"bootstrap.servers": "127.0.0.1:1"}},
                 target={"config": {"bootstrap.servers": "127.0.0.1:2"}})
    with pytest.raises(BrokerTooOldError, match=r"`eosmirror run` refused: the target cluster \(inline config, "
                                                r"127.0.0.1:2\) answers as Kafka 2.4"):
        MirrorRun(mirror).resolve()   # nothing listens on these ports: any request after the check would hang
    assert sorted(asked) == ["127.0.0.1:1", "127.0.0.1:2"]   # asked at once: in either order
    with pytest.raises(BrokerTooOldError, match=r"`eosmirror migrate` refused"):
        MirrorRun(mirror, command="migrate").resolve()
