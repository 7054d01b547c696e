"""Failback of consumer groups after a reverse, across both offset maps (real brokers, real clients).

The old source A (this file's own broker, port 18180, so it can be SIGKILLed) is mirrored to the new
primary B in two runs; A receives records that never reach B (the divergence: committed and aborted
transactions) and dies with a transaction open; B is promoted and receives records of its own; A
comes back, `eosmirror reverse --divergence copy`, and the reverse mirror copies B's records to A.
Consumer groups then read B to many positions, with real consumers (librdkafka and Kafka's own
Java consumer): inside the forward-copied range, between the forward runs, right after the last
copy, at the promotion point, inside the B-produced range, at the end of what the reverse mirror
copied and beyond it. `eosmirror groups sync m --direction failback` and `eosmirror groups sync
m__reverse` plan the same offsets; after the failback a consumer of each group on A receives FIRST the
record after the last one it processed on B, then exactly what it would have read on B (0 re-reads,
0 skips; A's diverged records aside, which lie between the two maps); the diverged records a group
passes over are those a read_committed reader of A finds. Records carry their story in their values:
a (copied A -> B), x (diverged: only on A), b c e (produced on B after the promotion)."""

from __future__ import annotations

import time

import pytest

from eosmirror.core import naming
from eosmirror_tools.kit import cluster, waits
from tests.helpers import cli, create_topic, mirror, mirrors_file, producer, read_all, run, seed_sequence
from tests.helpers import transactional_batches as batches
from tests.support.clusters import CLI_BUDGET, PARTITIONS, json_tail, killable_cluster
from tests.support.groups import consume_and_commit, group_offsets, librdkafka_reads_to_the_end, read_as
from tests.support.java import java_reads_to_the_end, java_records
from tests.support.transactions import abort_hanging_transaction

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
OLD_SOURCE_PORT = 18180
COPIED = 30            # a records per partition, copied by m in two runs of 15
DIVERGED = 8           # x records per partition committed on A after m's last run (and 2 aborted between them)
ON_B = 12              # b records per partition committed on B after the promotion (and 2 aborted between them)


@pytest.fixture
def old_source():
    with killable_cluster("failback-old-source", OLD_SOURCE_PORT) as source:
        yield source


def write_with_an_abort(conf, topic, txn_id, prefix: str, count: int) -> None:
    """Per partition ``count`` committed records '<prefix><k>-<n>' in two transactions with an aborted one
    of 2 records between them (markers and aborted records take offsets)."""
    half = count // 2
    for k in range(PARTITIONS):
        batches(conf, topic, f"{txn_id}-{k}", [(True, [f"{prefix}{k}-{n}".encode() for n in range(half)]),
                                               (False, [f"{prefix}{k}-aborted-{n}".encode() for n in range(2)]),
                                               (True, [f"{prefix}{k}-{n}".encode() for n in range(half, count)])],
                partition=k)


def promoted_and_reversed(old_source, target_conf, unique, tmp_path):
    """m copies A -> B, A dies with a transaction open, B promoted, produced on, A back, reversed (copy),
    m__reverse run once. Returns (source settings, topic, m, mirrors file, the reverse's report, seconds
    per step). The group at the promotion point reads B between the promotion and B's first record."""
    steps = {}
    source_conf = old_source.client_config()
    topic = create_topic(source_conf, unique("pay"), partitions=PARTITIONS)
    m = mirror(unique("m"), [topic], source={"config": source_conf}, groups={})
    config = mirrors_file(tmp_path / "mirrors.yaml", [{
        "name": m.name, "source": {"config": source_conf}, "target": {"local": "target"}, "topics": list(m.topics),
        "slots": m.slots, "max_transaction_seconds": m.max_transaction_seconds, "groups": {}}])
    seed_sequence(source_conf, topic, PARTITIONS, COPIED // 2, prefix="a")
    assert run(m)["status"] == "ok"
    p = producer(source_conf, **{"enable.idempotence": True})
    for n in range(COPIED // 2, COPIED):
        for k in range(PARTITIONS):
            p.produce(topic, value=f"a{k}-{n}".encode(), partition=k)
    p.flush(30)
    assert run(m)["status"] == "ok"                              # a marker on B between the two runs
    write_with_an_abort(source_conf, topic, unique("x"), "x", DIVERGED)
    txn = producer(source_conf, **{"transactional.id": unique("open-txn"), "transaction.timeout.ms": 10_000})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce(topic, value=b"in-flight", partition=0)
    txn.flush(10)
    cluster.stop(old_source, hard=True)                          # SIGKILL with the transaction open

    started = time.monotonic()
    done = cli("promote", m.name, "--config", str(config), "--source-seconds", "3", "--no-pause", "--json",
               timeout=CLI_BUDGET)
    assert done.returncode in (0, 5), done.stdout + done.stderr
    steps["promote"] = time.monotonic() - started
    point = {p["partition"]: p["target_end"] for p in json_tail(done.stdout)["partitions"]}
    at_point = unique("point")          # a consumer that read B to its end right after the promotion
    assert librdkafka_reads_to_the_end(target_conf, at_point, topic) == COPIED * PARTITIONS
    write_with_an_abort(target_conf, topic, unique("b"), "b", ON_B)

    cluster.start(old_source, timeout=waits.service_budget(90, cap_seconds=240))
    started = time.monotonic()
    for _ in range(3):   # the killed producer's transaction may outlive its timeout on the restarted broker
        done = cli("reverse", m.name, "--config", str(config), "--divergence", "copy", "--no-unpause",
                   "--settle-seconds", "5", "--json", timeout=CLI_BUDGET)
        if "still held by an open transaction" not in done.stderr:
            break
        abort_hanging_transaction(source_conf, done.stderr)
    assert done.returncode == 0, done.stdout + done.stderr
    steps["reverse"] = time.monotonic() - started
    reversed_ = json_tail(done.stdout)
    assert reversed_["divergence"]["total"] == DIVERGED * PARTITIONS, reversed_["divergence"]
    started = time.monotonic()
    assert run(m.reverse())["status"] == "ok"
    steps["m__reverse run"] = time.monotonic() - started
    return source_conf, topic, m, config, (at_point, point), steps


def on_b_from(target_conf, topic, committed: dict[int, int]) -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    """(processed: the values below each committed offset, rest: those at or after it), read from B."""
    done, rest = {}, {}
    for k, offset in committed.items():
        records = read_all(target_conf, topic, k)
        done[k] = [r.value.decode() for r in records if r.offset < offset]
        rest[k] = [r.value.decode() for r in records if r.offset >= offset]
    return done, rest


def plans(report) -> dict[str, list[tuple]]:
    return {g["group"]: [(p["from_topic"], p["partition"], p["committed"], p["outcome"], p["decision"],
                          p["new_offset"], p["via"], p["diverged"]) for p in g["partitions"]] for g in report["groups"]}


def test_groups_committed_anywhere_on_the_new_primary_fail_back_to_the_exact_offset_on_the_old_source(
        old_source, target_conf, unique, tmp_path):
    test_started = time.monotonic()
    source_conf, topic, m, config, (at_point, point), steps = promoted_and_reversed(old_source, target_conf, unique,
                                                                                    tmp_path)
    back = naming.reverse_mirror_name(m.name)
    seed_sequence(target_conf, topic, PARTITIONS, 3, prefix="c")          # on B, not copied back yet

    # Groups on B, positions taken by real consumers: (a) inside the forward-copied range; right after the
    # last copy (only m's marker before the promotion point); inside the B-produced range; a mix (between
    # the forward runs, inside B's second transaction, right after B's last b record); Kafka's Java consumer
    # and librdkafka reading to the end (beyond what m__reverse copied: waiting first).
    forward_in, all_copies, b_in, mix = unique("fwd"), unique("copies"), unique("mid"), unique("mix")
    consume_and_commit(target_conf, forward_in, topic, {k: 10 for k in range(PARTITIONS)})
    consume_and_commit(target_conf, all_copies, topic, {k: COPIED for k in range(PARTITIONS)})
    consume_and_commit(target_conf, b_in, topic, {k: COPIED + 4 for k in range(PARTITIONS)})
    consume_and_commit(target_conf, mix, topic, {0: COPIED // 2, 1: COPIED + 8, 2: COPIED + ON_B})
    java, rdk = unique("java"), unique("rdk")
    everything = (COPIED + ON_B + 3) * PARTITIONS
    assert java_reads_to_the_end(target_conf, java, topic) == everything
    assert librdkafka_reads_to_the_end(target_conf, rdk, topic) == everything
    groups = [forward_in, all_copies, at_point, b_in, mix, java, rdk]
    committed = {g: group_offsets(target_conf, g, topic) for g in groups}
    # the cases really happen: right after the last copy is below the promotion point (m's marker lies
    # between), the consumer that read to the end right after the promotion sits exactly at it
    assert all(committed[all_copies][k] < point[k] == committed[at_point][k] for k in range(PARTITIONS)), (
        committed[all_copies], committed[at_point], point)

    # One decision, two commands: the failback of m and the failover of m__reverse plan the same offsets.
    started = time.monotonic()
    by_m = cli("groups", "plan", m.name, "--config", str(config), "--direction", "failback", "--json",
               "--groups", *groups)
    steps["plan (CLI)"] = time.monotonic() - started
    by_back = cli("groups", "plan", back, "--config", str(config), "--json", "--groups", *groups)
    assert by_m.returncode == 4 and by_back.returncode == 0, by_m.stdout + by_m.stderr + by_back.stderr
    assert plans(json_tail(by_m.stdout)) == plans(json_tail(by_back.stdout))
    planned = plans(json_tail(by_m.stdout))
    expected_maps = {forward_in: ["forward"] * 3, mix: ["forward", "reverse", "reverse"]}
    for g in groups:
        assert [p[6] for p in planned[g]] == expected_maps.get(g, ["reverse"] * 3), (g, planned[g])
        assert {p[3] for p in planned[g]} == ({"waiting"} if g in (java, rdk) else {"exact"}), (g, planned[g])

    started = time.monotonic()
    first = cli("groups", "sync", m.name, "--config", str(config), "--direction", "failback", "--groups", *groups)
    steps["failback (CLI)"] = time.monotonic() - started
    assert first.returncode == 4, first.stdout + first.stderr           # the groups at the end wait
    assert f"run {back} first" in first.stdout and "passes over" in first.stdout, first.stdout
    print(first.stdout)
    for g in (java, rdk):
        assert set(group_offsets(source_conf, g, topic).values()) == {None}, g      # nothing written for them
    assert run(m.reverse())["status"] == "ok"                            # copies the c records
    second = cli("groups", "sync", back, "--config", str(config), "--json", "--groups", *groups)
    assert second.returncode == 0, second.stdout + second.stderr
    report = {g["group"]: g for g in json_tail(second.stdout)["groups"]}
    on_a = {k: {r.offset for r in read_all(source_conf, topic, k)} for k in range(PARTITIONS)}
    for g in groups:
        for p in report[g]["partitions"]:
            if g in (java, rdk):
                assert p["decision"] == "write", (g, p)
            elif p["decision"] != "unchanged":
                # the group right after B's last b record sat at the end of m__reverse's first copies (its
                # marker on A); now that the c records follow, it moves to the first one, across no record
                assert p["decision"] == "write" and not {o for o in on_a[p["partition"]]
                                                         if p["current"] <= o < p["new_offset"]}, (g, p)
    seed_sequence(target_conf, topic, PARTITIONS, 2, prefix="e")         # more on B, so that every group has a next
    assert run(m.reverse())["status"] == "ok"

    seen = {g: on_b_from(target_conf, topic, committed[g]) for g in groups}

    # The diverged records each reverse-map move passes over are those a read_committed reader of A finds.
    diverged = {k: [r.value.decode() for r in read_all(source_conf, topic, k)
                    if r.value.decode().startswith(f"x{k}-")] for k in range(PARTITIONS)}
    assert all(len(v) == DIVERGED for v in diverged.values()) and "in-flight" not in str(diverged)
    side = naming.diverged_topic(topic, m.name)
    for g in groups:
        for p in planned[g]:
            if p[6] == "reverse" and p[3] == "exact":
                assert p[7]["records"] == len(diverged[p[1]]) and p[7]["side_topic"] == f"{side}[{p[1]}]", (g, p)
            else:
                assert p[7] is None, (g, p)

    # On A, each group's consumer receives first the record after the last one it processed on B, then
    # what it would have read on B: 0 re-reads, 0 skips (A's diverged records aside).
    started = time.monotonic()
    totals = {"rereads": 0, "skips": 0, "partitions": 0}
    for g in groups:
        if g == java:
            got = {k: [value for _, value in records] for k, records in java_records(source_conf, topic, g).items()}
        else:
            got = read_as(source_conf, g, topic)
        processed, rest = seen[g]
        for k in range(PARTITIONS):
            kept = [v for v in got[k] if v not in diverged[k]]
            assert kept[:1] == rest[k][:1], (g, k, kept[:3], rest[k][:3])          # FIRST the next record
            totals["rereads"] += len(set(got[k]) & set(processed[k]))
            totals["skips"] += len(set(rest[k]) - set(got[k]))
            totals["partitions"] += 1
            assert kept == rest[k], (g, k)
            # A's diverged records lie between the maps: read only by a group that has copies left to read
            passed = expected_maps.get(g, ["reverse"] * 3)[k] == "reverse"
            assert len(got[k]) - len(kept) == (0 if passed else DIVERGED), (g, k, got[k][:12])
    steps["consumers on A"] = time.monotonic() - started
    assert totals == {"rereads": 0, "skips": 0, "partitions": len(groups) * PARTITIONS}, totals
    print(f"failback after reverse: {len(groups)} groups x {PARTITIONS} partitions exact, {totals}; diverged "
          f"{DIVERGED} per partition passed over by the reverse-map moves; steps "
          f"{ {k: round(v, 1) for k, v in steps.items()} }; test {time.monotonic() - test_started:.1f} s")
