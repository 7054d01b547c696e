"""The mirror copies exactly: content, partitions, timestamps, gaps, aborted transactions, translation."""

import os
import re
import time

import pytest

from eosmirror.core import naming
from eosmirror.driver.verify import check_partition
from eosmirror.kafka import readers, syncstore
from tests.helpers import (
    create_topic,
    mirror,
    producer,
    progress_of,
    read_all,
    run,
    seed_sequence,
    transactional_batches,
    values,
)
from tests.support.topics import freeze_compaction

pytestmark = pytest.mark.integration


def own_age() -> float:
    """This process's age as the kernel counts it: the boot-time clock now, less its start (in clock ticks
    since boot, /proc/self/stat)."""
    with open("/proc/self/stat") as stat:
        ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
    return time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")


def test_byte_identical_copy_keys_values_nulls_headers_timestamps_partitions(source_conf, target_conf, unique):
    create_time = create_topic(source_conf, unique("ct"), partitions=3)
    append_time = create_topic(source_conf, unique("lat"), partitions=1, message_timestamp_type="LogAppendTime")
    p = producer(source_conf)
    old = int(time.time() * 1000) - 3_600_000   # an hour ago: the target must keep it, not stamp "now"
    sent = []
    for i in range(60):
        key = None if i % 4 == 0 else f"key-{i}".encode()
        value = None if i % 7 == 0 else bytes([i % 256]) * (i * 13)        # tombstones and binary values
        headers = [("a", b"1"), ("b", None), ("a", f"dup-{i}".encode())] if i % 2 else None
        p.produce(create_time, value=value, key=key, partition=i % 3, timestamp=old + i, headers=headers)
        p.produce(append_time, value=value, key=key, partition=0, headers=headers)
        sent.append((i % 3, key, value, headers))
    p.flush(30)
    m = mirror(unique("m"), [create_time, append_time])
    age_before, started = own_age(), time.monotonic()
    report = run(m)
    elapsed, age_after = time.monotonic() - started, own_age()
    assert report["status"] == "ok" and report["records"] == 120
    # the report times the run's fixed cost step by step (process start: this test process's age)
    steps = report["steps"]
    assert list(steps) == ["process start", "resolve", "target guard", "observe and plan", "target check",
                           "target sync", "generation", "slots", "snapshot"], steps
    # process start is this process's age when the run began, as the kernel counts it (10 ms ticks)
    assert age_before - 0.05 <= steps["process start"] <= age_after + 0.05, (steps, age_before, age_after)
    # the steps that talk to the brokers took time, and all the steps together no more than the test saw
    assert all(steps[name] > 0 for name in ("observe and plan", "target sync", "slots")), steps
    assert sum(steps.values()) - steps["process start"] <= min(report["seconds"], elapsed) + 0.05, (steps, elapsed)
    again = run(m)    # nothing new: no progress moved, so no offset sync was written and none is folded
    assert again["records"] == 0 and "snapshot" not in again["steps"] and "slots" in again["steps"], again["steps"]

    for topic, parts in ((create_time, 3), (append_time, 1)):
        for k in range(parts):
            src, tgt = read_all(source_conf, topic, k), read_all(target_conf, topic, k)
            assert len(src) == len(tgt) > 0
            for s, t in zip(src, tgt):
                assert (s.key, s.value, s.headers, s.timestamp) == (t.key, t.value, t.headers, t.timestamp)
    # the LogAppendTime source's broker-assigned timestamps are kept as the target's CreateTime
    assert read_all(target_conf, append_time)[0].timestamp == read_all(source_conf, append_time)[0].timestamp
    assert [r.timestamp for r in read_all(target_conf, create_time, 0)][:2] == [old, old + 3]
    assert read_all(target_conf, create_time, 1)[0].headers == (("a", b"1"), ("b", None), ("a", b"dup-1"))


def test_aborted_transactions_never_reach_the_target_and_ranges_ending_on_markers_complete(
        source_conf, source_cluster, target_conf, unique):
    topic = create_topic(source_conf, unique("txn"))
    # ends with an aborted transaction: the range [0, LSO) ends on aborted data + its abort marker
    transactional_batches(source_conf, topic, unique("tx"), [
        (True, [b"c1", b"c2"]), (False, [b"a1", b"a2", b"a3"]), (True, [b"c3"]), (False, [b"a4", b"a5"])])
    m = mirror(unique("m"), [topic], slots=1)
    report = run(m)
    assert report["status"] == "ok"
    assert values(read_all(target_conf, topic, read_committed=False)) == [b"c1", b"c2", b"c3"]
    source_end = readers.watermarks(source_cluster, topic, 0)[1]
    assert source_end == 12   # 3 committed + 5 aborted records + 4 markers: the range ends on a marker
    assert progress_of(target_conf, m, topic, 1)[0].offset == source_end


def test_compacted_source_with_offset_gaps(source_conf, target_conf, target_cluster, unique):
    topic = create_topic(source_conf, unique("compact"), cleanup_policy="compact", segment_ms="100",
                         min_cleanable_dirty_ratio="0.001", delete_retention_ms="0", min_compaction_lag_ms="0")
    p = producer(source_conf)
    for round_ in range(30):
        for key in range(5):
            p.produce(topic, key=f"k{key}".encode(), value=f"r{round_}".encode(), partition=0)
        p.flush(10)
        time.sleep(0.05)   # elapsed time, not a wait: the rounds land in several 100 ms segments to clean
    deadline = time.time() + 90
    while time.time() < deadline:     # wait for the log cleaner to leave gaps
        p.produce(topic, key=b"roll", value=b"x", partition=0)
        p.flush(10)
        offsets = [r.offset for r in read_all(source_conf, topic)]
        if offsets[-1] + 1 - len(offsets) > 20:
            break
        time.sleep(1)
    # Freeze the source (no more cleaning while we compare) and keep the target un-compacted.
    freeze_compaction(source_conf, topic, 1)
    src = read_all(source_conf, topic)
    assert src[-1].offset + 1 - len(src) > 20, "the log cleaner did not compact in time"
    m = mirror(unique("m"), [topic], slots=1, sync_topic_configs=[])
    assert run(m)["status"] == "ok"
    tgt = read_all(target_conf, topic)
    assert [(r.key, r.value) for r in tgt] == [(r.key, r.value) for r in src]
    history = syncstore.load(target_cluster, m.name, m.progress_group)[(topic, 0)]
    for s, t in zip(src, tgt):
        assert history.translate(s.offset) == t.offset


def test_translate_is_exact_for_every_source_offset_including_gaps(source_conf, target_conf, target_cluster, unique):
    topic = create_topic(source_conf, unique("tr"))
    txn_id = unique("tx")
    transactional_batches(source_conf, topic, txn_id, [(True, [b"1", b"2"]), (False, [b"x"]), (True, [b"3"])])
    m = mirror(unique("m"), [topic], slots=1)
    assert run(m, max_records_per_partition=3)["status"] == "ok"     # several runs: several syncs
    transactional_batches(source_conf, topic, txn_id + "b", [(False, [b"y", b"z"]), (True, [b"4", b"5", b"6"])])
    while run(m, max_records_per_partition=4)["records"]:
        pass
    history = syncstore.load(target_cluster, m.name, m.progress_group)[(topic, 0)]
    assert len(history.syncs) >= 3
    src_all = read_all(source_conf, topic)
    end = progress_of(target_conf, m, topic, 1)[0].offset
    for x in range(0, end + 1):
        expected = [r.value for r in src_all if r.offset >= x]        # what a source consumer at x reads
        got = [r.value for r in read_all(target_conf, topic) if r.offset >= history.translate(x)]
        assert got == expected, f"translate({x})"


def test_verify_detects_a_difference(source_conf, source_cluster, target_conf, target_cluster, unique):
    topic = create_topic(source_conf, unique("v"))
    seed_sequence(source_conf, topic, 1, 10)
    m = mirror(unique("m"), [topic], slots=1)
    run(m)
    history = syncstore.load(target_cluster, m.name, m.progress_group)[(topic, 0)]
    ok = check_partition(source_cluster, target_cluster,
                         topic, topic, 0, history, 10)
    assert ok.ok and ok.records == 10
    # a foreign record appended to the target after the mirrored range must not change the verdict...
    producer(target_conf).produce(topic, value=b"foreign", partition=0)
    # ...but a different source range claimed by forged syncs does
    forged = type(history)([s.__class__(**{**s.__dict__, "target_base": s.target_base + 1}) for s in history.syncs])
    bad = check_partition(source_cluster, target_cluster,
                          topic, topic, 0, forged, 10)
    assert not bad.ok and bad.differences


def test_prefix_naming_new_partitions_new_topics_exclusions(source_conf, target_conf, unique):
    from confluent_kafka.admin import AdminClient, NewPartitions

    stem = unique("grow")
    first = create_topic(source_conf, f"{stem}.a", partitions=1)
    excluded = create_topic(source_conf, f"{stem}.secret", partitions=1)
    seed_sequence(source_conf, first, 1, 3)
    seed_sequence(source_conf, excluded, 1, 3)
    m = mirror(unique("m"), [], patterns=[re.escape(stem) + r"\..*"], topics_exclude=[r".*\.secret"],
               replication_policy="prefix", source_alias="dc1")
    assert run(m)["records"] == 3
    target_topics = set(AdminClient(target_conf).list_topics(timeout=10).topics)
    assert f"dc1.{first}" in target_topics and f"dc1.{excluded}" not in target_topics and first not in target_topics
    admin = AdminClient(source_conf)
    admin.create_partitions([NewPartitions(first, 3)])[first].result(30)
    second = create_topic(source_conf, f"{stem}.b", partitions=2)
    seed_sequence(source_conf, first, 3, 2, prefix="new")
    seed_sequence(source_conf, second, 2, 2)
    report = run(m)
    assert report["records"] == 6 + 4 and "grew dc1." + first in report["topic_sync"]
    meta = AdminClient(target_conf).list_topics(timeout=10)
    assert len(meta.topics[f"dc1.{first}"].partitions) == 3 and f"dc1.{second}" in meta.topics
    assert values(read_all(target_conf, f"dc1.{first}", 2)) == [b"new2-0", b"new2-1"]
    assert not any(t.startswith("dc1.__") or t.startswith("dc1.eosmirror") for t in meta.topics)


def test_internal_topics_of_eosmirror_live_on_the_target(target_conf, source_conf, unique):
    topic = create_topic(source_conf, unique("int"))
    seed_sequence(source_conf, topic, 1, 2)
    m = mirror(unique("m"), [topic])
    run(m)
    from confluent_kafka.admin import AdminClient

    names = AdminClient(target_conf).list_topics(timeout=10).topics
    assert naming.state_topic(m.name) in names and naming.offset_sync_topic(m.name) in names

