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


def read(reader: Any, partitions: Iterable[tuple[str, int]], cluster: str, group: str,
         timeout: float = 30.0) -> dict[tuple[str, int], Progress]:
    """Committed progress of the given target partitions; absent keys have none.

    ``reader`` is ``clients.progress_reader``: its ``committed()`` uses require_stable and waits
    while a transactional commit of the group is pending, so a half-committed state is never seen.
    """
    from confluent_kafka import TopicPartition

    wanted = [TopicPartition(t, p) for t, p in partitions]
    if not wanted:
        return {}
    deadline = time.monotonic() + timeout
    while True:
        try:
            committed = reader.committed(wanted, timeout=max(1.0, deadline - time.monotonic()))
            break
        except Exception as exc:  # noqa: BLE001
            # UNSTABLE_OFFSET_COMMIT surfaces here only if librdkafka's own retries ran out.
            if kafkaio.error_name(exc) == "UNSTABLE_OFFSET_COMMIT" and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            error = kafkaio.translate(exc, f"read the progress of group {group}", cluster,
                                      f"Describe and Read on group {group}")
            if kafkaio.error_name(exc) == "_TIMED_OUT":
                error.args = (f"{error.args[0]}. A transaction of this mirror may still be open (a killed or "
                              f"stalled slot): `eosmirror fence <mirror>` aborts it",)
            raise error from None
    out = {}
    for tp in committed:
        if tp.error is not None:
            raise ProgressUnavailableError(f"{cluster}: reading progress of {tp.topic}[{tp.partition}] in group "
                                           f"{group} failed: {tp.error.str()}")
        if tp.offset == OFFSET_INVALID or tp.offset < 0:
            continue
        meta = decode_metadata(tp.metadata)
        out[(tp.topic, tp.partition)] = Progress(offset=tp.offset, source_topic=str(meta.get("src", "")),
                                                 source_topic_id=str(meta.get("sid", "")),
                                                 generation=int(meta.get("g", 0) or 0),
                                                 committed_ms=int(meta.get("t", 0) or 0))
    return out


def publish_to_source(source_consumer: Any, offsets: dict[tuple[str, int], int], group: str) -> str | None:
    """Best effort (KIP-656): the same progress on the SOURCE cluster, keyed by source partition, so
    that existing lag tools (kafka-consumer-groups, Burrow, ...) see the mirror's position.
    Returns an error text instead of raising: this must never fail a committed run."""
    from confluent_kafka import TopicPartition

    if not offsets:
        return None
    try:
        result = source_consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                                        asynchronous=False)
        errors = [f"{tp.topic}[{tp.partition}]: {tp.error.str()}" for tp in result or [] if tp.error]
        if errors:
            return "; ".join(errors)
        return None
    except Exception as exc:  # noqa: BLE001 - best effort by design
        return f"{kafkaio.error_name(exc) or type(exc).__name__}: {kafkaio.error_text(exc)}"
