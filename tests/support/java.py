"""Kafka's own Java tools and client as judges: the reads go to the session's judge (tests/support/judge.py,
Kafka's Java KafkaConsumer, read_committed), the other questions to Kafka's command-line tools; positions
and records from Kafka's client, never from eosmirror's arithmetic."""

from __future__ import annotations

import re
import subprocess

from eosmirror_tools.kit import runtime
from tests.support.clusters import PARTITIONS
from tests.support.judge import judge_read


def java_records(conf, topic: str, group: str) -> dict[int, list[tuple[int, str]]]:
    """Kafka's Java consumer in ``group`` (read_committed, from the group's offsets, the earliest where it has
    none) to the end, committing there: per partition, (offset, value) in order."""
    read = judge_read(conf, topic, group).records
    return {k: sorted(read.get(k, [])) for k in range(PARTITIONS)}


def java_reads_to_the_end(conf, group, topic) -> int:
    """Kafka's Java consumer in ``group``, read_committed, from the beginning to the end; it commits the
    positions it reached (as ConsoleConsumer's close). Returns the records it read."""
    return judge_read(conf, topic, group).count()


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
