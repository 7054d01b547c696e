"""The mirror's progress: consumer-group offsets in the progress group on the TARGET cluster.

Keyed by the target topic-partition (a broker rejects offsets for partitions it does not host);
the value is the next SOURCE offset to copy. The offset's metadata string records which source
topic (name and topic id) the progress belongs to, so a re-created source topic is detected
instead of being mirrored from a meaningless position.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Iterable

from eosmirror import kafkaio
from eosmirror.errors import ProgressUnavailableError

log = logging.getLogger(__name__)

OFFSET_INVALID = -1001


@dataclass(frozen=True)
class Progress:
    offset: int
    source_topic: str = ""
    source_topic_id: str = ""
    generation: int = 0
    committed_ms: int = 0   # when this progress was last committed (idle partitions: every run)


def encode_metadata(source_topic: str, source_topic_id: str, generation: int) -> str:
    return json.dumps({"v": 1, "src": source_topic, "sid": source_topic_id, "g": generation,
                       "t": int(time.time() * 1000)}, separators=(",", ":"))


def decode_metadata(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
        return value if isinstance(value, dict) else {}
    except ValueError:
        return {}


def read(admin: Any, partitions: Iterable[tuple[str, int]], cluster: str, group: str, stable: bool,
         timeout: float = 30.0) -> dict[tuple[str, int], Progress]:
    """Committed progress of the given target partitions; absent keys have none.

    ``stable=True`` (a slot, after fencing): require_stable (KIP-447), retried while a transactional
    offset commit of the group is pending, so what it returns is never about to change.
    ``stable=False`` (the planner, verify, reports): the last committed progress, without waiting on
    a transaction that a killed producer may hold open until it times out; a plan is an estimate,
    the slots re-read after fencing.
    """
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    wanted = [TopicPartition(t, p) for t, p in partitions]
    if not wanted:
        return {}
    needs = f"Read on group {group} (and Describe on the target topics)"
    deadline = time.monotonic() + timeout
    while True:
        futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, wanted)],
                                                    require_stable=stable, request_timeout=min(30.0, timeout))
        result = kafkaio.wait(futures[group], f"read the progress of group {group}", cluster, needs, timeout)
        errors = [tp for tp in result.topic_partitions if tp.error is not None]
        unstable = [tp for tp in errors if tp.error.name() == "UNSTABLE_OFFSET_COMMIT"]
        if unstable and len(unstable) == len(errors) and time.monotonic() < deadline:
            time.sleep(0.2)   # a transactional commit of the group is pending: wait for its outcome
            continue
        if unstable:
            raise ProgressUnavailableError(
                f"{cluster}: the progress of {unstable[0].topic}[{unstable[0].partition}] stayed unstable for "
                f"{timeout:.0f} s: a transaction of this mirror is still open (a killed or stalled slot). "
                f"`eosmirror fence <mirror>` (or the eosmirror_fence DAG) aborts it")
        if errors:
            raise kafkaio.translate(Exception(errors[0].error), f"read the progress of {errors[0].topic}"
                                    f"[{errors[0].partition}] in group {group}", cluster, needs)
        break
    out = {}
    for tp in result.topic_partitions:
        if tp.offset == OFFSET_INVALID or tp.offset < 0:
            continue
        meta = decode_metadata(tp.metadata)
        out[(tp.topic, tp.partition)] = Progress(offset=tp.offset, source_topic=str(meta.get("src", "")),
                                                 source_topic_id=str(meta.get("sid", "")),
                                                 generation=int(meta.get("g", 0) or 0),
                                                 committed_ms=int(meta.get("t", 0) or 0))
    return out


def publish_to_source(source_admin: Any, offsets: dict[tuple[str, int], int], group: str,
                      timeout: float = 10.0) -> str | None:
    """Best effort (KIP-656): the same progress on the SOURCE cluster, keyed by source partition, so
    that existing lag tools (kafka-consumer-groups, Burrow, ...) see the mirror's position.
    Bounded in time; returns an error text instead of raising: this must never fail a committed run."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    if not offsets:
        return None
    try:
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for (t, p), o in offsets.items()])
        result = source_admin.alter_consumer_group_offsets([request], request_timeout=timeout)[group].result(timeout)
        errors = [f"{tp.topic}[{tp.partition}]: {tp.error.str()}" for tp in result.topic_partitions if tp.error]
        return "; ".join(errors) or None
    except Exception as exc:  # noqa: BLE001 - best effort by design
        return f"{kafkaio.error_name(exc) or type(exc).__name__}: {kafkaio.error_text(exc)}"
