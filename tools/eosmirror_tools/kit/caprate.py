"""Bytes arriving on the target, measured from outside the mirror: the bandwidth cap's evidence
(issue #52 item 3; the integration test tests/integration/test_bandwidth_cap.py and ``--only cap``).

A sampler thread asks the target's high watermarks (read_uncommitted: records count when the broker
appends them, not when their transaction commits, which is what a link carries) of the mirrored
partitions a few times a second with its own consumer; bytes = offsets x the record size the workload
wrote (every record the same size; a commit marker takes one offset per partition and transaction, a
slight over-count). ``windows`` turns the samples into the rate of every window of a given length.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class EndSampler:
    """Samples (monotonic seconds, sum of high watermarks) of ``partitions`` of ``topic`` on the target."""

    conf: dict[str, Any]
    topic: str
    partitions: int
    every: float = 0.2
    samples: list[tuple[float, int]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="end-sampler")

    def _run(self) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        # read_uncommitted: its ListOffsets answer is the high watermark (librdkafka's default, read_committed,
        # answers the last stable offset, which moves only when a transaction commits).
        consumer = Consumer({**self.conf, "group.id": "eosmirror-cap-sampler", "enable.auto.commit": False,
                             "isolation.level": "read_uncommitted"})
        try:
            while not self._stop.is_set():
                try:
                    # Stamped at the middle of its reads: a thread that waited for the CPU (or the GIL) before
                    # or after them would otherwise shift the sample by that wait.
                    before = time.monotonic()
                    ends = [consumer.get_watermark_offsets(TopicPartition(self.topic, k), timeout=5, cached=False)[1]
                            for k in range(self.partitions)]
                    self.samples.append(((before + time.monotonic()) / 2, sum(ends)))
                except KafkaException as exc:   # the target topic does not exist yet: the run creates it
                    self.errors.append(str(exc))
                self._stop.wait(self.every)     # the sampling period, not a wait for a condition
        finally:
            consumer.close()

    def __enter__(self) -> "EndSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)


def windows(samples: list[tuple[float, int]], seconds: float, record_bytes: int) -> list[tuple[float, float]]:
    """(window start relative to the first sample, bytes per second) of every window of at least ``seconds``
    between two samples (from each sample to the first one ``seconds`` or more later)."""
    out = []
    if not samples:
        return out
    origin = samples[0][0]
    j = 0
    for i, (t0, o0) in enumerate(samples):
        j = max(j, i + 1)
        while j < len(samples) and samples[j][0] - t0 < seconds:
            j += 1
        if j == len(samples):
            break
        t1, o1 = samples[j]
        out.append((round(t0 - origin, 3), (o1 - o0) * record_bytes / (t1 - t0)))
    return out


def active(samples: list[tuple[float, int]], final: int) -> list[tuple[float, int]]:
    """The samples from the last one before the first record arrived to the first one that holds ``final``
    offsets: the copy's own time, without the run's start and end."""
    first = next((i for i, (_, o) in enumerate(samples) if o > 0), None)
    if first is None:
        return []
    last = next((i for i, (_, o) in enumerate(samples) if o >= final), len(samples) - 1)
    return samples[max(0, first - 1):last + 1]
