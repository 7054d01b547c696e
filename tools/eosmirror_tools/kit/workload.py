"""Workloads on the source: numbered records, plain and in transactions of which some abort.

``Workload`` writes every record of partition p with its sequence n (its number within the partition,
increasing in log order, records of aborted transactions included, so committed ones have gaps):
  value    ``<p>-<n>`` then a space and padding up to ``size`` bytes; a record of an aborted
           transaction carries ``a<p>-<n>``, so a copy of one is recognised by its value alone
  key      ``k<n mod 20>`` (a few keys repeat: a mirror must keep their order)
  headers  ``seq`` (n) and ``txn`` (``none``, ``committed`` or ``aborted``), unless ``headers=False``
Both oracles read these records: oracle.py by the headers (a whole read of both logs), sampler.py by
the value's id (a streaming read while the load runs). The source log itself, read with
read_committed, is the ground truth; records of aborted transactions must never reach the target.

Three drivers share one producer pair and one numbering: ``seed`` (a fixed set before a run: half
plain, then transactions of which about one in three aborts), ``start_background`` (random batches
while a run copies and faults strike: errors are counted and the producers rebuilt, as brokers are
restarted under them) and ``produce_paced`` (a steady rate until told to stop: every third
transaction aborts, a plain record per partition between two transactions).

``bulk_load`` is the other kind of workload: as many records as fast as possible, no transactions,
no sequence, the end offsets checked afterwards (the benchmark's data, whose loading is not measured).
"""

from __future__ import annotations

import os
import random
import threading
import time
from typing import Any

from eosmirror.kafka import calls, clients

# Brokers restart under these producers on purpose: librdkafka's per-retry lines at eosmirror's
# level (EOSMIRROR_KAFKA_LOG_LEVEL); the errors that matter are counted in Workload.errors.
_QUIET = {"log_level": clients.librdkafka_log_level()}
ABORTED_MARK = "a"   # the first character of an aborted record's id


def record_value(rid: str, size: int) -> bytes:
    """The id, a space, then padding to ``size`` bytes (never shorter than the id and its space)."""
    head = f"{rid} ".encode()
    return head + b"x" * max(0, size - len(head))


class Workload:
    """Writes numbered records to every partition of a topic, plain and in transactions."""

    def __init__(self, conf: dict[str, Any], topic: str, partitions: int, seed: int = 0, txn_id: str | None = None,
                 size: int = 0, headers: bool = True):
        self.conf, self.topic, self.partitions, self.size, self.headers = conf, topic, partitions, size, headers
        self.rng = random.Random(seed)
        self.next_seq = [0] * partitions
        self.txn_id = txn_id or f"eosmirror-workload-{time.time_ns()}"
        self.plain = self.txn_committed = self.aborted = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._plain: Any = None
        self._txn: Any = None

    @property
    def committed(self) -> int:
        """Records a read_committed reader sees: plain ones and those of committed transactions."""
        return self.plain + self.txn_committed

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

    def _produce(self, producer: Any, partition: int, txn: str) -> None:
        seq = self.next_seq[partition]
        self.next_seq[partition] += 1
        rid = f"{ABORTED_MARK if txn == 'aborted' else ''}{partition}-{seq}"
        headers = [("seq", str(seq).encode()), ("txn", txn.encode())] if self.headers else None
        producer.produce(self.topic, value=record_value(rid, self.size), key=f"k{seq % 20}".encode(),
                         partition=partition, headers=headers)

    def write_plain(self, per_partition: int) -> None:
        producer = self._plain_producer()
        for _ in range(per_partition):
            for p in range(self.partitions):
                self._produce(producer, p, "none")
        producer.flush(60)
        self.plain += per_partition * self.partitions

    def write_transaction(self, per_partition: int, abort: bool) -> None:
        producer = self._txn_producer()
        producer.begin_transaction()
        for _ in range(per_partition):
            for p in range(self.partitions):
                self._produce(producer, p, "aborted" if abort else "committed")
        producer.flush(60)              # aborted records must really be in the log
        if abort:
            producer.abort_transaction(60)
            self.aborted += per_partition * self.partitions
        else:
            producer.commit_transaction(60)
            self.txn_committed += per_partition * self.partitions

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

        self._thread = threading.Thread(target=loop, name="workload", daemon=True)
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

    def produce_paced(self, stop: threading.Event, rate: float, txn_per_partition: int) -> dict[str, int]:
        """Until ``stop``, at ``rate`` records/s: transactions of ``txn_per_partition`` records per
        partition, every third aborted, one plain record per partition after each. Returns what was
        written: committed (in transactions), aborted and plain record counts."""
        started, batch = time.monotonic(), 0
        while not stop.is_set():
            self.write_transaction(txn_per_partition, abort=batch % 3 == 2)
            self.write_plain(1)
            batch += 1
            ahead = (self.committed + self.aborted) / rate - (time.monotonic() - started)
            if ahead > 0:
                stop.wait(ahead)
        return {"committed": self.txn_committed, "aborted": self.aborted, "plain": self.plain}


# --- the bulk loader --------------------------------------------------------------------------------

# The loader's batching: the fastest settings from the earlier probe (about 150k small records/s).
LOADER_SIZING = {"linger.ms": 20, "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                 "queue.buffering.max.kbytes": 1_048_576}


def bulk_load(conf: dict[str, Any], topic: str, records: int, value_bytes: int, partitions: int, key_bytes: int,
              headers: list[tuple[str, bytes]], cluster_label: str = "source") -> float:
    """Write ``records`` records round-robin over the partitions as fast as the producer can; return the
    seconds it took. Keys are the record number (``key_bytes`` digits), values ``value_bytes`` of an
    incompressible block. The source is checked afterwards: its end offsets must sum to exactly the
    number written."""
    from eosmirror_tools.kit.counting import offset_sum

    producer = clients.idempotent_producer(conf, {}, "eosmirror-tools-loader", extra=LOADER_SIZING)
    spread = 4096
    block = os.urandom(value_bytes + spread)   # values are slices of it: no per-record randomness
    produce, poll = producer.produce, producer.poll
    started = time.monotonic()
    for i in range(records):
        shift = i % spread
        value = block[shift:shift + value_bytes]
        key = b"%0*d" % (key_bytes, i)
        while True:
            try:
                produce(topic, value, key, i % partitions, headers=headers)
                break
            except BufferError:
                poll(0.01)   # local queue full: let librdkafka send
    left = producer.flush(300)
    seconds = time.monotonic() - started
    if left:
        raise RuntimeError(f"loading {topic}: {left} records were not acknowledged within 300 s")
    written = offset_sum(conf, topic, partitions, cluster_label, read_committed=False)
    if written != records:
        raise RuntimeError(f"loading {topic}: the source holds {written} offsets, expected {records}")
    return seconds
