"""An independent time-lag sampler: its own confluent-kafka consumers, no eosmirror code.

The soak producer writes records whose value starts with a unique id (``<partition>-<sequence>``,
then padding; aborted ones ``a<partition>-<sequence>``); a mirror copies a source partition to the
same target partition in order. The sampler reads the source once and each mirror's target topic,
all read_committed, and keeps per mirror and partition the queue of committed source records not
seen on the target yet. The time lag at a moment is the age of the oldest record in any queue (its
CreateTime, which the mirrors keep), 0 when every queue is empty: the recovery point.

At the end the same bookkeeping gives the exact comparison: a target record at or below the last
copied sequence of its partition is a duplicate; one found deeper in the queue than its head skipped
records (out of order; the skipped ones count as lost); what is left in a queue after the mirror
caught up is lost; an aborted id, or an id the source never delivered, is aborted data.

Memory is bounded by what is pending, not by what was copied: sequences rise within a partition,
so "copied before" is one number per partition (a 30-minute soak copies tens of millions of records).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

ABORTED_MARK = b"a"


def record_id(value: bytes | None) -> bytes:
    """The id at the start of a soak record's value (up to the first space)."""
    return (value or b"").split(b" ", 1)[0]


def sequence(rid: bytes) -> int:
    return int(rid.rsplit(b"-", 1)[1])


@dataclass
class LagTracker:
    """Pure bookkeeping of one mirror: feed source and target records in partition order."""

    pending: dict[int, deque[tuple[int, int]]] = field(default_factory=dict)   # partition -> (seq, ts ms)
    last_copied: dict[int, int] = field(default_factory=dict)
    early: dict[int, deque[int]] = field(default_factory=dict)   # target seqs read before their source record
    duplicates: int = 0
    out_of_order: int = 0
    skipped: int = 0
    aborted_copies: int = 0
    records: int = 0

    def source(self, partition: int, rid: bytes, ts_ms: int) -> None:
        seq = sequence(rid)
        early = self.early.get(partition)
        if early and early[0] == seq:   # the target's copy was read first (the consumers race)
            early.popleft()
            self.last_copied[partition] = seq
            return
        self.pending.setdefault(partition, deque()).append((seq, ts_ms))

    def target(self, partition: int, rid: bytes) -> None:
        self.records += 1
        if rid.startswith(ABORTED_MARK):
            self.aborted_copies += 1
            return
        seq = sequence(rid)
        if seq <= self.last_copied.get(partition, -1):
            self.duplicates += 1
            return
        queue = self.pending.get(partition)
        if queue and queue[0][0] == seq:
            queue.popleft()
            self.last_copied[partition] = seq
        elif queue and queue[0][0] < seq <= queue[-1][0]:
            self.out_of_order += 1
            while queue and queue[0][0] < seq:
                queue.popleft()
                self.skipped += 1
            if queue and queue[0][0] == seq:
                queue.popleft()
            self.last_copied[partition] = seq
        else:
            self.early.setdefault(partition, deque()).append(seq)

    def time_lag_s(self, now_ms: int) -> float:
        heads = [q[0][1] for q in self.pending.values() if q]
        return max(0.0, (now_ms - min(heads)) / 1000) if heads else 0.0

    def losses(self) -> int:
        return sum(len(q) for q in self.pending.values()) + self.skipped

    def aborted(self) -> int:
        """Target records the source never committed (read_committed on both sides)."""
        return self.aborted_copies + sum(len(q) for q in self.early.values())


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def lag_summary(lags: list[float]) -> dict[str, float]:
    return {"time_lag_p50_s": round(percentile(lags, 50), 2), "time_lag_p95_s": round(percentile(lags, 95), 2),
            "time_lag_p99_s": round(percentile(lags, 99), 2), "time_lag_max_s": round(max(lags, default=0.0), 2)}


class Sampler:
    """Reads ``topic`` on the source and each mirror's target topic (``targets``: label -> topic on
    the target cluster; default: the same name) in threads, and samples every mirror's time lag
    every ``every`` seconds."""

    def __init__(self, source_bootstrap: str, target_bootstrap: str, topic: str, every: float = 1.0,
                 targets: dict[str, str] | None = None):
        self.source_bootstrap, self.target_bootstrap, self.topic, self.every = (
            source_bootstrap, target_bootstrap, topic, every)
        self.targets = targets or {"mirror": topic}
        self.trackers = {label: LagTracker() for label in self.targets}
        self.lock = threading.Lock()
        self.samples: dict[str, list[tuple[float, float]]] = {label: [] for label in self.targets}   # (epoch s, lag s)
        self.source_records = 0
        self.stop_event = threading.Event()
        self.threads: list[threading.Thread] = []

    @staticmethod
    def _consumer(bootstrap: str) -> Any:
        from confluent_kafka import Consumer

        return Consumer({"bootstrap.servers": bootstrap, "group.id": f"soak-sampler-{time.time_ns()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "enable.partition.eof": False,
                         # A mirror creates its target topic on its first run: find it within a second.
                         "topic.metadata.refresh.interval.ms": 1000,
                         # The sampler's own delay bounds its precision: a fetch parked at the log's
                         # end returns within 50 ms (500 by default), and consume() below returns
                         # every 50 ms whatever it holds (it waits out its timeout for fewer records).
                         "fetch.wait.max.ms": 50, "fetch.queue.backoff.ms": 10})

    def _read(self, bootstrap: str, topic: str, label: str | None) -> None:
        consumer = self._consumer(bootstrap)
        consumer.subscribe([topic])
        trackers = list(self.trackers.values())
        try:
            while not self.stop_event.is_set():
                batch = [m for m in consumer.consume(5000, 0.05) if m.error() is None]
                with self.lock:
                    for m in batch:
                        rid = record_id(m.value())
                        if label is None:
                            ts = m.timestamp()[1]
                            self.source_records += 1
                            for tracker in trackers:
                                tracker.source(m.partition(), rid, ts)
                        else:
                            self.trackers[label].target(m.partition(), rid)
        finally:
            consumer.close()

    def _sample(self) -> None:
        while not self.stop_event.wait(self.every):
            now = time.time()
            with self.lock:
                for label, tracker in self.trackers.items():
                    self.samples[label].append((now, tracker.time_lag_s(int(now * 1000))))

    def start(self) -> "Sampler":
        readers = [(self.source_bootstrap, self.topic, None)] + [
            (self.target_bootstrap, topic, label) for label, topic in self.targets.items()]
        self.threads = [threading.Thread(target=self._read, args=r, daemon=True, name=f"soak-read-{r[2] or 'source'}")
                        for r in readers] + [threading.Thread(target=self._sample, daemon=True, name="soak-sample")]
        for t in self.threads:
            t.start()
        return self

    def lag_now(self, label: str) -> float:
        with self.lock:
            return self.trackers[label].time_lag_s(int(time.time() * 1000))

    def stop(self, since: float = 0.0, until: float | None = None) -> dict[str, dict[str, Any]]:
        """Per mirror: the lag percentiles of the samples taken from ``since`` to ``until`` (epoch s)
        and the exact comparison of everything read."""
        self.stop_event.set()
        for t in self.threads:
            t.join(30)
        with self.lock:
            out = {}
            for label, tr in self.trackers.items():
                lags = [lag for at, lag in self.samples[label] if since <= at <= (until or float("inf"))]
                out[label] = {**lag_summary(lags), "samples": len(lags), "records": tr.records,
                              "duplicates": tr.duplicates, "out_of_order": tr.out_of_order,
                              "losses": tr.losses(), "aborted": tr.aborted()}
            return out
