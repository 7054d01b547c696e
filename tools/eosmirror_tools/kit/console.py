"""Kafka's own command-line tools of a given release as judges: ConsoleConsumer (read_committed, with
partitions and offsets), the consumer-groups describe, and kafka-transactions' find-hanging. Each runs
from that release's jars (runtime.java_command(version=...)), so a cluster of an old line is read by a
client of its own line: positions and records from Kafka's code, never from eosmirror's arithmetic.

The tools moved and their options were renamed over the lines; ``console_consumer_command`` knows how:
  ConsoleConsumer       kafka.tools.ConsoleConsumer (Scala) up to 3.6, org.apache.kafka.tools.consumer
                        .ConsoleConsumer from 3.7 (KAFKA-14581)
  formatter options     --property up to 4.1, --formatter-property from 4.2 (KIP-1147; --property warns)
  kafka-transactions    org.apache.kafka.tools.TransactionsCommand from 3.0 (KIP-664): older clusters
                        cannot be asked (the caller says so)
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

from eosmirror_tools.kit import runtime

PROCESSED = re.compile(r"Processed a total of (\d+) messages")
LINE = re.compile(r"^Partition:(\d+)\s+Offset:(\d+)\s(.*)$")


class ConsoleError(RuntimeError):
    """A Kafka tool did not end as it should (its output says why)."""


@dataclass
class ConsoleRead:
    """What ConsoleConsumer printed: per partition, (offset, value) in the order it received them."""

    records: dict[int, list[tuple[int, str]]]
    processed: int
    version: str

    def values(self, partition: int) -> list[str]:
        return [value for _, value in self.records.get(partition, [])]

    def first(self) -> dict[int, tuple[int, str]]:
        return {p: rs[0] for p, rs in self.records.items() if rs}


def console_consumer_class(version: str) -> str:
    return ("org.apache.kafka.tools.consumer.ConsoleConsumer" if runtime.line_of(version) >= (3, 7)
            else "kafka.tools.ConsoleConsumer")


def formatter_option(version: str) -> str:
    return "--formatter-property" if runtime.line_of(version) >= (4, 2) else "--property"


def console_consumer_command(version: str, bootstrap: str, topic: str, group: str | None, from_beginning: bool,
                             idle_ms: int = 6000) -> list[str]:
    """``kafka-console-consumer.sh`` of ``version``: read_committed, partition and offset on every line, until
    ``idle_ms`` pass without a record. With ``group`` and no ``from_beginning`` it starts at the group's
    committed offsets and fails on a partition without one (auto.offset.reset=none)."""
    opt = formatter_option(version)
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--isolation-level", "read_committed",
            "--timeout-ms", str(idle_ms), opt, "print.partition=true", opt, "print.offset=true"]
    if group:
        args += ["--group", group]
    args += ["--from-beginning"] if from_beginning else ["--consumer-property", "auto.offset.reset=none"]
    return runtime.java_command(console_consumer_class(version), *args, heap="256m", short_lived=True,
                                version=_jars(version))


def console_read(version: str, bootstrap: str, topic: str, group: str | None = None, from_beginning: bool = True,
                 idle_ms: int = 6000, timeout: float = 180) -> ConsoleRead:
    """Run ConsoleConsumer of ``version`` and parse what it printed (raises when it did not end normally)."""
    done = subprocess.run(console_consumer_command(version, bootstrap, topic, group, from_beginning, idle_ms),
                          capture_output=True, text=True, timeout=timeout)
    total = PROCESSED.search(done.stderr)
    if total is None:
        raise ConsoleError(f"Kafka {version}'s ConsoleConsumer on {topic} exited {done.returncode} without its "
                           f"total: {(done.stderr or done.stdout)[-1500:]}")
    records: dict[int, list[tuple[int, str]]] = {}
    for line in done.stdout.splitlines():
        found = LINE.match(line)
        if found:
            records.setdefault(int(found.group(1)), []).append((int(found.group(2)), found.group(3)))
    printed = sum(map(len, records.values()))
    if printed != int(total.group(1)):
        raise ConsoleError(f"Kafka {version}'s ConsoleConsumer said {total.group(1)} records but printed {printed}")
    return ConsoleRead(records, printed, version)


def find_hanging(version: str, bootstrap: str, broker_id: int = 1) -> str | None:
    """``kafka-transactions.sh find-hanging --broker-id`` of ``version``: its output (a table whose rows
    are hanging transactions), or None where the line has no such tool (before 3.0)."""
    if runtime.line_of(version) < (3, 0):
        return None
    done = runtime.kafka_transactions(bootstrap, "find-hanging", "--broker-id", str(broker_id), version=_jars(version))
    if done.returncode != 0:
        raise ConsoleError(f"Kafka {version}'s kafka-transactions find-hanging exited {done.returncode}: "
                           f"{(done.stderr or done.stdout)[-1500:]}")
    return done.stdout


def hanging_rows(output: str) -> list[str]:
    """The rows of find-hanging's table: the lines after its header (``Topic\tPartition\t...``), less the
    client's own log lines (``[<time>] INFO ...``), which go to the same stdout."""
    lines = [line for line in output.splitlines() if line.strip() and not line.startswith("[")]
    header = next((i for i, line in enumerate(lines) if line.split()[:2] == ["Topic", "Partition"]), None)
    if header is None:
        raise ConsoleError(f"find-hanging printed no table header: {output[-800:]}")
    return lines[header + 1:]


def _jars(version: str) -> str | None:
    return None if version == runtime.kafka_version() else version
