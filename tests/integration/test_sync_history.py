"""Reading only the offset syncs a question needs (kafka.syncstore), on real brokers.

A synthetic history (the real encoding, in transactions, some aborted with syncs that contradict the
chain) is written straight to a mirror's sync topic; the reads are compared with the full read.
"""

import random

import pytest
from confluent_kafka import Producer

from eosmirror.core import groupfailover as gs
from eosmirror.core import naming, syncscan
from eosmirror.core.errors import ProgressUnavailableError
from eosmirror.core.syncscan import Need
from eosmirror.kafka import syncstore
from eosmirror_tools.bench import synchistory
from eosmirror_tools.bench.synchistory import Shape
from tests.helpers import cli, create_topic, mirror, progress_of, run, seed_sequence, write_mirror_file

pytestmark = pytest.mark.integration

HISTORY = 30_000


def history(target_conf, unique, records=HISTORY):
    """A mirror name whose sync topic holds ``records`` syncs (10 busy partitions, 1 idle), with
    aborted transactions every 2nd commit; and its shape."""
    name = unique("m")
    shape = Shape(records=records, topics=2, partitions=5, prefix=unique("hist"), transaction_records=min(2000, records // 4),
                  abort_every=2)
    create_topic(target_conf, naming.offset_sync_topic(name), retention_ms="-1")
    create_topic(target_conf, naming.offset_sync_snapshot_topic(name), cleanup_policy="compact")
    aborted = synchistory.write(target_conf, naming.offset_sync_topic(name), shape, f"{name}.writer")
    assert aborted > 0
    return name, shape


def same_answers(full, partial, tp, positions):
    for committed in positions:
        assert gs.failover(committed, partial) == gs.failover(committed, full), (tp, committed)


def test_translation_near_the_head_of_a_long_history_reads_only_the_tail_and_matches_the_full_read(
        target_conf, target_cluster, unique):
    name, shape = history(target_conf, unique)
    first = syncstore.ReadStats()
    newest = syncstore.latest(target_cluster, name, "g", stats=first).newest
    assert first.full_read and first.sync_records >= HISTORY       # no snapshot yet: read once in full
    assert newest == {tp: syncs.ordered()[-1] for tp, syncs in syncstore.load(target_cluster, name, "g").items()}
    syncstore.refresh_snapshot(target_cluster, name, "g", f"{name}.snapshot")
    shape = synchistory.append_tail(target_conf, naming.offset_sync_topic(name), shape, f"{name}.writer", 3)
    full = syncstore.load(target_cluster, name, "g")
    heads = {tp: shape.syncs_of(tp) * synchistory.SOURCE_PER_SYNC for tp in shape.busy()}

    near = {tp: Need(source_offset=head - 250) for tp, head in heads.items()}
    stats = syncstore.ReadStats()
    partial = syncstore.load_needed(target_cluster, name, "g", near, stats)
    # the snapshot (one entry per partition + markers) and the 30 syncs written after it: nothing else
    assert (stats.sync_records, stats.backward_chunks, stats.full_read) == (30, 0, False), stats
    for tp, head in heads.items():
        same_answers(full[tp], partial[tp], tp, range(head - 250, head + 5))
        assert partial[tp].progress == full[tp].progress == head

    lagging = {tp: Need(source_offset=head - 40 * synchistory.SOURCE_PER_SYNC) for tp, head in heads.items()}
    stats = syncstore.ReadStats()
    partial = syncstore.load_needed(target_cluster, name, "g", lagging, stats)
    # 40 syncs x 10 partitions back, in doubling chunks: far below the 30,000 of the history
    assert 400 <= stats.sync_records <= 2_000 and stats.backward_chunks <= 2, stats
    for tp, head in heads.items():
        same_answers(full[tp], partial[tp], tp, random.Random(7).sample(range(head - 4000, head + 3), 300))
        assert gs.failover(head - 4000, partial[tp]).offset == synchistory.expected_target(head - 4000)


def test_the_newest_syncs_and_failback_needs_match_the_full_read_including_from_the_start(target_conf, target_cluster,
                                                                                          unique):
    name, shape = history(target_conf, unique, records=5_000)
    syncstore.refresh_snapshot(target_cluster, name, "g", f"{name}.snapshot")
    full = syncstore.load(target_cluster, name, "g")
    newest = syncstore.latest(target_cluster, name, "g").newest
    assert newest == {tp: syncs.ordered()[-1] for tp, syncs in full.items()}
    # positions before everything force the scan back to the topic's start: the whole chain, as the full read
    needs = {tp: Need(target_offset=0) for tp in full} | {("never-mirrored", 0): Need(source_offset=0)}
    stats = syncstore.ReadStats()
    partial = syncstore.load_needed(target_cluster, name, "g", needs, stats)
    assert set(partial) == set(full) and stats.sync_records >= 5_000
    for tp, syncs in full.items():
        assert partial[tp].ordered() == syncs.ordered()
        for target_offset in random.Random(3).sample(range(syncs.ordered()[-1].target_next + 3), 150):
            assert gs.failback(target_offset, partial[tp]) == gs.failback(target_offset, syncs)


def test_a_snapshot_beyond_the_sync_topics_end_is_refused_loudly(target_conf, target_cluster, unique):
    name, _ = history(target_conf, unique, records=2_000)
    producer = Producer(target_conf)
    producer.produce(naming.offset_sync_snapshot_topic(name), key=syncscan.MARKER_KEY,
                     value=syncscan.encode_marker(10**9), partition=0)
    producer.flush(30)
    with pytest.raises(ProgressUnavailableError, match="re-created"):
        syncstore.latest(target_cluster, name, "g")


def test_a_mirror_run_refreshes_the_snapshot_and_recovery_of_an_idle_partition_reads_no_history(
        source_conf, target_conf, target_cluster, unique):
    topic = create_topic(source_conf, unique("idle"), partitions=2)
    seed_sequence(source_conf, topic, 2, 10)
    m = mirror(unique("m"), [topic])
    assert run(m)["records"] == 20
    producer = Producer(source_conf)
    for batch in range(3):   # partition 0 keeps moving, partition 1 stays idle
        for i in range(5):
            producer.produce(topic, value=f"x{batch}-{i}".encode(), partition=0)
        producer.flush(30)
        assert run(m)["records"] == 5
    stats = syncstore.ReadStats()
    view = syncstore.latest(target_cluster, m.name, m.progress_group, stats=stats)
    assert view.snapshot.upto == view.end and stats.sync_records == 0 and not stats.full_read, stats
    assert {tp: s.source_end for tp, s in view.newest.items()} == {(topic, 0): 25, (topic, 1): 10}

    from confluent_kafka.admin import AdminClient
    admin = AdminClient(target_conf)
    admin.delete_consumer_groups([m.progress_group])[m.progress_group].result(30)   # like offsets.retention expiry
    assert progress_of(target_conf, m, topic, 2) == {0: None, 1: None}
    report = run(m)
    assert report["records"] == 0
    assert {p["origin"] for p in report["plan"]} == {"recovered-from-offset-syncs"}
    assert {k: p.offset for k, p in progress_of(target_conf, m, topic, 2).items()} == {0: 25, 1: 10}


def test_the_translate_command_reads_back_only_as_far_as_the_offset(source_conf, target_cluster, unique, tmp_path):
    topic = create_topic(source_conf, unique("tr"), partitions=1)
    m = mirror(unique("m"), [topic], max_records_per_partition=10)
    seed_sequence(source_conf, topic, 1, 30)
    for _ in range(3):
        assert run(m)["records"] == 10
    config_file = write_mirror_file(tmp_path / "mirrors.yaml", m)
    full = syncstore.load(target_cluster, m.name, m.progress_group)[(topic, 0)]
    for offset in (0, 9, 10, 15, 29, 30):   # each run's commit marker shifts the target offsets after it
        done = cli("translate", m.name, topic, "0", str(offset), "--config", str(config_file))
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.strip().endswith(f"@{full.translate(offset)}"), done.stdout
    done = cli("translate", m.name, topic, "0", "31", "--config", str(config_file))
    assert done.returncode == 2 and "beyond the mirror's progress 30" in done.stdout + done.stderr
