"""A slot's I/O seam: the clients and broker calls ``SlotCopier`` uses, behind one small interface.

The copier never builds a client or calls a broker helper itself: it asks its ``SlotIO`` to open
the producer, the source consumer and the progress reader, and to read progress, check the
generation, list target end offsets and publish progress to the source. ``KafkaSlotIO`` is the
real implementation (kafka.clients, kafka.progress, kafka.state, kafka.offsets); unit tests pass a
fake with scripted clients to exercise the copy protocol without brokers.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Protocol

from eosmirror.core import bandwidth
from eosmirror.kafka import calls, clients, progress, readers, state
from eosmirror.kafka.cluster import Cluster
from eosmirror.kafka.offsets import list_offsets
from eosmirror.slot.slotstate import SlotTask

DEFAULT_MAX_MESSAGE_BYTES = 1048588   # Kafka's default max.message.bytes
# A slot's init_transactions (KafkaSlotIO.fence): each quick try's timeout (an idle id is fenced in a
# few ms; below librdkafka's 500 ms retry, so that an older open transaction is answered, not waited
# out), how many producers it may try, and the pause before the next one (the broker's abort).
QUICK_FENCE_SECONDS = 0.05
QUICK_FENCE_TRIES = 10
QUICK_FENCE_PAUSE_SECONDS = 0.01


class SlotIO(Protocol):
    """What a slot needs from the outside world. After ``open()``: ``producer`` (transactional for
    exactly_once, idempotent for at_least_once), ``consumer`` (the source consumer, assign() only)
    and ``reader`` (the progress reader: group metadata for send_offsets_to_transaction, and the
    progress commit of at_least_once)."""

    producer: Any
    consumer: Any
    reader: Any

    def open(self, on_delivery: Callable[[Any, Any], None]) -> None:
        """Build the clients. ``on_delivery`` receives failed deliveries in at_least_once mode."""

    def fence(self) -> None:
        """Step 1 (exactly_once): ``init_transactions`` on the producer, which may be replaced by a new
        one (the caller holds no reference to the old one while this runs)."""

    def read_progress(self, partitions: Iterable[tuple[str, int]], stable: bool) -> dict[tuple[str, int], Any]:
        """Committed progress (``progress.Progress``) of target partitions; absent keys have none."""

    def check_generation(self) -> None:
        """Raise FencedError if the mirror moved to another generation than the slot's."""

    def target_end_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The end (high watermark, read_uncommitted) of each target partition."""

    def target_stable_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The last stable offset (read_committed end) of each target partition, in one request."""

    def source_stable_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The last stable offset (read_committed end) of each source partition, in one request (follow runs)."""

    def target_data_offsets(self, ranges: dict[tuple[str, int], tuple[int, int]]
                            ) -> dict[tuple[str, int], tuple[int, tuple[int, ...]]]:
        """Per target partition, (reached, offsets of the committed data records in [start, end)), read
        read_committed by one consumer (``readers.data_offsets``): the foreign-write check (targetcheck.py)."""

    def publish_to_source(self, offsets: dict[tuple[str, int], int]) -> str | None:
        """Best effort: the progress on the source cluster's group; an error text, never raises."""

    def close(self) -> None:
        """Close the clients and drop them."""


def producer_sizing(task: SlotTask) -> dict[str, Any]:
    """Producer limits derived from the target topics' max.message.bytes (a batch must fit the
    smallest topic limit; a single record may be as large as the largest)."""
    limits = max(p.max_message_bytes for p in task.partitions) if task.partitions else DEFAULT_MAX_MESSAGE_BYTES
    return {"message.max.bytes": max(DEFAULT_MAX_MESSAGE_BYTES, limits + 1024),
            "batch.size": min(1_000_000, min(p.max_message_bytes for p in task.partitions) - 1024)
            if task.partitions else 1_000_000,
            "queue.buffering.max.messages": 500_000,
            # librdkafka's default lets the producer queue 1 GB: with large records a slot's memory
            # would follow the target's speed. 64 MB keeps the copy rate of large records (the source
            # consumer's own queue, 64 MB by default, is left alone; figures: docs/results.md, "Figures behind the code").
            "queue.buffering.max.kbytes": 65536,
            "linger.ms": 20}


class KafkaSlotIO:
    """The real I/O of one slot, on the clusters named in its task."""

    def __init__(self, task: SlotTask):
        self.task = task
        # Built here, on the executor, from the task's settings and label: a Cluster is never pickled.
        self.target = Cluster.from_settings("target", task.target_conf, task.target_label)
        # confluent-kafka clients (kafka.clients), None before open() and after close().
        self.producer: Any = None
        self.consumer: Any = None
        self.reader: Any = None
        self.admin: Any = None
        self.source_admin: Any = None
        self.publisher: progress.SourcePublisher | None = None

    def open(self, on_delivery: Callable[[Any, Any], None]) -> None:
        t = self.task
        name = f"eosmirror-{t.mirror}-{t.slot}"
        self.reader = clients.progress_reader(t.target_conf, t.progress_group, f"{name}-progress")
        self.admin = clients.admin_client(t.target_conf, f"{t.mirror}-{t.slot}-target")
        message_max = int({**t.source_conf, **t.source_overrides}.get("message.max.bytes", 1_000_000))
        self.consumer = clients.source_consumer(t.source_conf, t.source_overrides, t.progress_group,
                                                f"{name}-consumer", where=f"mirror {t.mirror!r}: source_consumer",
                                                follow=t.follow_until is not None,
                                                defaults=bandwidth.source_queue(t.cap, message_max))
        try:   # step 5's publisher, now: its lookups overlap the copy (progress.SourcePublisher)
            self.publisher = progress.SourcePublisher(t.source_conf, t.progress_group)
        except Exception:  # noqa: BLE001 - best effort: step 5 builds one then and reports its error
            self.publisher = None
        sizing = producer_sizing(t)
        if t.delivery == "exactly_once":
            self.producer = self._transactional_producer()
        else:
            sizing["on_delivery"] = on_delivery
            self.producer = clients.idempotent_producer(t.target_conf, t.target_overrides, f"{name}-producer",
                                                        where=f"mirror {t.mirror!r}: target_producer", extra=sizing)

    def _transactional_producer(self) -> Any:
        t = self.task
        return clients.transactional_producer(
            t.target_conf, t.target_overrides, t.transactional_id, t.transaction_timeout_ms,
            f"eosmirror-{t.mirror}-{t.slot}-producer", where=f"mirror {t.mirror!r}: target_producer",
            extra=producer_sizing(t))

    def fence(self, quick_seconds: float = QUICK_FENCE_SECONDS) -> None:
        """init_transactions, asked with a short timeout (``quick_seconds``) first. An older instance with a transaction
        open (a follow run handing over, a killed attempt) makes the broker answer
        CONCURRENT_TRANSACTIONS while it aborts that transaction, which takes milliseconds; librdkafka
        would ask again only after a fixed 500 ms (given less time than that, it returns the answer
        when the time is up). A new producer asks at once, so this one is dropped and replaced, which
        shortens a hand-over's fence (figures: docs/results.md, "Figures behind the code"). The old producer is
        destroyed before the new one is built: its own retry must never come after the new one's (it
        would fence the new one; a fenced slot stops loudly, it never writes twice). No answer yet (_TIMED_OUT): the same producer is asked on, in
        quick tries too, so that a late CONCURRENT_TRANSACTIONS (a busy cluster) still replaces it."""
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + max(60.0, self.task.transaction_timeout_ms / 1000)
        replaced = 0
        while replaced < QUICK_FENCE_TRIES:
            try:
                self.producer.init_transactions(quick_seconds)
                return
            except KafkaException as exc:
                name = calls.error_name(exc)
                if name == "_TIMED_OUT" and time.monotonic() < deadline:
                    continue   # no answer yet (a busy or distant cluster): ask on, with the same producer
                if name != "CONCURRENT_TRANSACTIONS":
                    raise
            replaced += 1
            self.producer = None   # the last reference: librdkafka destroys the client here
            time.sleep(QUICK_FENCE_PAUSE_SECONDS)
            self.producer = self._transactional_producer()
        self.producer.init_transactions(max(60.0, self.task.transaction_timeout_ms / 1000))

    def read_progress(self, partitions: Iterable[tuple[str, int]], stable: bool) -> dict[tuple[str, int], Any]:
        t = self.task
        return progress.read(self.target, list(partitions), t.progress_group, stable=stable)

    def check_generation(self) -> None:
        t = self.task
        state.check_generation(self.target, t.mirror, t.generation, t.progress_group, t.final_of_switchover)

    def target_end_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return self._target_latest(partitions, read_committed=False)

    def target_stable_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return self._target_latest(partitions, read_committed=True)

    def _target_latest(self, partitions: Iterable[tuple[str, int]], read_committed: bool) -> dict[tuple[str, int], int]:
        from confluent_kafka.admin import OffsetSpec

        specs = {tp: OffsetSpec.latest() for tp in partitions}
        return list_offsets(self.admin, specs, self.task.target_label, read_committed=read_committed)

    def source_stable_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        from confluent_kafka.admin import OffsetSpec

        t = self.task
        if self.source_admin is None:   # only follow runs ask; bounded runs never build it
            self.source_admin = clients.admin_client(t.source_conf, f"{t.mirror}-{t.slot}-source")
            # Its topics' metadata first: a fresh admin's ListOffsets under transactional load could
            # wait seconds for them (figures: docs/results.md, "Figures behind the code"). Only a warm-up:
            # list_offsets below reports any real problem.
            for topic in sorted({p.source_topic for p in t.partitions}):
                try:
                    self.source_admin.list_topics(topic=topic, timeout=calls.DEFAULT_TIMEOUT)
                except Exception:  # noqa: BLE001 - see above
                    pass
        specs = {tp: OffsetSpec.latest() for tp in partitions}
        return list_offsets(self.source_admin, specs, t.source_label, read_committed=True)

    def target_data_offsets(self, ranges: dict[tuple[str, int], tuple[int, int]]
                            ) -> dict[tuple[str, int], tuple[int, tuple[int, ...]]]:
        t = self.task
        return readers.data_offsets(self.target, ranges, f"eosmirror-{t.mirror}-{t.slot}-target-check",
                                    group_id=t.progress_group)

    def publish_to_source(self, offsets: dict[tuple[str, int], int]) -> str | None:
        if self.publisher is None:
            return progress.publish_to_source(self.task.source_conf, offsets, self.task.progress_group)
        return self.publisher.publish(offsets)

    def close(self) -> None:
        for client in (self.consumer, self.reader):
            if client is not None:
                try:
                    client.close()
                except Exception:  # noqa: BLE001
                    pass
        if self.publisher is not None:
            self.publisher.close()
        if self.producer is not None:
            try:
                self.producer.flush(1)
            except Exception:  # noqa: BLE001
                pass
        # Drop the clients now: a traceback that keeps the copier (and this object) alive must not
        # keep a producer reconnecting (and logging) to a cluster long after the slot ended.
        self.producer = self.admin = self.source_admin = self.consumer = self.reader = self.publisher = None
