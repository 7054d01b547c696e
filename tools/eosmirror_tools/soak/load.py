"""The soak load: records of ``size`` bytes at ``rate`` records/s over every partition of a topic,
in transactions of which one in three is aborted, with plain (non-transactional) writes between
them. Each value starts with its id ``<partition>-<sequence>`` (sampler.py matches copies by it);
aborted records get ids of their own (``a<partition>-<sequence>``), so a copy of one is recognised."""

from __future__ import annotations

import threading
import time
from typing import Any


def value(rid: str, size: int) -> bytes:
    head = f"{rid} ".encode()
    return head + b"x" * max(0, size - len(head))


def produce(bootstrap: str, topic: str, partitions: int, stop: threading.Event, rate: float = 20_000.0,
            size: int = 200, txn_records: int = 100, txn_id: str | None = None) -> dict[str, int]:
    """Produce until ``stop``; returns what was written: committed, aborted and plain record counts."""
    from confluent_kafka import Producer

    common: dict[str, Any] = {"bootstrap.servers": bootstrap, "linger.ms": 5}
    plain = Producer({**common, "enable.idempotence": True})
    txn = Producer({**common, "transactional.id": txn_id or f"soak-load-{time.time_ns()}"})
    txn.init_transactions(30)
    seq = [0] * partitions
    counts = {"committed": 0, "aborted": 0, "plain": 0}
    started, sent, batch = time.monotonic(), 0, 0
    while not stop.is_set():
        aborted = batch % 3 == 2
        txn.begin_transaction()
        for n in range(txn_records):
            p = n % partitions
            rid = f"{'a' if aborted else ''}{p}-{seq[p]}"
            seq[p] += 1
            txn.produce(topic, value(rid, size), partition=p)
        txn.flush(30)
        (txn.abort_transaction if aborted else txn.commit_transaction)(30)
        counts["aborted" if aborted else "committed"] += txn_records
        for p in range(partitions):   # plain writes between the transactions
            plain.produce(topic, value(f"{p}-{seq[p]}", size), partition=p)
            seq[p] += 1
        plain.flush(30)
        counts["plain"] += partitions
        sent += txn_records + partitions
        batch += 1
        ahead = sent / rate - (time.monotonic() - started)
        if ahead > 0:
            stop.wait(ahead)
    return counts
