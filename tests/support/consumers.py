"""Consumer groups read by real clients (the promotion and switch tests): Kafka's ConsoleConsumer (the Java
tool from the jars the project downloads) and a librdkafka consumer, each in a consumer group, each
returning what it printed or received so a test judges positions from the consumers' own output.

Other test files run ConsoleConsumer and librdkafka groups in their own ways (reading until 6 s pass
without a record); these read a fixed number of records, as an application that stops part-way does.
"""

from __future__ import annotations

import re
import subprocess
import time
from typing import Any

from eosmirror_tools.kit import runtime

CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
_PRINTED = re.compile(r"^Partition:(\d+)\tOffset:(\d+)\t(.*)$")

Read = dict[int, list[tuple[int, str]]]     # per partition: (offset, value) in the order received


def java_group_read(conf: dict[str, Any], topic: str, group: str, max_messages: int, idle_ms: int = 10_000,
                    budget_s: float = 90) -> Read:
    """Kafka's ConsoleConsumer in ``group`` (read_committed; from the group's committed offsets, the
    earliest where it has none) prints ``max_messages`` records, or fewer when ``idle_ms`` pass without
    one; its close commits what it printed. Returns what it printed, per partition."""
    command = runtime.java_command(
        CONSOLE_CONSUMER, "--bootstrap-server", conf["bootstrap.servers"], "--topic", topic, "--group", group,
        "--from-beginning", "--isolation-level", "read_committed", "--max-messages", str(max_messages),
        "--timeout-ms", str(idle_ms), "--formatter-property", "print.partition=true",
        "--formatter-property", "print.offset=true", heap="256m", short_lived=True)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=budget_s)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"ConsoleConsumer of {group} on {conf['bootstrap.servers']} did not end within "
                             f"{budget_s:.0f} s; it printed: {str(exc.stdout)[-1500:]} {str(exc.stderr)[-1500:]}"
                             ) from exc
    assert "Processed a total of" in done.stderr, (
        f"ConsoleConsumer of {group} exited {done.returncode}: {done.stderr[-1500:]}")
    read: Read = {}
    for line in done.stdout.splitlines():
        printed = _PRINTED.match(line)
        if printed:
            read.setdefault(int(printed.group(1)), []).append((int(printed.group(2)), printed.group(3)))
    return read


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
