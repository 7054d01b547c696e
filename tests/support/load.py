"""Workloads: producers writing numbered records until stopped."""

from __future__ import annotations

import threading
import time

from tests.helpers import producer, read_all, transactional_batches
from tests.support.clusters import PARTITIONS
from tests.support.waiting import wait_for


class Load:
    """A producer thread writing numbered records to every partition until stopped (idempotent, so
    source offsets are records: no markers among them)."""

    def __init__(self, conf, topic: str, prefix: str):
        self.conf, self.topic, self.prefix, self.sent = conf, topic, prefix, 0
        self.stop_event, self.thread = threading.Event(), threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        p = producer(self.conf, **{"enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 10_000})
        while not self.stop_event.is_set():
            for k in range(PARTITIONS):
                p.produce(self.topic, value=f"{self.prefix}{k}-{self.sent}".encode(), partition=k)
            self.sent += 1
            p.poll(0)
            time.sleep(0.02)   # pacing, not a wait: about 50 records per partition a second
        p.flush(15)

    def __enter__(self) -> "Load":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(30)

    def wait_more(self, by: int, what: str = "the load") -> None:
        """Until every partition holds ``by`` more records than now (the producer's writes, as the broker
        has them: idempotent, so offsets are records)."""
        assert self.thread.is_alive(), "the load's producer thread is not running"
        wait_grown(self.conf, self.topic, range(PARTITIONS), by, what)

    def __exit__(self, *exc) -> None:
        self.stop()


def produce_until(conf, topic, txn_id, stop: threading.Event, partitions: list[int], per_transaction: int = 10) -> int:
    """Keep producing: transactions of ``per_transaction`` records over ``partitions`` (one in three
    aborted) with a plain write to each of them between transactions, until ``stop``. Returns the number
    of batches."""
    plain = producer(conf, **{"enable.idempotence": True})
    txn = producer(conf, **{"transactional.id": txn_id})
    txn.init_transactions(30)
    batch = 0
    while not stop.is_set():
        txn.begin_transaction()
        aborted = batch % 3 == 2
        for n in range(per_transaction):
            txn.produce(topic, value=f"{'aborted' if aborted else 'txn'}-{batch}-{n}".encode(),
                        partition=partitions[n % len(partitions)])
        txn.flush(30)
        (txn.abort_transaction if aborted else txn.commit_transaction)(30)
        for k in partitions:
            plain.produce(topic, value=f"plain-{batch}-{k}".encode(), partition=k)
        plain.flush(30)
        batch += 1
        time.sleep(0.05)   # pacing, not a wait: a steady rate of batches while the run follows
    return batch


def home_made_copy(source_conf, target_conf, topic, upto):
    """What a home-made copier did before the switch: the first ``upto`` records of each partition."""
    out = producer(target_conf, **{"enable.idempotence": True})
    for partition in range(2):
        for r in read_all(source_conf, topic, partition)[:upto]:
            out.produce(topic, value=r.value, key=r.key, partition=partition)
    out.flush(30)


def seed_with_aborts(conf, topic, txn_id, rounds=4, tag=""):
    """Per partition: committed and aborted transactions interleaved (values say partition and number)."""
    for p in range(PARTITIONS):
        batches = []
        for r in range(rounds):
            batches.append((True, [f"{tag}p{p}-r{r}-{i}".encode() for i in range(3)]))
            batches.append((False, [f"{tag}p{p}-r{r}-aborted-{i}".encode() for i in range(2)]))
        transactional_batches(conf, topic, f"{txn_id}-{p}", batches, partition=p)


def high_watermarks(reader, topic: str, partitions, budget: float = 30) -> dict[int, int]:
    """Per partition its high watermark. A topic created a moment ago may have no leader yet
    (NOT_LEADER_FOR_PARTITION, LEADER_NOT_AVAILABLE...): asked again until ``budget`` runs out, then the
    last error is raised."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    deadline = time.monotonic() + budget
    while True:
        try:
            return {k: reader.get_watermark_offsets(TopicPartition(topic, k), timeout=10)[1] for k in partitions}
        except KafkaException as exc:
            error = exc.args[0]
            waiting = error.retriable() or error.code() in (KafkaError.NOT_LEADER_FOR_PARTITION,
                                                            KafkaError.LEADER_NOT_AVAILABLE,
                                                            KafkaError.UNKNOWN_TOPIC_OR_PART,
                                                            KafkaError._UNKNOWN_PARTITION)   # metadata not yet seen
            if not waiting or time.monotonic() > deadline:
                raise
            time.sleep(0.2)   # a poll interval of this bounded wait for a leader


def wait_grown(conf, topic: str, partitions, by: int, what: str, budget: float = 30) -> None:
    """Waits until every partition of ``topic`` in ``partitions`` ends ``by`` offsets further than when
    called (the high watermarks a librdkafka consumer reads): ``what`` wrote them."""
    from confluent_kafka import Consumer

    reader = Consumer({**conf, "group.id": "eosmirror-test-watermarks", "enable.auto.commit": False})
    try:
        partitions = list(partitions)
        start = high_watermarks(reader, topic, partitions)

        def grown():
            now = high_watermarks(reader, topic, partitions)
            return all(now[k] >= start[k] + by for k in partitions), f"ends {now}, from {start}"

        wait_for(f"{what}: {by} more offsets in every partition of {topic}", grown, budget)
    finally:
        reader.close()
