"""What other clients of the clusters feel while a load runs, measured from outside it (issue #52 item 4,
``--only storm``): two probes, each in a process of its own (a probe in the loaded process would measure
its GIL, not the brokers).

  produce probe   a librdkafka producer with acks=all and linger.ms=0 writes small records to its own topic
                  on a cluster at a fixed rate; a sample is (send time, latency from ``produce()`` to its
                  delivery callback, librdkafka's ``Message.latency()``). Failed deliveries are counted.
  fetch probe     a producer feeds its own topic on a cluster at a fixed rate (linger.ms=0: the record's
                  CreateTime is its send time) while a consumer of that topic (assigned at its end) reads
                  it; a sample is (record timestamp, consume time minus record timestamp): the produce and
                  the fetch, end to end, as a consumer of the cluster sees it.

``Probes`` runs both for as long as its ``with`` block; ``summary`` gives p50/p99/max of the samples whose
time falls in a window (wall-clock seconds, comparable across the processes of one machine).
"""

from __future__ import annotations

import functools
import json
import multiprocessing
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

VALUE = b"p" * 100       # small records: their latency is the brokers' and the link's, not their size
READY_WITHIN_S = 90.0    # a probe's first sample, on a busy machine


def _paced(rate: float, stop: Any) -> Any:
    """Yield at ``rate`` per second until ``stop`` is set (a pacing period, not a wait for a condition);
    a tick that is late is not made up for with a burst."""
    period = 1.0 / rate
    due = time.monotonic()
    while not stop.is_set():
        yield
        due = max(due + period, time.monotonic() - period)
        stop.wait(max(0.0, due - time.monotonic()))


def _produce_probe(conf: dict[str, Any], topic: str, rate: float, stop: Any, ready: Any, out: str) -> None:
    from confluent_kafka import Producer

    samples: list[tuple[float, float]] = []
    failed: list[str] = []

    def delivered(sent: float, err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(str(err))
            return
        samples.append((sent, msg.latency()))
        ready.set()

    producer = Producer({**conf, "acks": "all", "linger.ms": 0, "client.id": "eosmirror-latency-produce-probe"})
    for _ in _paced(rate, stop):
        sent = time.time()
        producer.produce(topic, value=VALUE, partition=0, on_delivery=functools.partial(delivered, sent))
        producer.poll(0)
    left = producer.flush(30)
    Path(out).write_text(json.dumps({"samples": samples, "failed": len(failed), "failures": failed[:5],
                                     "undelivered": left}))


def _fetch_probe(conf: dict[str, Any], topic: str, rate: float, stop: Any, ready: Any, out: str) -> None:
    from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

    samples: list[tuple[float, float]] = []
    errors: list[str] = []
    consumer = Consumer({**conf, "group.id": f"eosmirror-latency-probe-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "client.id": "eosmirror-latency-fetch-probe"})
    consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            # One record per poll: consume(n, timeout) would hold the first record until n arrived or the
            # timeout passed, and measure its own batching.
            msg = consumer.poll(0.2)
            now = time.time()
            if msg is None:
                continue
            if msg.error():
                errors.append(str(msg.error()))
                continue
            stamped = msg.timestamp()[1] / 1000.0
            samples.append((stamped, now - stamped))
            ready.set()

    reader = threading.Thread(target=read, daemon=True, name="fetch-probe-reader")
    reader.start()
    producer = Producer({**conf, "acks": "all", "linger.ms": 0, "client.id": "eosmirror-latency-feed"})
    for _ in _paced(rate, stop):
        producer.produce(topic, value=VALUE, partition=0)
        producer.poll(0)
    left = producer.flush(30)
    done.set()
    reader.join(30)
    consumer.close()
    Path(out).write_text(json.dumps({"samples": samples, "failed": len(errors), "failures": errors[:5],
                                     "undelivered": left}))


def create_probe_topics(conf: dict[str, Any], names: list[str]) -> None:
    from eosmirror_tools.kit import topics

    topics.create_topics(conf, names, 1, exist_ok=True)


class Probes:
    """The produce probe on ``produce_conf``'s cluster and the fetch probe on ``fetch_conf``'s, each writing
    ``rate`` records a second to a one-partition topic of its own (created here), for the ``with`` block."""

    def __init__(self, produce_conf: dict[str, Any], produce_topic: str, fetch_conf: dict[str, Any],
                 fetch_topic: str, rate: float = 200.0):
        self.rate = rate
        self.plan = {"produce": (_produce_probe, produce_conf, produce_topic),
                     "fetch": (_fetch_probe, fetch_conf, fetch_topic)}
        self.results: dict[str, dict[str, Any]] = {}
        self._folder = Path(tempfile.mkdtemp(prefix="eosmirror-probes-"))
        context = multiprocessing.get_context("spawn")   # no fork of a process holding librdkafka threads
        self._stop = context.Event()
        self._ready = {name: context.Event() for name in self.plan}
        self._processes = {name: context.Process(target=fn, args=(conf, topic, rate, self._stop, self._ready[name],
                                                                   str(self._folder / f"{name}.json")),
                                                 daemon=True, name=f"{name}-probe")
                           for name, (fn, conf, topic) in self.plan.items()}

    def __enter__(self) -> "Probes":
        create_probe_topics(self.plan["produce"][1], [self.plan["produce"][2]])
        create_probe_topics(self.plan["fetch"][1], [self.plan["fetch"][2]])
        for process in self._processes.values():
            process.start()
        deadline = time.monotonic() + READY_WITHIN_S
        for name, ready in self._ready.items():
            if not ready.wait(max(0.0, deadline - time.monotonic())):
                self.__exit__()
                raise RuntimeError(f"the {name} probe had no sample within {READY_WITHIN_S:.0f} s "
                                   f"(its process {'alive' if self._processes[name].is_alive() else 'gone'})")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for name, process in self._processes.items():
            process.join(60)
            if process.is_alive():
                process.kill()
                process.join(10)
            path = self._folder / f"{name}.json"
            self.results[name] = json.loads(path.read_text()) if path.exists() else {
                "samples": [], "failed": None, "failures": [f"the {name} probe wrote no result (exit "
                                                           f"{process.exitcode})"], "undelivered": None}

    def samples(self, name: str) -> list[tuple[float, float]]:
        return [(t, lat) for t, lat in self.results.get(name, {}).get("samples", [])]


def percentile(sorted_values: list[float], pct: float) -> float:
    """Nearest-rank percentile of an ascending list (not empty)."""
    rank = max(1, -(-len(sorted_values) * pct // 100))
    return sorted_values[int(rank) - 1]


def summary(samples: list[tuple[float, float]], start: float, end: float) -> dict[str, Any]:
    """p50/p99/max in milliseconds of the samples whose time is in [start, end)."""
    values = sorted(lat for t, lat in samples if start <= t < end)
    if not values:
        return {"samples": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    return {"samples": len(values), "p50_ms": round(percentile(values, 50) * 1000, 1),
            "p99_ms": round(percentile(values, 99) * 1000, 1), "max_ms": round(values[-1] * 1000, 1)}
