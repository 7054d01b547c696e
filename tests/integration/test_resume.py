"""The way back to the end (real brokers, real clients): A -> B, A SIGKILLed, B promoted, producers on B, A
restarted, `reverse`, the reverse mirror copies B back, B's producers stop, the switch back (`eosmirror
switchover <m>__reverse`, proven safe), producers on A, `eosmirror resume`, and the forward mirror copies
exactly the records A received after the switch back: once, in order, none of those that came from B
(judged with a read_committed reader on record values). A group committed on A after the resume fails over
to B exactly; a stale group left on B inside B's own records (between the promotion point and the switch
back) fails back after the resume to exactly its next record on A, through the retired reverse mirror's map. Then the cycle again: a second promotion and reverse prepare the reverse mirror again, at
the new promotion point. And the refusals (exit 2, state named, nothing written).

A (the old source) is this file's own broker (port 18280) so it can be killed and restarted."""

from __future__ import annotations

import time

import pytest

from eosmirror.core import naming
from eosmirror.core.mirrorstate import Phase
from eosmirror.driver import groups, verify
from eosmirror.kafka import state
from eosmirror.kafka.cluster import Cluster
from eosmirror_tools.kit import cluster, waits
from tests.helpers import cli, create_topic, mirror, mirrors_file, producer, read_all, run
from tests.support.clusters import CLI_BUDGET, PARTITIONS, json_tail, killable_cluster
from tests.support.groups import consume_and_commit, group_offsets, read_as
from tests.support.load import Load

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
RESUME_SOURCE_PORT = 18280


@pytest.fixture
def killable_source():
    with killable_cluster("resume-source", RESUME_SOURCE_PORT) as source:
        yield source


def produce(conf, topic: str, prefix: str, count: int) -> dict[int, list[bytes]]:
    """``count`` numbered records per partition (idempotent producer); returns the values per partition."""
    p = producer(conf, **{"enable.idempotence": True})
    sent: dict[int, list[bytes]] = {k: [] for k in range(PARTITIONS)}
    for n in range(count):
        for k in range(PARTITIONS):
            value = f"{prefix}{k}-{n}".encode()
            p.produce(topic, value=value, partition=k)
            sent[k].append(value)
    assert p.flush(30) == 0
    return sent


def values_of(conf, topic: str) -> dict[int, list[bytes]]:
    return {k: [r.value for r in read_all(conf, topic, k)] for k in range(PARTITIONS)}


def refused(done, *words: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    for word in words:
        assert word in done.stderr, (word, done.stderr)


def test_switch_back_then_resume_copies_only_the_new_records_and_the_cycle_runs_again(
        killable_source, target_conf, unique, tmp_path):
    clock = time.monotonic()
    took: dict[str, float] = {}
    source_conf = killable_source.client_config()
    topic = create_topic(source_conf, unique("ledger"), partitions=PARTITIONS)
    m = mirror(unique("m"), [topic], source={"config": source_conf}, groups={})
    back = m.reverse()
    config = str(mirrors_file(tmp_path / "mirrors.yaml", [{
        "name": m.name, "source": {"config": source_conf}, "target": {"local": "target"}, "topics": list(m.topics),
        "slots": m.slots, "max_transaction_seconds": m.max_transaction_seconds, "groups": {}}]))
    old, new = Cluster.from_settings("source", source_conf), Cluster.from_settings("target", target_conf)

    # 1. A -> B under load, A SIGKILLed (the records after the run are the divergence), B promoted.
    with Load(source_conf, topic, "a") as load:
        load.wait_more(30, "the producers before the run")
        assert run(m)["status"] == "ok"
        load.wait_more(10, "the producers after the run")   # the divergence
        cluster.stop(killable_source, hard=True)
        load.stop_event.set()
    promoted = cli("promote", m.name, "--config", config, "--source-seconds", "3", "--no-pause", timeout=CLI_BUDGET)
    assert promoted.returncode in (0, 5), promoted.stdout + promoted.stderr
    refused(cli("resume", m.name, "--config", config, "--no-unpause", timeout=120),
            "promoted since", f"eosmirror reverse {m.name}")
    assert state.read_mirror_state(new, m.name, m.progress_group).phase is Phase.PROMOTED        # nothing written

    # 2. A back; the switch back of a reverse mirror that was never prepared is refused.
    cluster.start(killable_source, timeout=waits.service_budget(90, cap_seconds=240))
    refused(cli("switchover", back.name, "--config", config, "--no-pause", "--quiet-seconds", "1", "--wait-seconds",
                "5", timeout=120), "not-prepared", f"eosmirror reverse {m.name}")
    assert state.read_mirror_state(old, back.name, back.progress_group).since_ms == 0             # nothing written

    # 3. Producers on B; reverse; resume before the switch back is refused.
    copies = {k: len(v) for k, v in values_of(target_conf, topic).items()}
    on_b = produce(target_conf, topic, "b", 8)
    started = time.monotonic()
    reversed_ = cli("reverse", m.name, "--config", config, "--no-unpause", "--settle-seconds", "30", "--json",
                    timeout=CLI_BUDGET)
    took["reverse"] = time.monotonic() - started
    assert reversed_.returncode == 0, reversed_.stdout + reversed_.stderr
    refused(cli("resume", m.name, "--config", config, "--no-unpause", timeout=120),
            "has not been switched back", f"eosmirror switchover {back.name}")
    assert state.read_mirror_state(new, m.name, m.progress_group).phase is Phase.REVERSED

    # 4. The reverse mirror copies B back; B's producers write a last batch and stop; the switch back.
    a_before = values_of(source_conf, topic)
    assert run(back)["status"] == "ok"
    last = produce(target_conf, topic, "c", 4)               # copied by the switch back's final run
    started = time.monotonic()
    switched = cli("switchover", back.name, "--config", config, "--quiet-seconds", "2", "--wait-seconds", "60",
                   "--no-pause", "--json", "--inprocess", timeout=CLI_BUDGET)
    took["switch back"] = time.monotonic() - started
    assert switched.returncode == 0, switched.stdout[-3000:] + switched.stderr[-3000:]
    outcome = json_tail(switched.stdout)
    assert outcome["safe"], outcome
    a_records = {k: read_all(source_conf, topic, k) for k in range(PARTITIONS)}
    for k in range(PARTITIONS):    # A holds, after its own records, exactly what B received, once
        assert [r.value for r in a_records[k]] == a_before[k] + on_b[k] + last[k], k
    # A stale group on B, which the switch back's group step did not move (a slow application commits it
    # only now): it processed B's first 3 records of each partition, b{k}-3 is its next.
    stale = unique("stale")
    consume_and_commit(target_conf, stale, topic, {k: copies[k] + 3 for k in range(PARTITIONS)})

    # 5. Producers on A again; a record written to B after the switch back refuses the resume (nothing
    #    written) until accepted; resume; the forward mirror copies exactly the new A records.
    on_a = produce(source_conf, topic, "d", 10)
    late = producer(target_conf, **{"enable.idempotence": True})
    late.produce(topic, value=b"late on B", partition=1)
    assert late.flush(30) == 0
    stray = read_all(target_conf, topic, 1)[-1].offset
    refused(cli("resume", m.name, "--config", config, "--no-unpause", timeout=120),
            f"{topic}[1]: 1 record(s) at offsets {stray}..{stray}", "--accept-records-after-switch-back")
    assert state.read_mirror_state(new, m.name, m.progress_group).phase is Phase.REVERSED          # nothing written
    b_before = values_of(target_conf, topic)
    started = time.monotonic()
    resumed = cli("resume", m.name, "--config", config, "--no-unpause", "--accept-records-after-switch-back",
                  "--json", timeout=CLI_BUDGET)
    took["resume"] = time.monotonic() - started
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    report = json_tail(resumed.stdout)
    assert report["state"] == "mirroring", report
    assert any(f"{topic}[1]: 1 record(s)" in line and "left on the new primary" in line
               for line in report["notes"]), report
    starts = {p["partition"]: p["start"] for p in report["partitions"]}
    assert starts == {k: a_records[k][-1].offset + 1 for k in range(PARTITIONS)}, starts   # right after the last copy
    assert group_offsets(target_conf, m.progress_group, topic) == starts        # the progress committed on B
    assert state.read_mirror_state(old, back.name, back.progress_group).phase is Phase.RETIRED
    status = cli("status", m.name, "--config", config)
    assert "mirroring since" in status.stdout and "resumed after the switch back" in status.stdout, status.stdout
    refused(cli("resume", m.name, "--config", config, "--no-unpause", timeout=120), "copies already")
    refused(cli("run", back.name, "--config", config, "--inprocess", timeout=120), "retired", f"eosmirror reverse {m.name}")

    started = time.monotonic()
    assert run(m)["status"] == "ok"
    took["first forward run"] = time.monotonic() - started
    b_after = values_of(target_conf, topic)
    for k in range(PARTITIONS):
        assert b_after[k][:len(b_before[k])] == b_before[k], k
        assert b_after[k][len(b_before[k]):] == on_a[k], (k, b_after[k][len(b_before[k]):][:5])
        assert len(set(b_after[k])) == len(b_after[k]), f"a record twice on B, partition {k}"
    checks = verify.verify(m)       # a later switchover verifies this: B's own records are no foreign ones
    assert verify.exit_code(checks) == 0, verify.format_checks(checks)
    assert sum(c.way_back_own for c in checks) == sum(len(on_b[k]) + len(last[k]) for k in range(PARTITIONS)) + 1

    # 6. A group that processed records on A after the resume fails over to B exactly.
    group = unique("app")
    counts = {k: len(a_records[k]) + 5 for k in range(PARTITIONS)}          # up to d{k}-4 included
    consume_and_commit(source_conf, group, topic, counts)
    groups.move_groups(m, groups.GroupMoveOptions(groups=(group,)))
    moved = group_offsets(target_conf, group, topic)
    for k in range(PARTITIONS):
        following = [r.value for r in read_all(target_conf, topic, k) if r.offset >= moved[k]]
        assert following == on_a[k][5:], (k, moved[k], following[:3])

    # 6b. The stale group on B (inside B's own records, before the switch back) fails back after the resume:
    #     a consumer of it on A receives first b{k}-3, then exactly what follows on A. The forward map alone
    #     sent it to the resume's start on A (d{k}-0): it skipped b{k}-3..c{k}-3.
    started = time.monotonic()
    back_report = groups.move_groups(m, groups.GroupMoveOptions(direction="failback", groups=(stale,)))
    took["stale group failback"] = time.monotonic() - started
    assert groups.exit_code(back_report) == 0, back_report
    a_values = {k: [v.decode() for v in vs] for k, vs in values_of(source_conf, topic).items()}
    resumed_on_a = read_as(source_conf, stale, topic)
    for k in range(PARTITIONS):
        assert resumed_on_a[k][:1] == [f"b{k}-3"], (k, resumed_on_a[k][:3])
        assert resumed_on_a[k] == a_values[k][a_values[k].index(f"b{k}-3"):], k
    assert [p["via"] for g in back_report["groups"] for p in g["partitions"]] == ["reverse"] * PARTITIONS, back_report

    # 7. The cycle again: new records on A are copied, a second promotion, and the reverse prepares the
    #    reverse mirror again at the new promotion point.
    more = produce(source_conf, topic, "e", 3)
    assert run(m)["status"] == "ok"
    second = cli("promote", m.name, "--config", config, "--no-pause", "--json", timeout=CLI_BUDGET)
    assert second.returncode == 0, second.stdout + second.stderr           # A answers: nothing known lost
    points = {p["partition"]: p["target_end"] for p in json_tail(second.stdout)["partitions"]}
    again = cli("reverse", m.name, "--config", config, "--no-unpause", "--json", timeout=CLI_BUDGET)
    assert again.returncode == 0, again.stdout + again.stderr
    prepared = json_tail(again.stdout)
    assert {p["partition"]: p["start"] for p in prepared["progress"]} == points, prepared
    assert not prepared["already"], prepared
    a_now = values_of(source_conf, topic)
    later = produce(target_conf, topic, "f", 2)
    assert run(back)["status"] == "ok"
    for k in range(PARTITIONS):     # only B's new records go back: none of A's own (d, e) return to A
        assert values_of(source_conf, topic)[k] == a_now[k] + later[k], k
        assert a_now[k][-3:] == more[k], k
    # The stale group, still on B inside the first cycle's records, while reversed a second time: the
    # same A offsets through the first cycle's reverse map (its start and end from the audit records).
    again_back = groups.move_groups(m, groups.GroupMoveOptions(direction="failback", dry_run=True, groups=(stale,)))
    assert [(p["via"], p["new_offset"], p["decision"]) for g in again_back["groups"] for p in g["partitions"]] == [
        ("reverse", p["new_offset"], "unchanged") for g in back_report["groups"] for p in g["partitions"]], again_back
    checks = verify.verify(back)    # a second switch back verifies this: A's own records are no foreign ones
    assert verify.exit_code(checks) == 0, verify.format_checks(checks)
    print(f"switch back and resume: {time.monotonic() - clock:.1f} s in all; "
          + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in took.items())
          + f"; resume steps {report['steps']}; switch back steps {outcome['steps']}")


def test_resume_and_switch_back_are_refused_out_of_order_on_a_mirroring_mirror(
        source_conf, target_conf, unique, tmp_path):
    topic = create_topic(source_conf, unique("quiet"), partitions=1)
    m = mirror(unique("m"), [topic])
    config = str(mirrors_file(tmp_path / "mirrors.yaml", [{
        "name": m.name, "source": {"local": "source"}, "target": {"local": "target"}, "topics": list(m.topics)}]))
    assert run(m)["status"] == "ok"
    refused(cli("resume", m.name, "--config", config, "--no-unpause", timeout=120), "copies already")
    refused(cli("switchover", naming.reverse_mirror_name(m.name), "--config", config, "--no-pause", timeout=120),
            "not-prepared")
    status = cli("status", naming.reverse_mirror_name(m.name), "--config", config)
    assert status.returncode == 0 and "not-prepared" in status.stdout, status.stdout + status.stderr
    target = Cluster.from_settings("target", target_conf)
    assert state.read_mirror_state(target, m.name, m.progress_group).since_ms == 0     # nothing written
