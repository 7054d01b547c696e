"""The demo data set on the source cluster (also used by tests and the benchmark smoke test).

Topics (created when missing, appended to on every call):
  demo.orders     6 partitions, keyed records, two headers (one key repeated: order is kept)
  demo.clicks     3 partitions, null keys
  demo.customers  2 partitions, compacted, with tombstones (null values)
  demo.payments   4 partitions, written in transactions: two of every three commit, one aborts
  demo.audit      1 partition, message.timestamp.type=LogAppendTime
Aborted records carry the header ``txn=aborted`` so that a leak is visible at a glance.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from eosmirror.kafka import calls, clients

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


def ensure_topics(conf: dict[str, Any], wanted: dict[str, tuple[int, dict[str, str]]], cluster_label: str) -> None:
    from confluent_kafka.admin import NewTopic

    admin = clients.admin_client(conf, "demo-admin")
    existing = set(admin.list_topics(timeout=15).topics)
    new = [NewTopic(name, num_partitions=n, replication_factor=-1, config=cfg)
           for name, (n, cfg) in wanted.items() if name not in existing]
    if new:
        for name, future in admin.create_topics(new, request_timeout=30).items():
            try:
                future.result(timeout=30)
            except Exception as exc:  # noqa: BLE001
                if calls.error_name(exc) != "TOPIC_ALREADY_EXISTS":
                    raise calls.translate(exc, f"create topic {name}", cluster_label) from None


def seed(conf: dict[str, Any], records: int = 2000, cluster_label: str = "source") -> Seeded:
    """Append ``records`` committed records per topic (payments: plus the aborted third)."""
    from confluent_kafka import Producer

    ensure_topics(conf, TOPICS, cluster_label)
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
    """Write ``records`` committed records in transactions, aborting every third transaction."""
    from confluent_kafka import Producer

    producer = Producer({**conf, "transactional.id": f"eosmirror-demo-payments-{run}", "linger.ms": 5,
                         "log_level": clients.librdkafka_log_level()})
    producer.init_transactions(30)
    committed = aborted = 0
    txn = 0
    while committed < records:
        abort = txn % 3 == 2
        size = per_transaction if abort else min(per_transaction, records - committed)
        producer.begin_transaction()
        for j in range(size):
            n = committed + j
            producer.produce(topic, key=f"acct-{n % 31}".encode(), value=f'{{"payment":"{run}-{txn}-{j}"}}'.encode(),
                             partition=n % partitions, headers=[("txn", b"aborted" if abort else b"committed")])
        if abort:
            producer.flush(30)          # make sure aborted records really reach the log
            producer.abort_transaction(30)
            aborted += size
        else:
            producer.commit_transaction(30)
            committed += size
        txn += 1
    time.sleep(0)  # producer closes on garbage collection
    return committed, aborted
