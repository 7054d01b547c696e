"""Consumer groups read by real clients (the promotion and switch tests): Kafka's Java consumer (the tests'
judge, tests/support/judge.py, from the jars the project downloads) and a librdkafka consumer, each in a
consumer group, each returning what it received so a test judges positions from the consumers' own output.

Other test files run librdkafka groups in their own ways; these read a fixed number of records (or to the
end), as an application that stops part-way does.
"""

from __future__ import annotations

import time
from typing import Any

from tests.support.judge import judge_read

Read = dict[int, list[tuple[int, str]]]     # per partition: (offset, value) in the order received


def java_group_read(conf: dict[str, Any], topic: str, group: str, max_messages: int | None = None,
                    budget_s: float = 90) -> Read:
    """Kafka's Java consumer in ``group`` (read_committed; from the group's committed offsets, the earliest
    where it has none) takes ``max_messages`` records, or fewer when every partition reaches its end (None:
    to the end); it commits as ConsoleConsumer's close does, after what it took. Returns what it took, per
    partition."""
    return judge_read(conf, topic, group, max_records=max_messages, budget_s=budget_s).records


def rdk_group_read(conf: dict[str, Any], topic: str, group: str, count: int | None, budget_s: float = 60) -> Read:
    """A librdkafka consumer in ``group`` subscribed to ``topic`` (read_committed, auto-commit off, the
    earliest offset where the group has none) receives ``count`` records (None: until every partition
    reports its end), commits what it received (the offsets after them, as an application commits what
    it processed) and closes. Returns what it received, per partition."""
    from confluent_kafka import Consumer, KafkaError

    from eosmirror.kafka import clients

    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed", "enable.partition.eof": count is None,
                         "log_level": clients.librdkafka_log_level()})
    consumer.subscribe([topic])
    read: Read = {}
    at_end: set[int] = set()
    errors: list[str] = []
    deadline = time.monotonic() + budget_s

    def done() -> bool:
        if count is not None:
            return sum(map(len, read.values())) >= count
        assigned = {tp.partition for tp in consumer.assignment()}
        return bool(assigned) and at_end >= assigned

    try:
        while not done() and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                else:
                    errors.append(msg.error().str())
                continue
            at_end.discard(msg.partition())
            value = msg.value()
            read.setdefault(msg.partition(), []).append((msg.offset(), value.decode() if value is not None else ""))
        finished = done()
        if read:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert finished, (f"librdkafka consumer of {group}: {sum(map(len, read.values()))} record(s) "
                      f"(wanted {count if count is not None else 'every partition to its end'}), at the end of "
                      f"{sorted(at_end)}, within {budget_s:.0f} s; errors: {errors[-3:]}")
    return read
