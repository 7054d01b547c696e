"""Transactions left open on a broker, ended as an operator would with Kafka's kafka-transactions.sh."""

from __future__ import annotations

import re

from eosmirror_tools.local import runtime


def abort_hanging_transaction(source_conf, refusal: str) -> None:
    """The transaction the killed producer left open on the restarted old source stays open past its
    timeout here (a hanging transaction): the refusal names Kafka's tool and the offset; run it."""
    found = re.search(r"abort --topic (\S+) --partition (\d+) --start-offset (\d+)", refusal)
    assert found, refusal
    topic, partition, start = found.groups()
    done = runtime.kafka_transactions(source_conf["bootstrap.servers"], "abort", "--topic", topic, "--partition",
                                      partition, "--start-offset", start)
    assert done.returncode == 0, done.stdout + done.stderr
