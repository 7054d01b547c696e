"""Kafka's own Java ConsoleConsumer as a reader (read_committed): positions and records from Kafka's
client, never from eosmirror's arithmetic."""

from __future__ import annotations

import re
import subprocess

from eosmirror_tools.kit import runtime
from tests.support.clusters import PARTITIONS


def java_records(conf, topic: str, group: str) -> dict[int, list[tuple[int, str]]]:
    """Kafka's ConsoleConsumer (read_committed) with offsets: per partition, (offset, value) in order."""
    command = runtime.java_command(
        "org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", conf["bootstrap.servers"], "--topic",
        topic, "--group", group, "--from-beginning", "--isolation-level", "read_committed", "--timeout-ms", "6000",
        "--formatter-property", "print.partition=true", "--formatter-property", "print.offset=true",
        heap="256m", short_lived=True)
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert "Processed a total of" in done.stderr, f"ConsoleConsumer exited {done.returncode}: {done.stderr[-1500:]}"
    out: dict[int, list[tuple[int, str]]] = {k: [] for k in range(PARTITIONS)}
    for line in done.stdout.splitlines():
        found = re.match(r"Partition:(\d+)\s+Offset:(\d+)\s+(.*)$", line)
        if found:
            out[int(found.group(1))].append((int(found.group(2)), found.group(3)))
    return {k: sorted(records) for k, records in out.items()}


def console_consumer_reads_to_the_end(conf, group, topic) -> int:
    """Kafka's ConsoleConsumer in ``group``, read_committed, from the beginning until 6 s pass without a
    record; its close commits the positions it reached. Returns the records it printed."""
    command = runtime.java_command("org.apache.kafka.tools.consumer.ConsoleConsumer",
                                   "--bootstrap-server", conf["bootstrap.servers"], "--topic", topic,
                                   "--group", group, "--from-beginning", "--isolation-level", "read_committed",
                                   "--timeout-ms", "6000", "--formatter-property", "print.partition=true",
                                   heap="256m", short_lived=True)
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert "Processed a total of" in done.stderr, f"ConsoleConsumer exited {done.returncode}: {done.stderr[-1500:]}"
    # stdout carries the records ("Partition:<p>\t<value>", one a line) and the JVM's log lines
    return len([line for line in done.stdout.splitlines() if line.startswith("Partition:")])


def _tool(conf, main_class: str, *args: str) -> str:
    command = runtime.java_command(main_class, "--bootstrap-server", conf["bootstrap.servers"], *args,
                                   heap="256m", short_lived=True)
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{main_class} exited {done.returncode}: {done.stderr[-1500:]}"
    return done.stdout


def java_end_offsets(conf, topic: str) -> dict[int, int]:
    """Kafka's GetOffsetShell: each partition's latest offset (``--time -1``)."""
    out = _tool(conf, "org.apache.kafka.tools.GetOffsetShell", "--topic", topic, "--time", "-1")
    found = re.findall(rf"^{re.escape(topic)}:(\d+):(\d+)$", out, re.MULTILINE)
    assert found, out
    return {int(p): int(o) for p, o in found}


def java_partition_count(conf, topic: str) -> int:
    """Kafka's TopicCommand --describe: the topic's PartitionCount."""
    out = _tool(conf, "org.apache.kafka.tools.TopicCommand", "--describe", "--topic", topic)
    found = re.search(r"PartitionCount:\s*(\d+)", out)
    assert found, f"TopicCommand --describe {topic} printed no PartitionCount: {out[-800:]}"
    return int(found.group(1))
