"""Groups that read to the end move between clusters with zero re-reads (real brokers, real clients).

A consumer that reads a partition to its end commits the offset past the last transaction marker
(the high watermark), not the offset after the last record: the mirror writes in transactions, so
every target partition ends with a commit marker. Here the positions come from real consumers:
Kafka's own Java consumer (in a group, from the jars the project downloads: tests/support/judge.py) and
librdkafka consumers reading everything, only some partitions, or stopping mid-log. After the failback a
source consumer of each group must receive first the record after the last one it processed on the
target, and never one of those again; a failover right after it must leave every group where it is.
"""

from __future__ import annotations

import pytest

from eosmirror.core import groupfailover
from eosmirror.driver import groups
from tests.helpers import cli, create_topic, mirror, producer, read_all, run, write_mirror_file
from tests.support.clusters import PARTITIONS
from tests.support.groups import consume_and_commit, content, group_offsets, librdkafka_reads_to_the_end
from tests.support.java import java_reads_to_the_end
from tests.support.load import seed_with_aborts

pytestmark = pytest.mark.integration


def read_from_group(conf, group, topic) -> dict[int, list]:
    """Per partition where ``group`` has a committed offset: every committed record from it to the end."""
    found = group_offsets(conf, group, topic)
    return {p: [r for r in read_all(conf, topic, p) if r.offset >= offset]
            for p, offset in found.items() if offset is not None}


def processed_on(conf, topic, committed: dict[int, int | None]) -> dict[int, list]:
    """What a group committed at ``committed`` has processed: every record below its offset."""
    return {p: [r for r in read_all(conf, topic, p) if r.offset < offset]
            for p, offset in committed.items() if offset is not None}


def resumes_after(processed: dict[int, list], source_conf, group, topic) -> tuple[dict[int, tuple], int]:
    """(first record per partition a source consumer of ``group`` receives, records it re-reads)."""
    seen = {content(r) for records in processed.values() for r in records}
    ahead = read_from_group(source_conf, group, topic)
    firsts = {p: content(records[0]) for p, records in ahead.items() if records}
    rereads = sum(1 for records in ahead.values() for r in records if content(r) in seen)
    return firsts, rereads


def expected_next(source_conf, topic, processed: dict[int, list]) -> dict[int, tuple]:
    """Per partition: the source record right after the last one processed on the target."""
    out = {}
    for p, records in processed.items():
        source = [content(r) for r in read_all(source_conf, topic, p)]
        index = source.index(content(records[-1])) + 1 if records else 0
        out[p] = source[index]
    return out


def target_name(m, topic) -> str:
    return f"{m.source_alias}.{topic}" if m.replication_policy == "prefix" else topic


@pytest.mark.parametrize("policy", ["identity", "prefix"])
def test_failback_of_groups_that_read_to_the_end_resumes_with_zero_rereads(policy, source_conf, target_conf, unique):
    topic = create_topic(source_conf, unique("orders"), partitions=PARTITIONS)
    seed_with_aborts(source_conf, topic, unique("tx"))            # 12 committed records per partition
    m = mirror(unique("m"), [topic], groups={}, replication_policy=policy, source_alias=unique("dc"))
    assert run(m)["status"] == "ok"
    remote = target_name(m, topic)
    java, rdk, some, mid = (unique(n) for n in ("java", "rdk", "some", "mid"))
    assert java_reads_to_the_end(target_conf, java, remote) == 12 * PARTITIONS
    assert librdkafka_reads_to_the_end(target_conf, rdk, remote) == 12 * PARTITIONS
    assert librdkafka_reads_to_the_end(target_conf, some, remote, partitions=[0, 2]) == 24
    consume_and_commit(target_conf, mid, remote, {0: 2, 1: 5, 2: 11})
    committed = {g: group_offsets(target_conf, g, remote) for g in (java, rdk, some, mid)}
    last_copy = {p: read_all(target_conf, remote, p)[-1].offset for p in range(PARTITIONS)}
    # The case under test really happens: the real consumers committed past the last copy (a marker).
    for g in (java, rdk):
        assert all(committed[g][p] > last_copy[p] + 1 for p in range(PARTITIONS)), (g, committed[g], last_copy)
    assert committed[some][1] is None and committed[some][0] > last_copy[0] + 1, committed[some]
    processed = {g: processed_on(target_conf, remote, committed[g]) for g in committed}

    report, by_group = sync_only(m, list(committed), direction="failback")
    for g in committed:
        assert by_group[g]["written"] and not by_group[g]["left"], report
        assert all(p["decision"] == groupfailover.WRITE for p in by_group[g]["partitions"]), by_group[g]

    seed_with_aborts(source_conf, topic, unique("tx2"), rounds=1, tag="after-")   # the source is back
    rereads = {}
    for g in committed:
        firsts, rereads[g] = resumes_after(processed[g], source_conf, g, topic)
        assert firsts == expected_next(source_conf, topic, processed[g]), g
        assert set(firsts) == {p for p, o in committed[g].items() if o is not None}, g
    assert rereads == {g: 0 for g in committed}

    # A failover right after the failback leaves every group where it is on the target.
    report, by_group = sync_only(m, list(committed))
    for g in committed:
        assert {p["decision"] for p in by_group[g]["partitions"]} == {groupfailover.UNCHANGED}, by_group[g]
        assert not by_group[g]["written"] and not by_group[g]["left"], by_group[g]
        assert group_offsets(target_conf, g, remote) == committed[g], g


def test_failover_of_source_groups_that_read_to_the_end_resumes_with_zero_rereads(source_conf, target_conf, unique):
    topic = create_topic(source_conf, unique("orders"), partitions=PARTITIONS)
    seed_with_aborts(source_conf, topic, unique("tx"))
    java, rdk = unique("java"), unique("rdk")
    assert java_reads_to_the_end(source_conf, java, topic) == 12 * PARTITIONS
    assert librdkafka_reads_to_the_end(source_conf, rdk, topic) == 12 * PARTITIONS
    m = mirror(unique("m"), [topic], groups={})
    assert run(m)["status"] == "ok"
    report, by_group = sync_only(m, [java, rdk])
    for g in (java, rdk):
        assert by_group[g]["written"] and not by_group[g]["left"], report
    seed_with_aborts(source_conf, topic, unique("tx2"), rounds=1, tag="after-")
    assert run(m)["status"] == "ok"
    for g in (java, rdk):
        ahead = read_from_group(target_conf, g, topic)
        assert sorted(ahead) == list(range(PARTITIONS)), g
        for p, records in ahead.items():
            # exactly the records the group had not consumed on the source: the 3 new ones
            assert [r.value for r in records] == [f"after-p{p}-r0-{i}".encode() for i in range(3)], (g, p)


def test_a_failback_past_records_written_on_the_target_reports_them_and_exits_4(source_conf, target_conf, unique,
                                                                                tmp_path):
    from airflow.sdk.exceptions import AirflowFailException

    from eosmirror.airflow import grouptasks

    topic = create_topic(source_conf, unique("orders"), partitions=PARTITIONS)
    seed_with_aborts(source_conf, topic, unique("tx"), rounds=2)
    m = mirror(unique("m"), [topic], groups={})
    assert run(m)["status"] == "ok"
    p = producer(target_conf)
    for i in range(3):      # someone else writes to the target topic (not copies)
        p.produce(topic, value=f"foreign-{i}".encode(), partition=0)
    p.flush(10)
    group = unique("app")
    assert librdkafka_reads_to_the_end(target_conf, group, topic) == 6 * PARTITIONS + 3

    path = write_mirror_file(tmp_path / "mirrors.yaml", m, groups={})
    shown = cli("groups", "sync", m.name, "--config", str(path), "--direction", "failback", "--groups", group)
    assert shown.returncode == 4, (shown.returncode, shown.stdout, shown.stderr[-2000:])
    assert "LEFT 1 partition(s) unmoved: 1 with target records that are not copies" in shown.stdout, shown.stdout
    assert "3 target records after the mirrored range are not copies" in shown.stdout, shown.stdout
    # the other partitions were written: they resume exactly on the source
    on_source = group_offsets(source_conf, group, topic)
    assert on_source[0] is None and on_source[1] == on_source[2] == 14, on_source

    context = {"params": {"direction": "failback", "groups": [group]}}
    with pytest.raises(AirflowFailException, match=r"(?s)left partitions of .* unmoved.*not copies"):
        grouptasks.move_groups(m.name, str(path), context)


def sync_only(m, names: list[str], **options):
    report = groups.move_groups(m, groups.GroupMoveOptions(groups=tuple(names), **options))
    return report, {g["group"]: g for g in report["groups"]}
