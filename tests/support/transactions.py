"""Transactions left open on a broker, ended as an operator would with Kafka's kafka-transactions.sh."""

from __future__ import annotations

import re

from eosmirror_tools.kit import runtime


def abort_hanging_transaction(source_conf, refusal: str) -> None:
    """The transaction the killed producer left open on the restarted old source stays open past its
    timeout here (a hanging transaction): the refusal names Kafka's tool and the offset; run it."""
    found = re.findall(r"abort --topic (\S+) --partition (\d+) --start-offset (\d+)", refusal)
    assert found, refusal
    for topic, partition, start in found:     # the refusal lists every held partition, after one wait
        done = runtime.kafka_transactions(source_conf["bootstrap.servers"], "abort", "--topic", topic, "--partition",
                                          partition, "--start-offset", start)
        assert done.returncode == 0, done.stdout + done.stderr


def producer_id_of(conf, transactional_id: str) -> str:
    """The producer id of a transactional id, as `kafka-transactions.sh describe` reports it."""
    done = runtime.kafka_transactions(conf["bootstrap.servers"], "describe", "--transactional-id", transactional_id)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line.split() for line in done.stdout.splitlines() if line.strip()]
    header = next(i for i, line in enumerate(lines) if "ProducerId" in line)
    return dict(zip(lines[header], lines[header + 1]))["ProducerId"]


def producer_ids_on(conf, topic: str, partition: int) -> set[str]:
    """The producer ids the partition's leader keeps state for (`kafka-transactions.sh describe-producers`)."""
    done = runtime.kafka_transactions(conf["bootstrap.servers"], "describe-producers", "--topic", topic,
                                      "--partition", str(partition))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line.split() for line in done.stdout.splitlines() if line.strip()]
    header = next(i for i, line in enumerate(lines) if "ProducerId" in line)
    return {dict(zip(lines[header], line))["ProducerId"] for line in lines[header + 1:]}
