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
