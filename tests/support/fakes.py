"""Scripted fake clients for SlotCopier's copy protocol (control flow only, no brokers).

The fakes model just enough of Kafka for the protocol's decisions to be observable:
- the source is one list of values per partition (offset = index); ``consume()`` returns at most
  ``per_consume`` records from the assigned position, then one _PARTITION_EOF event at the end;
- the target is one log per partition in which records keep their offsets whether their
  transaction commits or aborts, and every commit or abort adds a control marker (one offset),
  as in Kafka; the progress group holds what committed transactions sent with
  send_offsets_to_transaction, and is what ``read_progress`` returns;
- the producer fails its calls as a test scripts them.
:class:`Clock` replaces the copier's ``time``: it moves only when the source is polled (one second per
``consume()``) or the copier sleeps (the unit tests' ``clock`` fixture in tests/unit/conftest.py
installs it). Whether the real clients behave like this is the integration tests' business.
"""

from __future__ import annotations

import time as real_time
from collections import defaultdict

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from eosmirror.core.foreign import Accounting
from eosmirror.core.offsetsync import OffsetSync
from eosmirror.kafka import progress
from eosmirror.kafka.progress import Progress
from eosmirror.slot.slotstate import PartitionTask, SlotTask

SRC, TGT, SYNCS, TXN_ID = ("src", 0), ("tgt", 0), "syncs", "eosmirror.m.0"


class Clock:
    """Stands in for the ``time`` module of the copier and the modules it runs."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    @staticmethod
    def time() -> float:
        return real_time.time()


class Msg:
    def __init__(self, topic: str, partition: int, offset: int, value: bytes | None = None,
                 error: KafkaError | None = None) -> None:
        self._topic, self._partition, self._offset, self._value, self._error = topic, partition, offset, value, error

    def error(self): return self._error
    def topic(self): return self._topic
    def partition(self): return self._partition
    def offset(self): return self._offset
    def value(self): return self._value
    def key(self): return b"k"
    def headers(self): return None
    def timestamp(self): return (1, 1_700_000_000_000 + self._offset)


class FakeTarget:
    """Target logs, the progress group, and foreign writers scripted by offset."""

    def __init__(self) -> None:
        self.logs: dict[tuple[str, int], list[dict]] = defaultdict(list)
        self.progress: dict[tuple[str, int], int] = {}
        self.progress_meta: dict[tuple[str, int], str] = {}   # the metadata committed with each progress
        self.foreign_at: set[tuple[str, int, int]] = set()   # a foreign record takes this offset first

    def append(self, topic: str, partition: int, value: bytes | None, state: str) -> int:
        log = self.logs[(topic, partition)]
        while (topic, partition, len(log)) in self.foreign_at:
            log.append({"value": b"foreign", "state": "committed"})
        log.append({"value": value, "state": state})
        return len(log) - 1

    def end_transaction(self, produced: list[tuple[str, int, int]], commit: bool) -> None:
        for topic, partition, offset in produced:
            self.logs[(topic, partition)][offset]["state"] = "committed" if commit else "aborted"
        for key in dict.fromkeys((t, p) for t, p, _ in produced):
            self.logs[key].append({"value": None, "state": "marker"})

    def values(self, key: tuple[str, int], state: str = "committed") -> list[bytes | None]:
        return [r["value"] for r in self.logs[key] if r["state"] == state]

    def syncs(self) -> list[OffsetSync]:
        return [OffsetSync.decode(v) for v in self.values((SYNCS, 0))]


def kafka_error(code: int, reason: str, **flags: bool) -> KafkaException:
    return KafkaException(KafkaError(code, reason, **flags))


def abortable(reason: str) -> KafkaException:
    return kafka_error(KafkaError.TRANSACTION_ABORTABLE, reason, txn_requires_abort=True)


class FakeProducer:
    """``fail`` scripts errors per method: a list consumed one entry per call (None: that call
    succeeds); a method whose list is used up succeeds."""

    def __init__(self, target: FakeTarget, fail: dict[str, list] | None = None) -> None:
        self.target = target
        self.fail = {method: list(outcomes) for method, outcomes in (fail or {}).items()}
        self.calls: list[str] = []
        self.open: list[tuple[str, int, int]] | None = None
        self.unreported: list[tuple] = []
        self.pending_offsets: dict[tuple[str, int], int] | None = None
        self.pending_meta: dict[tuple[str, int], str] = {}
        self.committed: list[list] = []      # per committed transaction: (topic, partition, offset) of its records
        self.aborted: list[list] = []

    def _scripted(self, method: str) -> None:
        self.calls.append(method)
        outcomes = self.fail.get(method)
        if outcomes:
            error = outcomes.pop(0)
            if error is not None:
                raise error

    def init_transactions(self, *timeout):
        self._scripted("init_transactions")

    def list_topics(self, topic=None, timeout=None):   # metadata before a chunk's first records: nothing to model
        return None

    def begin_transaction(self):
        self._scripted("begin_transaction")
        assert self.open is None, "begin_transaction while a transaction is open"
        self.open = []

    def produce(self, topic, value=None, key=None, partition=-1, timestamp=0, headers=None, on_delivery=None):
        self._scripted("produce")
        offset = self.target.append(topic, partition, value, "open" if self.open is not None else "committed")
        if self.open is not None:
            self.open.append((topic, partition, offset))
        if on_delivery is not None:
            self.unreported.append((on_delivery, topic, partition, offset))

    def poll(self, timeout=0):
        return 0

    def flush(self, timeout=None):
        self._scripted("flush")
        for callback, topic, partition, offset in self.unreported:
            callback(None, Msg(topic, partition, offset))
        self.unreported = []
        return 0

    def send_offsets_to_transaction(self, offsets, group_metadata, *timeout):
        self._scripted("send_offsets_to_transaction")
        assert group_metadata == "member-less group metadata"
        self.pending_offsets = {(tp.topic, tp.partition): tp.offset for tp in offsets}
        self.pending_meta = {(tp.topic, tp.partition): tp.metadata for tp in offsets if tp.metadata}

    def commit_transaction(self, *timeout):
        self._scripted("commit_transaction")
        self.target.end_transaction(self.open, commit=True)
        self.target.progress.update(self.pending_offsets or {})
        self.target.progress_meta.update(self.pending_meta)
        self.committed.append(self.open)
        self.open = self.pending_offsets = None
        self.pending_meta = {}

    def abort_transaction(self, *timeout):
        self._scripted("abort_transaction")
        if self.open is None:
            raise kafka_error(KafkaError._STATE, "Operation not valid in state Ready")
        self.target.end_transaction(self.open, commit=False)
        self.aborted.append(self.open)
        self.open = self.pending_offsets = None


class FakeConsumer:
    def __init__(self, clock: Clock, source: dict[tuple[str, int], list[bytes]], per_consume: int) -> None:
        self.clock, self.source, self.per_consume = clock, source, per_consume
        self.positions: dict[tuple[str, int], int] = {}
        self.paused: set[tuple[str, int]] = set()
        self.eof_sent: set[tuple[str, int]] = set()
        self.assigned_at: list[dict[tuple[str, int], int]] = []   # the start offsets of every assign()

    def assignment(self):
        return [TopicPartition(t, p) for t, p in self.positions]

    def unassign(self):
        self.positions = {}

    def list_topics(self, topic=None, timeout=None):   # metadata before the first assign: nothing to model
        return None

    def assign(self, partitions):
        self.positions = {(tp.topic, tp.partition): tp.offset for tp in partitions}
        self.eof_sent = set()
        self.assigned_at.append(dict(self.positions))

    def seek(self, tp):   # like librdkafka: what was fetched before is dropped, fetching restarts here
        key = (tp.topic, tp.partition)
        self.positions[key] = tp.offset
        self.eof_sent.discard(key)
        self.assigned_at.append({key: tp.offset})

    def resume(self, partitions):
        self.paused -= {(tp.topic, tp.partition) for tp in partitions}

    def pause(self, partitions):
        self.paused |= {(tp.topic, tp.partition) for tp in partitions}

    def consume(self, num_messages, timeout):
        self.clock.now += 1.0
        out = []
        for key, position in self.positions.items():
            if key in self.paused:
                continue
            values = self.source[key][position:position + self.per_consume]
            out += [Msg(*key, position + n, value) for n, value in enumerate(values)]
            self.positions[key] = position = position + len(values)
            if position >= len(self.source[key]) and key not in self.eof_sent:
                self.eof_sent.add(key)
                out.append(Msg(*key, position, error=KafkaError(KafkaError._PARTITION_EOF)))
        return out

    def position(self, partitions):
        return [TopicPartition(tp.topic, tp.partition, self.positions.get((tp.topic, tp.partition), -1001))
                for tp in partitions]


class FakeReader:
    def __init__(self, target: FakeTarget) -> None:
        self.target = target

    def consumer_group_metadata(self):
        return "member-less group metadata"

    def commit(self, offsets, asynchronous):
        assert asynchronous is False
        self.target.progress.update({(tp.topic, tp.partition): tp.offset for tp in offsets})


class FakeIO:
    """The copier's I/O seam over the fakes; records what the copier asked."""

    def __init__(self, clock: Clock, source: dict[tuple[str, int], list[bytes]], per_consume: int = 100,
                 fail: dict[str, list] | None = None, generation_error: Exception | None = None) -> None:
        self.target = FakeTarget()
        self.producer = FakeProducer(self.target, fail)
        self.consumer = FakeConsumer(clock, source, per_consume)
        self.reader = FakeReader(self.target)
        self.generation_error = generation_error
        self.progress_reads: list[tuple[list, bool]] = []
        self.published: list[dict] = []
        self.data_reads: list[dict] = []   # the ranges the foreign-write check read
        self.closed = False

    def open(self, on_delivery):
        self.on_delivery = on_delivery

    def fence(self):
        self.producer.init_transactions()

    def read_progress(self, partitions, stable):
        partitions = list(partitions)
        self.progress_reads.append((partitions, stable))
        meta = {k: progress.decode_metadata(v) for k, v in self.target.progress_meta.items()}
        return {k: Progress(offset=self.target.progress[k], accounting=Accounting.of_metadata(meta.get(k, {})))
                for k in partitions if k in self.target.progress}

    def check_generation(self):
        if self.generation_error is not None:
            raise self.generation_error

    def target_end_offsets(self, partitions):
        return {k: len(self.target.logs[k]) for k in partitions}

    def target_stable_offsets(self, partitions):
        """Below the first record of a transaction still open (read_committed stops there)."""
        return {k: next((i for i, r in enumerate(self.target.logs[k]) if r["state"] == "open"), len(self.target.logs[k]))
                for k in partitions}

    def target_data_offsets(self, ranges):
        """Committed data records of each [start, end), as a read_committed consumer reads them."""
        self.data_reads.append(dict(ranges))
        return {k: (end, tuple(i for i in range(start, end) if self.target.logs[k][i]["state"] == "committed"))
                for k, (start, end) in ranges.items()}

    def publish_to_source(self, offsets):
        self.published.append(dict(offsets))
        return None

    def close(self):
        self.closed = True


def values(count: int) -> list[bytes]:
    return [f"v{n}".encode() for n in range(count)]


def slot_task(end: int = 9, max_message_bytes: int = 1048588, delivery: str = "exactly_once") -> SlotTask:
    partition = PartitionTask(SRC[0], TGT[0], 0, start=0, end=end, had_progress=False,
                              max_message_bytes=max_message_bytes)
    return SlotTask(mirror="m", slot=0, transactional_id=TXN_ID, generation=1, delivery=delivery,
                    progress_group="eosmirror-m", partitions=(partition,), source_conf={}, target_conf={},
                    max_transaction_seconds=0.5, offset_sync_topic=SYNCS)


FENCED = kafka_error(KafkaError.PRODUCER_FENCED, "There is a newer producer with the same transactionalId",
                     fatal=True)
