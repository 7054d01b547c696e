"""A run bounded by `until` copies only the records below the source offsets of that time (the
Airflow runs' interval bound), partition by partition."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.helpers import create_topic, mirror, producer, progress_of, read_all, run

pytestmark = pytest.mark.integration


def test_until_bounds_each_partition_at_the_offsets_of_that_time(source_conf, target_conf, unique):
    topic = create_topic(source_conf, unique("src"), partitions=3)
    bound = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    bound_ms = int(bound.timestamp() * 1000)
    p = producer(source_conf)
    before = {0: 2, 1: 5, 2: 0}   # records older than the bound per partition; 3 newer on each
    for partition, older in before.items():
        for i in range(older + 3):
            at = bound_ms - 60_000 + i if i < older else bound_ms + 60_000 + i
            p.produce(topic, value=b"%d" % i, partition=partition, timestamp=at)
    assert p.flush(30) == 0
    m = mirror(unique("m"), [topic])
    assert run(m, until=bound)["status"] == "ok"
    progress = progress_of(target_conf, m, topic, 3)
    assert {q: progress[q].offset for q in range(3)} == before
    assert [len(read_all(target_conf, topic, q)) for q in range(3)] == [2, 5, 0]
    assert run(m)["status"] == "ok"
    assert [len(read_all(target_conf, topic, q)) for q in range(3)] == [5, 8, 3]
