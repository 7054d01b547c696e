"""Consumer groups move between clusters with exact offsets: zero re-reads, zero skips (real brokers).

Source data holds aborted transactions (aborted records + markers occupy offsets) and, in one test,
real compaction gaps. A source group consumes part of every partition and commits; after a mirror
run and a group sync, a consumer of the same group on the target must receive as its FIRST record,
on every partition, exactly the copy of the next source record the group had not consumed.
"""

from __future__ import annotations

import time

import pytest

from eosmirror.core import groupfailover
from eosmirror.driver import groups
from eosmirror.kafka.retry import wait_until
from tests.helpers import create_topic, mirror, producer, read_all, run
from tests.support.clusters import PARTITIONS
from tests.support.groups import commit_offsets, consume_and_commit, content, group_offsets
from tests.support.load import seed_with_aborts
from tests.support.topics import freeze_compaction

pytestmark = pytest.mark.integration


def first_records(conf, group, topic) -> dict[int, object]:
    """What a consumer of ``group`` subscribing to ``topic`` receives first on each partition (it must
    start from the group's committed offsets: auto.offset.reset=error would fail otherwise)."""
    from confluent_kafka import Consumer

    from eosmirror.kafka.readers import _record

    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "error",
                         "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    first, errors, deadline = {}, [], time.monotonic() + 90
    try:
        while len(first) < PARTITIONS and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                errors.append(msg.error().str())
                continue
            first.setdefault(msg.partition(), _record(msg))
    finally:
        consumer.close()
    assert len(first) == PARTITIONS, f"first records on {sorted(first)} only within 90 s; errors: {errors[-3:]}"
    return first


def next_unconsumed(conf, topic, committed: dict[int, int]) -> dict[int, object]:
    out = {}
    for p, offset in committed.items():
        out[p] = next(r for r in read_all(conf, topic, p) if r.offset >= offset)
    return out


def sync(m, **options):
    report = groups.move_groups(m, groups.GroupMoveOptions(**options))
    return report, {g["group"]: g for g in report["groups"]}


def test_failover_then_failback_resume_exactly_with_aborted_transactions(source_conf, target_conf, unique):
    topic = create_topic(source_conf, unique("orders"), partitions=PARTITIONS)
    seed_with_aborts(source_conf, topic, unique("tx"))
    group = unique("app")
    # positions land on committed records, on aborted records and on markers
    committed = consume_and_commit(source_conf, group, topic, {0: 3, 1: 4, 2: 7})
    m = mirror(unique("m"), [topic], groups={})
    assert run(m)["status"] == "ok"

    report, by_group = sync(m)
    assert by_group[group]["written"] and not by_group[group]["skipped"], report
    assert all(p["decision"] == groupfailover.WRITE for p in by_group[group]["partitions"])
    expected = next_unconsumed(source_conf, topic, committed)
    got = first_records(target_conf, group, topic)
    assert {p: content(r) for p, r in got.items()} == {p: content(r) for p, r in expected.items()}

    # failback: the group goes on on the target, then moves back; the source resumes right after
    # the last record it processed on the target
    on_target = consume_and_commit(target_conf, group, topic, {0: 2, 1: 5, 2: 1})
    processed_last = {p: next(r for r in read_all(target_conf, topic, p) if r.offset == o - 1)
                      for p, o in on_target.items()}
    report, by_group = sync(m, direction="failback")
    assert by_group[group]["written"], report
    got = first_records(source_conf, group, topic)
    for p, last in processed_last.items():
        source_records = read_all(source_conf, topic, p)
        index = [content(r) for r in source_records].index(content(last))
        assert content(got[p]) == content(source_records[index + 1]), f"partition {p}"


def test_failover_with_compaction_gaps(source_conf, target_conf, unique):
    topic = create_topic(source_conf, unique("compact"), partitions=PARTITIONS, cleanup_policy="compact",
                         segment_ms="100", min_cleanable_dirty_ratio="0.001", delete_retention_ms="0",
                         min_compaction_lag_ms="0")
    p = producer(source_conf)

    def gaps() -> int:
        p.produce(topic, key=b"roll", value=b"x", partition=0)
        for k in range(PARTITIONS):
            p.produce(topic, key=f"k{k}-{time.monotonic()}".encode(), value=b"roll", partition=k)
        p.flush(10)
        return min(read_all(source_conf, topic, k)[-1].offset + 1 - len(read_all(source_conf, topic, k))
                   for k in range(PARTITIONS))

    for round_ in range(20):
        for k in range(PARTITIONS):
            for key in range(4):
                p.produce(topic, key=f"k{key}".encode(), value=f"p{k}-r{round_}".encode(), partition=k)
        p.flush(10)
        time.sleep(0.05)   # elapsed time, not a wait: the rounds land in several 100 ms segments to clean
    seen = wait_until(120, gaps, lambda n: n > 15, pause=1.0)
    assert seen > 15, f"the log cleaner left only {seen} offsets of gaps within 120 s"
    freeze_compaction(source_conf, topic, PARTITIONS)
    group = unique("app")
    committed = {}
    for k in range(PARTITIONS):   # each position inside a compaction gap: no record at that offset
        offsets = [r.offset for r in read_all(source_conf, topic, k)]
        holes = sorted(set(range(offsets[-1])) - set(offsets))
        committed[k] = holes[len(holes) * (k + 1) // (PARTITIONS + 1)]
    commit_offsets(source_conf, group, topic, committed)
    m = mirror(unique("m"), [topic], sync_topic_configs=[], groups={})
    assert run(m)["status"] == "ok"
    assert sync(m)[1][group]["written"]
    got = first_records(target_conf, group, topic)
    expected = next_unconsumed(source_conf, topic, committed)
    assert {k: content(r) for k, r in got.items()} == {k: content(r) for k, r in expected.items()}


def read_checkpoints(conf, topic_name):
    from eosmirror.core.checkpoints import Checkpoint

    return [Checkpoint.decode(r.key, r.value) for r in read_all(conf, topic_name)]


def test_a_group_ahead_of_the_mirror_waits_then_is_written_after_the_next_run(source_conf, target_conf, unique):
    topic = create_topic(source_conf, unique("orders"), partitions=PARTITIONS)
    seed_with_aborts(source_conf, topic, unique("tx"), rounds=2)
    m = mirror(unique("m"), [topic], groups={}, source_alias=unique("dc"))
    assert run(m)["status"] == "ok"
    seed_with_aborts(source_conf, topic, unique("tx2"), rounds=2, tag="late-")   # not mirrored yet
    group = unique("app")
    committed = consume_and_commit(source_conf, group, topic, {0: 8, 1: 9, 2: 10})   # past the 6 mirrored

    report, by_group = sync(m)
    parts = by_group[group]["partitions"]
    assert [p["outcome"] for p in parts] == [groupfailover.WAITING] * PARTITIONS, report
    assert [p["records"] for p in parts] == [committed[p] - 14 for p in range(PARTITIONS)]   # 2 rounds = 14 offsets (3 + 2 aborted + 2 markers each)
    assert not by_group[group]["written"] and group_offsets(target_conf, group, topic) == {0: None, 1: None, 2: None}

    assert run(m)["status"] == "ok"
    report, by_group = sync(m)
    assert by_group[group]["written"], report
    got = first_records(target_conf, group, topic)
    assert {p: content(r) for p, r in got.items()} == {
        p: content(r) for p, r in next_unconsumed(source_conf, topic, committed).items()}
    # the audit trail: MM2 checkpoints of exactly the written offsets, on the target
    written = {(p["to_topic"], p["partition"]): (p["committed"], p["new_offset"]) for p in by_group[group]["partitions"]}
    checkpoints = [c for c in read_checkpoints(target_conf, report["checkpoints_topic"]) if c.group == group]
    assert report["checkpoints_topic"] == f"{m.source_alias}.checkpoints.internal"
    assert {(c.topic, c.partition): (c.upstream_offset, c.downstream_offset) for c in checkpoints} == written


def test_an_active_target_group_is_skipped_and_untouched(source_conf, target_conf, unique):
    from confluent_kafka import Consumer

    topic = create_topic(source_conf, unique("orders"), partitions=PARTITIONS)
    seed_with_aborts(source_conf, topic, unique("tx"), rounds=2)
    group = unique("app")
    consume_and_commit(source_conf, group, topic, {0: 1, 1: 2, 2: 3})
    m = mirror(unique("m"), [topic], groups={})
    assert run(m)["status"] == "ok"
    commit_offsets(target_conf, group, topic, {0: 1})      # a position the operator set on the target
    live = Consumer({**target_conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    live.subscribe([topic])
    try:
        assigned = wait_until(60, lambda: (live.poll(0.5), live.assignment())[1], lambda a: len(a) == PARTITIONS)
        assert len(assigned) == PARTITIONS, f"the live consumer got {assigned} within 60 s"
        report, by_group = sync(m)
        assert by_group[group]["skipped"] and not by_group[group]["written"], report
        assert by_group[group]["state"] not in groupfailover.WRITABLE_STATES
        assert group_offsets(target_conf, group, topic) == {0: 1, 1: None, 2: None}
    finally:
        live.close()


def test_a_backwards_move_is_refused_unless_allowed(source_conf, target_conf, unique, tmp_path):
    from tests.helpers import cli, write_mirror_file

    topic = create_topic(source_conf, unique("orders"), partitions=PARTITIONS)
    seed_with_aborts(source_conf, topic, unique("tx"), rounds=2)
    group = unique("app")
    commit_offsets(source_conf, group, topic, {0: 8, 1: 8, 2: 8})
    m = mirror(unique("m"), [topic], groups={})
    assert run(m)["status"] == "ok"
    assert sync(m)[1][group]["written"]
    before = group_offsets(target_conf, group, topic)
    commit_offsets(source_conf, group, topic, {0: 2})      # the source group went back on partition 0

    path = write_mirror_file(tmp_path / "mirrors.yaml", m, groups={})
    shown = cli("groups", "sync", m.name, "--config", str(path), "--groups", group)
    assert shown.returncode == 0, shown.stderr
    assert "refused: would move backwards" in shown.stdout and group in shown.stdout, shown.stdout
    assert group_offsets(target_conf, group, topic) == before

    plan = cli("groups", "plan", m.name, "--config", str(path), "--allow-rewind", "--json")
    assert plan.returncode == 0 and '"dry_run": true' in plan.stdout, plan.stderr
    assert group_offsets(target_conf, group, topic) == before
    report, by_group = sync(m, allow_rewind=True, groups=(group,))
    assert [p["decision"] for p in by_group[group]["partitions"]] == [groupfailover.WRITE, groupfailover.UNCHANGED,
                                                                      groupfailover.UNCHANGED]
    assert group_offsets(target_conf, group, topic)[0] < before[0]
    assert cli("groups", "sync", m.name, "--config", str(path), "--direction", "sideways").returncode == 2


def test_mm2_remote_cluster_utils_translates_to_the_offsets_eosmirror_wrote(source_conf, target_conf, unique,
                                                                            tmp_path):
    """A MirrorMaker 2 user's own tool (connect-mirror-client's RemoteClusterUtils.translateOffsets, the
    real jar from Maven Central) reads eosmirror's checkpoints and returns eosmirror's exact offsets."""
    import shutil
    import subprocess
    from pathlib import Path

    from eosmirror_tools.kit import runtime

    assert shutil.which("javac"), ("no javac on PATH: this check compiles a small program against MM2's client jar; "
                                   "install a JDK 17 (the README's prerequisites: Java 17 and Maven need one)")
    topic = create_topic(source_conf, unique("orders"), partitions=PARTITIONS)
    seed_with_aborts(source_conf, topic, unique("tx"), rounds=3)
    group = unique("app")
    committed = consume_and_commit(source_conf, group, topic, {0: 2, 1: 4, 2: 8})
    m = mirror(unique("m"), [topic], groups={}, replication_policy="prefix", source_alias=unique("dc"))
    assert run(m)["status"] == "ok"
    report, by_group = sync(m)
    written = {(p["to_topic"], p["partition"]): p["new_offset"] for p in by_group[group]["partitions"]}
    assert len(written) == PARTITIONS and all(t == f"{m.source_alias}.{topic}" for t, _ in written), written
    assert sorted(written.values()) != sorted(committed.values())   # a prefix mirror's offsets really differ

    classpath = runtime.classpath()
    source = Path(__file__).with_name("java") / "TranslateOffsets.java"
    compiled = subprocess.run(["javac", "-cp", classpath, "-d", str(tmp_path), str(source)], capture_output=True,
                              text=True, timeout=120)
    assert compiled.returncode == 0, compiled.stderr
    ran = subprocess.run(["java", "-cp", f"{classpath}:{tmp_path}", "TranslateOffsets",
                          target_conf["bootstrap.servers"], m.source_alias, group],
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-2000:]
    translated = {(t, int(p)): int(o) for t, p, o in (line.split() for line in ran.stdout.splitlines() if line)}
    assert translated == written
