"""The tests' judge (tests/support/judge.py: Kafka's Java KafkaConsumer in one long-lived JVM) can fail:
it returns only committed records with their offsets, ends at the end, commits the positions a
ConsoleConsumer would (the consumer's positions: past the transaction marker at the end; in a partial
read, at the first record not taken), answers the high watermarks librdkafka sees, and gives up with a
message when it cannot read. Checked against librdkafka's own reads."""

from __future__ import annotations

import pytest

from tests.helpers import committed_offsets, create_topic, read_all, transactional_batches
from tests.support.judge import judge_ends, judge_read

pytestmark = pytest.mark.integration


def test_the_judge_reads_committed_records_to_the_end_and_commits_where_a_console_consumer_would(
        source_conf, unique):
    topic = create_topic(source_conf, unique("judged"), partitions=2)
    # partition 0: c0 c1 | marker | a0 a1 a2 (aborted) | marker | a value with a tab and a newline | marker
    transactional_batches(source_conf, topic, unique("tx0"), [(True, [b"c0", b"c1"]), (False, [b"a0", b"a1", b"a2"]),
                                                              (True, [b"c2\tx\ny"])], partition=0)
    # partition 1: d0 | marker | b0 (aborted) | marker: the end is past an aborted transaction
    transactional_batches(source_conf, topic, unique("tx1"), [(True, [b"d0"]), (False, [b"b0"])], partition=1)
    librdkafka = {k: [(r.offset, r.value.decode()) for r in read_all(source_conf, topic, k)] for k in (0, 1)}
    assert librdkafka == {0: [(0, "c0"), (1, "c1"), (7, "c2\tx\ny")], 1: [(0, "d0")]}

    group = unique("judge")
    whole = judge_read(source_conf, topic, group)
    assert whole.records == librdkafka
    # it committed its positions at the end, past the last markers (offsets 8 and 3), as ConsoleConsumer's close
    assert whole.committed == committed_offsets(source_conf, group, topic, 2) == {0: 9, 1: 4}
    again = judge_read(source_conf, topic, group)      # the group resumes at the end: nothing left
    assert again.records == {} and again.committed == {0: 9, 1: 4}
    assert judge_read(source_conf, topic, None).records == librdkafka    # without a group: from the beginning
    assert judge_ends(source_conf, topic) == high_watermarks(source_conf, topic) == {0: 9, 1: 4}

    # A partial read commits the consumer's positions, the rest of its fetch sought back (ConsoleConsumer's
    # cleanup): after c0 partition 0 commits 1 (c1 not taken), after d0 partition 1 commits 4 (the client skips
    # the marker and the aborted transaction behind it); the other partition, not read, its first offset.
    # The same group then reads exactly the rest.
    partial = unique("partial")
    first = judge_read(source_conf, topic, partial, max_records=1)
    [(p, [(offset, _)])] = first.records.items()
    assert (p, offset) in {(0, 0), (1, 0)}, first
    assert first.committed == committed_offsets(source_conf, partial, topic, 2) == {0: {0: 1, 1: 0},
                                                                                     1: {0: 0, 1: 4}}[p], first
    rest = judge_read(source_conf, topic, partial)
    assert {k: first.records.get(k, []) + rest.records.get(k, []) for k in (0, 1)} == librdkafka
    assert rest.committed == {0: 9, 1: 4}


def test_the_judge_gives_up_within_its_budget_saying_where_it_stood():
    with pytest.raises(AssertionError, match=r"did not end within 1000 ms; no partition was assigned yet"):
        judge_read({"bootstrap.servers": "127.0.0.1:9"}, "nowhere", "nobody", budget_s=1)
    with pytest.raises(AssertionError, match=r"listing the topic's partitions: .*TimeoutException"):
        judge_ends({"bootstrap.servers": "127.0.0.1:9"}, "nowhere", budget_s=1)


def high_watermarks(conf, topic: str) -> dict[int, int]:
    """librdkafka's own answer: each partition's high watermark."""
    from confluent_kafka import Consumer, TopicPartition

    reader = Consumer({**conf, "group.id": "judge-watermarks"})
    try:
        return {p: reader.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in (0, 1)}
    finally:
        reader.close()
