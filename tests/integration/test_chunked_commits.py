"""A slot that commits in partition chunks (``max_partitions_per_transaction``, issue #44 item 2) copies
exactly once and commits every partition's progress, idle ones too, on real brokers.

12 source partitions (two of them empty), 2 slots of 6 partitions, chunks of at most 2: each slot commits
3 chunks one after the other. A transaction of one chunk is aborted once on purpose (an injected abortable
error before its commit): the chunk rewinds to its committed progress and copies again. A second run after
more records copies only those.
"""

from __future__ import annotations

import pytest

from eosmirror.slot.faults import ENV
from tests.helpers import create_topic, mirror, producer, progress_of, read_all, run, values

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
