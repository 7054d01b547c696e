"""The chaos workload: numbered records on the source, some in aborted transactions, while the
mirror runs.

Every record carries headers ``seq`` (its number within the partition, increasing in log order)
and ``txn`` (``none``, ``committed`` or ``aborted``). Records of aborted transactions must never
reach the target; the source log itself, read with read_committed, is the ground truth.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from eosmirror.kafka import calls, clients

# Brokers restart under these producers on purpose: librdkafka's per-retry lines at eosmirror's
# level (EOSMIRROR_KAFKA_LOG_LEVEL); the errors that matter are counted in Workload.errors.
_QUIET = {"log_level": clients.librdkafka_log_level()}


def create_topic(conf: dict[str, Any], topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(conf)
    future = admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=30)[topic]
    future.result(30)


class Workload:
    """Writes numbered records to every partition of a topic, plain and in transactions."""

    def __init__(self, conf: dict[str, Any], topic: str, partitions: int, seed: int, txn_id: str):
        self.conf, self.topic, self.partitions = conf, topic, partitions
        self.rng = random.Random(seed)
        self.next_seq = [0] * partitions
        self.txn_id = txn_id
        self.committed = self.aborted = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._plain = self._txn = None

    # Producers are created lazily and replaced after fatal errors (brokers get restarted under them).
    def _plain_producer(self) -> Any:
        from confluent_kafka import Producer

        if self._plain is None:
            self._plain = Producer({**self.conf, "enable.idempotence": True, "linger.ms": 5, **_QUIET})
        return self._plain

    def _txn_producer(self) -> Any:
        from confluent_kafka import Producer

        if self._txn is None:
            self._txn = Producer({**self.conf, "transactional.id": self.txn_id, "linger.ms": 5,
                                  "transaction.timeout.ms": 30000, **_QUIET})
            self._txn.init_transactions(60)
        return self._txn

    def _record(self, partition: int, txn: str) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
        seq = self.next_seq[partition]
        self.next_seq[partition] += 1
        key = f"k{self.rng.randrange(20)}".encode()
        return key, f"{partition}:{seq}:{self.rng.getrandbits(32):08x}".encode(), [
            ("seq", str(seq).encode()), ("txn", txn.encode())]

    def write_plain(self, per_partition: int) -> None:
        producer = self._plain_producer()
        for _ in range(per_partition):
            for p in range(self.partitions):
                key, value, headers = self._record(p, "none")
                producer.produce(self.topic, value=value, key=key, partition=p, headers=headers)
        producer.flush(60)
        self.committed += per_partition * self.partitions

    def write_transaction(self, per_partition: int, abort: bool) -> None:
        producer = self._txn_producer()
        producer.begin_transaction()
        for _ in range(per_partition):
            for p in range(self.partitions):
                key, value, headers = self._record(p, "aborted" if abort else "committed")
                producer.produce(self.topic, value=value, key=key, partition=p, headers=headers)
        producer.flush(60)              # aborted records must really be in the log
        if abort:
            producer.abort_transaction(60)
            self.aborted += per_partition * self.partitions
        else:
            producer.commit_transaction(60)
            self.committed += per_partition * self.partitions

    def seed(self, per_partition: int) -> None:
        """Half plain, half in transactions of which about one in three aborts."""
        self.write_plain(per_partition // 2)
        remaining = per_partition - per_partition // 2
        while remaining > 0:
            size = min(remaining, self.rng.randint(10, 60))
            abort = self.rng.random() < 1 / 3
            self.write_transaction(size, abort)
            if not abort:
                remaining -= size

    # --- production while the mirror runs --------------------------------------------------------

    def start_background(self, batches_per_second: float = 10.0) -> None:
        def loop() -> None:
            while not self._stop.is_set():
                try:
                    if self.rng.random() < 0.5:
                        self.write_plain(self.rng.randint(1, 5))
                    else:
                        self.write_transaction(self.rng.randint(1, 10), abort=self.rng.random() < 1 / 3)
                except Exception as exc:  # noqa: BLE001 - brokers are being restarted: start over
                    self.errors.append(f"{calls.error_name(exc) or type(exc).__name__}: {exc}"[:200])
                    self._plain = self._txn = None
                    time.sleep(0.5)
                self._stop.wait(1 / batches_per_second)

        self._thread = threading.Thread(target=loop, name="chaos-workload", daemon=True)
        self._thread.start()

    def stop_background(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(120)
        for producer in (self._plain, self._txn):
            if producer is not None:
                try:
                    producer.flush(30)
                except Exception:  # noqa: BLE001
                    pass
