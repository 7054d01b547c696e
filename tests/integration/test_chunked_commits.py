"""A slot that commits in partition chunks (``max_partitions_per_transaction``, issue #44 item 2) copies
exactly once and commits every partition's progress, idle ones too, on real brokers.

12 source partitions (two of them empty), 2 slots of 6 partitions, chunks of at most 2: each slot commits
3 chunks one after the other. A transaction of one chunk is aborted once on purpose (an injected abortable
error before its commit): the chunk rewinds to its committed progress and copies again. A second run after
more records copies only those. A chunked follow run handed over to the next run mid-production copies
exactly once.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from eosmirror.core.errors import TargetMismatchError
from eosmirror.kafka import readers
from eosmirror.slot.faults import ENV
from tests.helpers import create_topic, mirror, producer, progress_of, read_all, run, values
from tests.support.load import produce_until, wait_grown
from tests.support.waiting import in_seconds, result_or_stacks, wait_for

pytestmark = pytest.mark.integration

PARTITIONS = 12
IDLE = (10, 11)


def seed(conf, topic: str, count: int, prefix: str) -> None:
    p = producer(conf, **{"enable.idempotence": True})
    for n in range(count):
        for k in range(PARTITIONS):
            if k not in IDLE:
                p.produce(topic, value=f"{prefix}{k}-{n}".encode(), key=b"k", partition=k)
    p.flush(60)


def test_a_chunked_run_copies_exactly_once_and_commits_every_partitions_progress(
        source_conf, target_conf, unique, tmp_path, monkeypatch):
    topic = create_topic(source_conf, unique("chunks"), partitions=PARTITIONS)
    seed(source_conf, topic, 30, "a")
    m = mirror(unique("m"), [topic], slots=2, max_partitions_per_transaction=2)
    monkeypatch.setenv(ENV, f'[{{"point": "before_commit", "action": "abort", "slot": 1, '
                            f'"once": "{tmp_path / "aborted-once"}"}}]')
    report = run(m)
    monkeypatch.delenv(ENV)
    assert report["status"] == "ok" and report["records"] == 10 * 30, report.get("error")
    slots = {s["slot"]: s for s in report["slots"]}
    # 3 chunks of 2 partitions per slot, one transaction each; slot 1 aborted one and copied that chunk again.
    assert [slots[k]["transactions"] for k in (0, 1)] == [3, 3] and [slots[k]["aborts"] for k in (0, 1)] == [0, 1]
    progress = progress_of(target_conf, m, topic, PARTITIONS)
    assert {k: p.offset if p else None for k, p in progress.items()} == {
        k: 0 if k in IDLE else 30 for k in range(PARTITIONS)}          # idle partitions' progress too
    for k in range(PARTITIONS):
        assert values(read_all(target_conf, topic, k)) == values(read_all(source_conf, topic, k))

    seed(source_conf, topic, 5, "b")
    again = run(m)
    assert again["status"] == "ok" and again["records"] == 10 * 5
    progress = progress_of(target_conf, m, topic, PARTITIONS)
    assert {k: p.offset for k, p in progress.items()} == {k: 0 if k in IDLE else 35 for k in range(PARTITIONS)}
    for k in range(PARTITIONS):
        copied = values(read_all(target_conf, topic, k))
        assert copied == values(read_all(source_conf, topic, k)) and len(copied) == (0 if k in IDLE else 35)


def test_a_chunked_follow_run_handed_over_mid_production_copies_exactly_once(source_conf, target_conf,
                                                                             source_cluster, target_cluster, unique):
    """Follow rounds of a chunked slot carry the progress of the partitions that moved and one chunk of the
    others in rotation: a follow run handed over to the next one while production goes on neither
    duplicates nor loses, and the idle partitions' progress is committed."""
    topic = create_topic(source_conf, unique("chunkfollow"), partitions=PARTITIONS)
    seed(source_conf, topic, 10, "seed")
    m = mirror(unique("m"), [topic], slots=2, max_partitions_per_transaction=2, follow=True,
               max_transaction_seconds=0.5, follow_max_seconds=60)
    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=3) as pool:
        try:
            production = pool.submit(produce_until, source_conf, topic, unique("tx"), stop,
                                     [k for k in range(PARTITIONS) if k not in IDLE], 20)
            first = pool.submit(run, m, until=in_seconds(0), follow_until=in_seconds(60))
            # Run A follows: the target's committed end grows past the 10 seeded records per busy partition.
            wait_for("run A to copy records produced after its bound while it follows", lambda: (
                min(readers.watermarks(target_cluster, topic, k)[1] for k in range(PARTITIONS) if k not in IDLE)
                >= 60 and not first.done(), first.done()) if target_has(target_cluster, topic) else (False, None), 60)
            second = pool.submit(run, m, follow_until=in_seconds(8))   # B fences A's slots and follows on
            a = result_or_stacks(first, 40, "run A to end handed over once run B's slots fenced it", second)
            wait_grown(target_conf, topic, [k for k in range(PARTITIONS) if k not in IDLE], 20,
                       "run B copying while production goes on")
        finally:
            stop.set()
        batches = production.result(timeout=30)
        b = second.result(timeout=40)
    assert a["status"] == "ok" and {s["status"] for s in a["slots"]} == {"handed-over"}, a["slots"]
    assert b["status"] == "ok" and {s["status"] for s in b["slots"]} == {"follow-bound"}, b["slots"]
    assert batches >= 10
    for k in range(PARTITIONS):
        # read_committed on both sides (real consumers): exactly the source's committed records, in order.
        source = values(read_all(source_conf, topic, k))
        target = values(read_all(target_conf, topic, k))
        assert len(target) == len(set(target)), f"partition {k}: duplicates on the target"
        assert target == source, f"partition {k}: {len(set(source) - set(target))} lost, {len(set(target) - set(source))} foreign"
        assert not [v for v in target if v.startswith(b"aborted-")]
    assert a["records"] + b["records"] == sum(len(read_all(source_conf, topic, k)) for k in range(PARTITIONS))
    # Every partition's progress is the source's end (markers and aborted records included), idle ones' 0.
    progress = progress_of(target_conf, m, topic, PARTITIONS)
    assert {k: progress[k].offset for k in range(PARTITIONS)} == {
        k: readers.watermarks(source_cluster, topic, k)[1] for k in range(PARTITIONS)}
    assert all(progress[k].offset == 0 for k in IDLE)


def target_has(cluster, topic: str) -> bool:
    try:
        readers.watermarks(cluster, topic, 0)
    except TargetMismatchError:   # run A has not created the target topic yet
        return False
    return True
