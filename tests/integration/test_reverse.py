"""The way back after a real disaster, first part (real brokers, real clients): the source broker is
SIGKILLed mid-production, the target promoted, records written to the target, the old source restarted;
`eosmirror reverse --divergence copy` reports the old source's records that never reached the target
(judged against a read_committed reader of the old source) and copies them once to a side topic; the
reverse mirror then brings the old source exactly the records produced on the target after the
promotion, once, in order, and none that came from it. And the refusals.

The old source is this file's own broker (port 18980) so it can be killed and restarted."""

from __future__ import annotations

import time

import pytest

from eosmirror.core import naming
from eosmirror.core.mirrorstate import Phase
from eosmirror.driver import lag
from eosmirror.kafka import state
from eosmirror.kafka.cluster import Cluster
from eosmirror_tools.kit import cluster, waits
from tests.helpers import cli, create_topic, mirror, producer, read_all, run, seed_sequence, write_mirror_file
from tests.support.clusters import CLI_BUDGET, PARTITIONS, json_tail, killable_cluster, mirror_from_killable
from tests.support.load import Load
from tests.support.transactions import abort_hanging_transaction

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
REVERSE_SOURCE_PORT = 18980
AFTER_PROMOTION = 12          # records per partition produced on the new primary after the promotion


@pytest.fixture
def killable_source():
    with killable_cluster("reverse-source", REVERSE_SOURCE_PORT) as source:
        yield source


def promote_with_the_source_killed(killable_source, unique, tmp_path):
    """A mirror A -> B copied under load, A SIGKILLed with a transaction open, B promoted (exit 5)."""
    source_conf, topic, m, config = mirror_from_killable(killable_source, unique, tmp_path)
    with Load(source_conf, topic, "a") as load:
        load.wait_more(30, "the producers before the run")
        assert run(m)["status"] == "ok"
        load.wait_more(20, "the producers after the run")
        lag.report(m, record=True)
        load.wait_more(30, "the producers after the observation")   # never on the target: the divergence
        txn = producer(source_conf, **{"transactional.id": unique("open-txn"), "transaction.timeout.ms": 10_000})
        txn.init_transactions(30)
        txn.begin_transaction()
        txn.produce(topic, value=b"in-flight", partition=0)
        txn.flush(10)
        cluster.stop(killable_source, hard=True)
        load.stop_event.set()
    done = cli("promote", m.name, "--config", str(config), "--source-seconds", "3", "--no-pause", "--json",
               timeout=CLI_BUDGET)
    assert done.returncode == 5, done.stdout + done.stderr
    return m, topic, config, source_conf, json_tail(done.stdout)


def test_reverse_reports_and_copies_the_divergence_once_and_the_reverse_mirror_copies_back_exactly(
        killable_source, target_conf, unique, tmp_path):
    m, topic, config, source_conf, promoted = promote_with_the_source_killed(killable_source, unique, tmp_path)
    down = cli("reverse", m.name, "--config", str(config), "--source-seconds", "3", "--no-unpause", timeout=120)
    assert down.returncode == 2 and "old source unreachable: bring it back, then reverse again" in down.stderr, (
        down.stdout + down.stderr)
    target = Cluster.from_settings("target", target_conf)
    assert state.read_mirror_state(target, m.name, m.progress_group).phase is Phase.PROMOTED   # nothing written

    cluster.start(killable_source, timeout=waits.service_budget(90, cap_seconds=240))
    early = cli("run", naming.reverse_mirror_name(m.name), "--config", str(config), "--inprocess", timeout=120)
    assert early.returncode == 2 and "is not-prepared" in early.stderr, early.stdout + early.stderr
    p = producer(target_conf, **{"enable.idempotence": True})      # the producers moved to the new primary
    for n in range(AFTER_PROMOTION):
        for k in range(PARTITIONS):
            p.produce(topic, value=f"b{k}-{n}".encode(), partition=k)
    p.flush(30)

    # A producer of the old source still holds a transaction open: reverse waits, then refuses, naming it.
    # (Whether the killed producer's transaction outlived the broker's restart is the broker's timing: a
    # live one held on purpose makes the refusal certain.)
    holder = producer(source_conf, **{"transactional.id": unique("held"), "transaction.timeout.ms": 120_000})
    holder.init_transactions(30)
    holder.begin_transaction()
    holder.produce(topic, value=b"held", partition=PARTITIONS - 1)
    holder.flush(10)
    held = cli("reverse", m.name, "--config", str(config), "--divergence", "copy", "--no-unpause",
               "--settle-seconds", "5", timeout=CLI_BUDGET)
    assert held.returncode == 1 and "still held by an open transaction" in held.stderr, (
        held.stdout + held.stderr)
    assert state.read_mirror_state(target, m.name, m.progress_group).phase is Phase.PROMOTED   # nothing written
    holder.abort_transaction(30)
    for _ in range(3):   # the killed producer's, if the restarted broker still holds it: as an operator would
        started = time.monotonic()
        done = cli("reverse", m.name, "--config", str(config), "--divergence", "copy", "--no-unpause",
                   "--settle-seconds", "5", "--json", timeout=CLI_BUDGET)
        took = time.monotonic() - started
        if "still held by an open transaction" not in done.stderr:
            break
        abort_hanging_transaction(source_conf, done.stderr)
    assert done.returncode == 0, done.stdout + done.stderr
    outcome = json_tail(done.stdout)
    assert outcome["state"] == "reversed", outcome
    diverged = check_the_divergence_against_a_reader(outcome, promoted, source_conf, target_conf, topic, m.name)
    print(f"reverse took {took:.1f} s, steps {outcome['steps']}; diverged {outcome['divergence']['total']} "
          f"record(s), per partition {[p['count'] for p in outcome['divergence']['partitions']]}")

    again = cli("reverse", m.name, "--config", str(config), "--divergence", "copy", "--no-unpause", "--json",
                timeout=CLI_BUDGET)
    assert again.returncode == 0, again.stdout + again.stderr
    repeated = json_tail(again.stdout)
    assert repeated["divergence"]["total"] == outcome["divergence"]["total"] and repeated["progress"] == [], repeated
    assert any(a.startswith("prepared already") for a in repeated["already"]), repeated
    side = naming.diverged_topic(topic, m.name)
    assert {k: [r.value for r in read_all(target_conf, side, k)] for k in range(PARTITIONS)} == diverged  # still once

    before = {k: [r.value for r in read_all(source_conf, topic, k)] for k in range(PARTITIONS)}
    started = time.monotonic()
    back = cli("run", naming.reverse_mirror_name(m.name), "--config", str(config), "--inprocess", timeout=CLI_BUDGET)
    assert back.returncode == 0, back.stdout + back.stderr
    print(f"the reverse mirror's first run (CLI, in-process) took {time.monotonic() - started:.1f} s for "
          f"{AFTER_PROMOTION * PARTITIONS} record(s)")
    assert run(m.reverse())["status"] == "ok"                   # a second run copies nothing more
    for k in range(PARTITIONS):
        now = [r.value for r in read_all(source_conf, topic, k)]
        assert now[:len(before[k])] == before[k], k
        assert now[len(before[k]):] == [f"b{k}-{n}".encode() for n in range(AFTER_PROMOTION)], (k, now[len(before[k]):])
        assert len(set(now)) == len(now), f"a record twice on the old source, partition {k}"
    status = cli("status", m.name, "--config", str(config))
    assert "reversed since" in status.stdout, status.stdout + status.stderr
    # The lag of every mirror (what the lag page and metrics show) lists the reverse mirror after its forward one.
    shown = cli("lag", "--config", str(config), "--json")
    rows = {row["mirror"]: row for row in json_tail(shown.stdout)["mirrors"]}
    assert rows[m.name]["status"] == "REVERSED", rows
    assert rows[naming.reverse_mirror_name(m.name)]["record_lag"] == 0, rows


def check_the_divergence_against_a_reader(outcome, promoted, source_conf, target_conf, topic, mirror_name):
    """Per partition, the report equals what a read_committed reader finds on the old source at or after
    the progress at promotion (and never on the target); the side topic holds exactly those, once."""
    progress = {p["partition"]: p["progress"] for p in promoted["partitions"]}
    side = naming.diverged_topic(topic, mirror_name)
    diverged = {}
    for part in outcome["divergence"]["partitions"]:
        k = part["partition"]
        tail = [r for r in read_all(source_conf, topic, k) if r.offset >= progress[k]]
        assert part["count"] == len(tail), (k, part, len(tail))
        assert b"in-flight" not in [r.value for r in tail]           # the aborted transaction is no record
        if tail:
            assert (part["first_offset"], part["last_offset"]) == (tail[0].offset, tail[-1].offset), (k, part)
            assert (part["first_ms"], part["last_ms"]) == (min(r.timestamp for r in tail),
                                                           max(r.timestamp for r in tail)), (k, part)
        on_target = {r.value for r in read_all(target_conf, topic, k)}
        assert not on_target & {r.value for r in tail}, f"a diverged record reached the target, partition {k}"
        copied = read_all(target_conf, side, k)
        assert [r.value for r in copied] == [r.value for r in tail], k
        assert [dict(r.headers)[naming.DIVERGED_HEADER] for r in copied] == [
            f"{topic}/{k}/{r.offset}".encode() for r in tail]
        diverged[k] = [r.value for r in tail]
    assert outcome["divergence"]["total"] == sum(len(v) for v in diverged.values()) > 0, outcome["divergence"]
    return diverged


def test_reverse_is_refused_for_a_mirroring_mirror_and_a_prefix_mirror(source_conf, target_conf, unique, tmp_path):
    topic = create_topic(source_conf, unique("orders"), partitions=1)
    m = mirror(unique("m"), [topic])
    config = write_mirror_file(tmp_path / "mirrors.yaml", m)
    assert run(m)["status"] == "ok"
    refused = cli("reverse", m.name, "--config", str(config), "--no-unpause", timeout=120)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "follows only promoted, reversing, switched-over" in refused.stderr and f"eosmirror promote {m.name}" in (
        refused.stderr), refused.stderr
    pm = mirror(unique("p"), [topic], replication_policy="prefix", source_alias="dc1")
    prefixed = write_mirror_file(tmp_path / "prefix.yaml", pm, replication_policy="prefix", source_alias="dc1")
    refused = cli("reverse", pm.name, "--config", str(prefixed), "--no-unpause", timeout=120)
    assert refused.returncode == 2 and "replication_policy: prefix" in refused.stderr, refused.stdout + refused.stderr
    assert "the same topic names" in refused.stderr, refused.stderr


def test_a_side_topic_holding_other_data_is_refused_and_the_reverse_continues_without_copying(
        source_conf, target_conf, unique, tmp_path):
    topic = create_topic(source_conf, unique("ledger"), partitions=1)
    m = mirror(unique("m"), [topic])
    config = write_mirror_file(tmp_path / "mirrors.yaml", m)
    seed_sequence(source_conf, topic, 1, 10)
    assert run(m)["status"] == "ok"
    seed_sequence(source_conf, topic, 1, 5, prefix="late")             # never reaches the target
    promoted = cli("promote", m.name, "--config", str(config), "--no-pause", timeout=CLI_BUDGET)
    assert promoted.returncode == 5, promoted.stdout + promoted.stderr
    side = create_topic(target_conf, naming.diverged_topic(topic, m.name), partitions=1)
    p = producer(target_conf)
    p.produce(side, value=b"someone else's", partition=0)
    p.flush(10)

    refused = cli("reverse", m.name, "--config", str(config), "--divergence", "copy", "--no-unpause", timeout=CLI_BUDGET)
    assert refused.returncode == 2 and "holds other data" in refused.stderr, refused.stdout + refused.stderr
    assert [r.value for r in read_all(target_conf, side, 0)] == [b"someone else's"]      # nothing copied
    early = cli("run", naming.reverse_mirror_name(m.name), "--config", str(config), "--inprocess", timeout=120)
    assert early.returncode == 2 and "is not-prepared" in early.stderr, early.stdout + early.stderr
    done = cli("reverse", m.name, "--config", str(config), "--no-unpause", "--json", timeout=CLI_BUDGET)
    assert done.returncode == 0, done.stdout + done.stderr
    outcome = json_tail(done.stdout)
    assert outcome["state"] == "reversed" and outcome["divergence"]["total"] == 5, outcome
    assert outcome["divergence"]["partitions"][0]["side_topic"] is None
