"""Gather what planning needs (design step 4): source offsets, committed progress, recovered progress.

The only module that turns broker answers into ``PartitionObservation`` values; it also fails loudly
when the progress belongs to another incarnation of a topic (re-created source or target topic).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from typing import Any

from eosmirror import kafkaio, progress, syncstore
from eosmirror.config import MirrorConfig
from eosmirror.errors import DataLossError, ProgressUnavailableError
from eosmirror.planning import PartitionObservation
from eosmirror.topics import TopicPair

log = logging.getLogger(__name__)


def list_offsets(admin: Any, specs: dict[tuple[str, int], Any], cluster: str, read_committed: bool = True,
                 ) -> dict[tuple[str, int], int]:
    """Batched ListOffsets; {(topic, partition): offset} (-1 when no such offset). Partitions whose
    leader is moving (a broker just restarted, a topic just created) are asked again for up to 15 s."""
    from confluent_kafka import IsolationLevel, TopicPartition

    if not specs:
        return {}
    level = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
    out: dict[tuple[str, int], int] = {}
    deadline = time.monotonic() + 15
    while True:
        request = {TopicPartition(t, p): spec for (t, p), spec in specs.items() if (t, p) not in out}
        futures = admin.list_offsets(request, isolation_level=level, request_timeout=kafkaio.DEFAULT_TIMEOUT)
        moving = False
        for tp, future in futures.items():
            try:
                info = future.result(timeout=kafkaio.DEFAULT_TIMEOUT)
            except Exception as exc:  # noqa: BLE001 - translated below
                if kafkaio.error_name(exc) in kafkaio.LEADERSHIP_MOVING and time.monotonic() < deadline:
                    moving = True    # asked again below, for this partition only
                    continue
                raise kafkaio.translate(exc, f"list offsets of {tp.topic}[{tp.partition}]", cluster,
                                        f"Describe on topic {tp.topic}") from None
            out[(tp.topic, tp.partition)] = info.offset
        if not moving:
            return out
        time.sleep(0.3)


def _ms(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1000)


def observe(mirror: MirrorConfig, pairs: list[TopicPair], source_admin: Any, target_admin: Any,
            target_conf: dict[str, Any], target_topic_ids: dict[str, str], source_label: str,
            target_label: str, until: dt.datetime | None = None) -> list[PartitionObservation]:
    from confluent_kafka.admin import OffsetSpec

    source_tps = [(pair.source, p) for pair in pairs for p in range(pair.partitions)]
    earliest = list_offsets(source_admin, {tp: OffsetSpec.earliest() for tp in source_tps}, source_label)
    stable = list_offsets(source_admin, {tp: OffsetSpec.latest() for tp in source_tps}, source_label)
    until_offsets: dict[tuple[str, int], int] = {}
    if until is not None:
        until_offsets = list_offsets(source_admin, {tp: OffsetSpec.for_timestamp(_ms(until)) for tp in source_tps},
                                     source_label)
    if isinstance(mirror.start_from, dt.datetime):
        at_time = list_offsets(source_admin, {tp: OffsetSpec.for_timestamp(_ms(mirror.start_from))
                                              for tp in source_tps}, source_label)
        start_from = {tp: (off if off >= 0 else stable[tp]) for tp, off in at_time.items()}
    elif mirror.start_from == "latest":
        start_from = dict(stable)
    else:
        start_from = dict(earliest)

    committed = progress.read(target_conf, [(pair.target, p) for pair in pairs for p in range(pair.partitions)],
                              target_label, mirror.progress_group, stable=False)
    missing = [(pair, p) for pair in pairs for p in range(pair.partitions) if (pair.target, p) not in committed]
    syncs = syncstore.load(target_conf, mirror.name, target_label, mirror.progress_group) if missing else {}

    observations = []
    for pair in pairs:
        for p in range(pair.partitions):
            where = f"source {pair.source}[{p}] -> target {pair.target}[{p}]"
            done = committed.get((pair.target, p))
            if done is not None and done.source_topic_id and done.source_topic_id != pair.source_topic_id:
                raise DataLossError(
                    f"{where}: the source topic was deleted and re-created (topic id {done.source_topic_id} -> "
                    f"{pair.source_topic_id}); the mirror's progress {done.offset} belongs to the old topic. "
                    f"Decide what the target should hold, then reset the mirror's progress for this topic")
            recovered = None
            if done is None and (pair.target, p) in syncs:
                history = syncs[(pair.target, p)]
                last = history.ordered()[-1]
                if last.source_topic_id and last.source_topic_id != pair.source_topic_id:
                    raise DataLossError(f"{where}: the source topic was re-created since the mirror last copied it "
                                        f"(topic id {last.source_topic_id} -> {pair.source_topic_id})")
                target_id = target_topic_ids.get(pair.target, "")
                if last.target_topic_id and target_id and last.target_topic_id != target_id:
                    raise ProgressUnavailableError(
                        f"{where}: the target topic was deleted and re-created (topic id {last.target_topic_id} -> "
                        f"{target_id}): the records the mirror copied are gone from the target. Delete the "
                        f"mirror's offset-sync history for it (or mirror into a fresh topic) to copy again")
                recovered = history.progress
                log.warning("%s: committed progress is gone (expired after offsets.retention.minutes?); "
                            "recovered the exact position %d from the offset syncs", where, recovered)
            observations.append(PartitionObservation(
                source_topic=pair.source, target_topic=pair.target, partition=p,
                log_start=earliest[(pair.source, p)], last_stable=stable[(pair.source, p)],
                start_from_offset=start_from[(pair.source, p)],
                progress=done.offset if done else None, recovered=recovered,
                until_offset=until_offsets.get((pair.source, p))))
    return observations
