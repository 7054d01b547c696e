"""An independent time-lag sampler: its own confluent-kafka consumers, no eosmirror code.

The soak producer writes records whose value starts with a unique id (``<partition>-<sequence>``,
then padding); the mirror copies a source partition to the same target partition in order. The
sampler reads both sides read_committed and keeps, per partition, the queue of committed source
records not seen on the target yet. The time lag at a moment is the age of the oldest record in
any queue (its CreateTime, which the mirror keeps), 0 when every queue is empty: the recovery point.

At the end the same bookkeeping gives the exact comparison: a target record that is not the head of
its partition's queue is a duplicate (seen before) or out of order; what is left in a queue after
the mirror caught up is lost; a target id the source never committed is aborted data.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any


def record_id(value: bytes | None) -> bytes:
    """The id at the start of a soak record's value (up to the first space)."""
    return (value or b"").split(b" ", 1)[0]


@dataclass
class LagTracker:
    """Pure bookkeeping of one topic: feed source and target records in partition order."""

    pending: dict[int, deque[tuple[bytes, int]]] = field(default_factory=dict)   # partition -> (id, ts ms)
    copied: dict[int, set[bytes]] = field(default_factory=dict)
    source_ids: set[bytes] = field(default_factory=set)
    early: dict[int, deque[bytes]] = field(default_factory=dict)   # target ids seen before their source record
    duplicates: int = 0
    out_of_order: int = 0
    records: int = 0

    def source(self, partition: int, rid: bytes, ts_ms: int) -> None:
        self.source_ids.add(rid)
        early = self.early.get(partition)
        if early and early[0] == rid:   # the target's copy was read first (the two consumers race)
            early.popleft()
            self.copied.setdefault(partition, set()).add(rid)
            return
        self.pending.setdefault(partition, deque()).append((rid, ts_ms))

    def target(self, partition: int, rid: bytes) -> None:
        self.records += 1
        copied = self.copied.setdefault(partition, set())
        if rid in copied:
            self.duplicates += 1
            return
        queue = self.pending.get(partition)
        if queue and queue[0][0] == rid:
            queue.popleft()
            copied.add(rid)
        elif queue and any(r == rid for r, _ in queue):
            self.out_of_order += 1
        else:
            self.early.setdefault(partition, deque()).append(rid)

    def time_lag_s(self, now_ms: int) -> float:
        heads = [q[0][1] for q in self.pending.values() if q]
        return max(0.0, (now_ms - min(heads)) / 1000) if heads else 0.0

    def losses(self) -> int:
        return sum(len(q) for q in self.pending.values())

    def aborted(self) -> int:
        """Target records the source never committed (read_committed on both sides)."""
        return sum(1 for q in self.early.values() for rid in q if rid not in self.source_ids)


def percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class Sampler:
    """Reads ``topic`` on both clusters in two threads and samples the time lag every ``every`` s."""

    def __init__(self, source_bootstrap: str, target_bootstrap: str, topic: str, every: float = 1.0):
        self.source_bootstrap, self.target_bootstrap, self.topic, self.every = (
            source_bootstrap, target_bootstrap, topic, every)
        self.tracker = LagTracker()
        self.lock = threading.Lock()
        self.samples: list[tuple[float, float]] = []   # (epoch s, time lag s)
        self.stop_event = threading.Event()
        self.threads: list[threading.Thread] = []

    def _consumer(self, bootstrap: str) -> Any:
        from confluent_kafka import Consumer

        return Consumer({"bootstrap.servers": bootstrap, "group.id": f"soak-sampler-{time.time_ns()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "enable.partition.eof": False})

    def _read(self, bootstrap: str, is_source: bool) -> None:
        consumer = self._consumer(bootstrap)
        consumer.subscribe([self.topic])
        try:
            while not self.stop_event.is_set():
                for m in consumer.consume(5000, 0.2):
                    if m.error() is not None:
                        continue
                    rid = record_id(m.value())
                    with self.lock:
                        if is_source:
                            self.tracker.source(m.partition(), rid, m.timestamp()[1])
                        else:
                            self.tracker.target(m.partition(), rid)
        finally:
            consumer.close()

    def _sample(self) -> None:
        while not self.stop_event.wait(self.every):
            now = time.time()
            with self.lock:
                self.samples.append((now, self.tracker.time_lag_s(int(now * 1000))))

    def start(self) -> None:
        self.threads = [threading.Thread(target=self._read, args=(self.source_bootstrap, True), daemon=True),
                        threading.Thread(target=self._read, args=(self.target_bootstrap, False), daemon=True),
                        threading.Thread(target=self._sample, daemon=True)]
        for t in self.threads:
            t.start()

    def stop(self) -> dict[str, Any]:
        self.stop_event.set()
        for t in self.threads:
            t.join(30)
        lags = [lag for _, lag in self.samples]
        with self.lock:
            tr = self.tracker
            return {"time_lag_p50_s": percentile(lags, 50), "time_lag_p95_s": percentile(lags, 95),
                    "time_lag_p99_s": percentile(lags, 99), "time_lag_max_s": max(lags, default=0.0),
                    "samples": len(lags), "records": tr.records, "duplicates": tr.duplicates,
                    "out_of_order": tr.out_of_order, "losses": tr.losses(), "aborted": tr.aborted()}
