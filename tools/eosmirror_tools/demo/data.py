"""The demo data set on the source cluster.

Topics (created when missing, appended to on every call):
  demo.orders     6 partitions, keyed records, two headers (one key repeated: order is kept)
  demo.clicks     3 partitions, null keys
  demo.customers  2 partitions, compacted, with tombstones (null values)
  demo.payments   4 partitions, the kit's numbered records in transactions: two of every three commit, one aborts
  demo.audit      1 partition, message.timestamp.type=LogAppendTime
Aborted records carry the header ``txn=aborted`` so that a leak is visible at a glance.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from eosmirror.kafka import clients
from eosmirror_tools.kit import topics, workload

TOPICS: dict[str, tuple[int, dict[str, str]]] = {
    "demo.orders": (6, {}),
    "demo.clicks": (3, {}),
    "demo.customers": (2, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.ms": "60000"}),
    "demo.payments": (4, {}),
    "demo.audit": (1, {"message.timestamp.type": "LogAppendTime"}),
}


@dataclass
class Seeded:
    committed: dict[str, int] = field(default_factory=dict)
    aborted: dict[str, int] = field(default_factory=dict)

    @property
    def total_committed(self) -> int:
        return sum(self.committed.values())


def seed(conf: dict[str, Any], records: int = 2000, cluster_label: str = "source") -> Seeded:
    """Append ``records`` committed records per topic (payments: plus the aborted third)."""
    from confluent_kafka import Producer

    for name, (partitions, settings) in TOPICS.items():
        topics.create_topics(conf, [name], partitions, cluster_label, configs={name: settings}, replication=-1,
                             exist_ok=True)
    out = Seeded()
    run = uuid.uuid4().hex[:6]
    # librdkafka's own lines at the level eosmirror's clients use (a retry such as "GETPID Coordinator
    # load in progress" on a fresh cluster is not news for the demo's reader).
    plain = Producer({**conf, "enable.idempotence": True, "linger.ms": 5, "log_level": clients.librdkafka_log_level()})
    for i in range(records):
        plain.produce("demo.orders", key=f"customer-{i % 97}".encode(), value=f'{{"order":"{run}-{i}","qty":{i % 5 + 1}}}'.encode(),
                      partition=i % 6, headers=[("source", b"shop"), ("trace", f"{run}-{i}".encode()), ("source", b"web")])
        plain.produce("demo.clicks", key=None, value=f"click {run}-{i}".encode(), partition=i % 3)
        value = None if i % 10 == 9 else f'{{"customer":{i % 50},"v":"{run}-{i}"}}'.encode()  # every 10th: tombstone
        plain.produce("demo.customers", key=f"customer-{i % 50}".encode(), value=value, partition=(i % 50) % 2)
        plain.produce("demo.audit", key=f"{i}".encode(), value=f"audit {run}-{i}".encode(), partition=0)
        if i % 10000 == 0:
            plain.poll(0)
    plain.flush(60)
    for topic in ("demo.orders", "demo.clicks", "demo.customers", "demo.audit"):
        out.committed[topic] = records
    out.committed["demo.payments"], out.aborted["demo.payments"] = transactional_payments(conf, records, run)
    return out


def transactional_payments(conf: dict[str, Any], records: int, run: str, topic: str = "demo.payments",
                           partitions: int = 4, per_transaction: int = 100) -> tuple[int, int]:
    """At least ``records`` committed records in transactions of ``per_transaction``, every third
    aborted (the kit's workload: header ``txn`` says which); returns (committed, aborted)."""
    payments = workload.Workload(conf, topic, partitions, txn_id=f"eosmirror-demo-payments-{run}")
    per_partition = max(1, per_transaction // partitions)
    batch = 0
    while payments.txn_committed < records:
        payments.write_transaction(per_partition, abort=batch % 3 == 2)
        batch += 1
    return payments.txn_committed, payments.aborted
