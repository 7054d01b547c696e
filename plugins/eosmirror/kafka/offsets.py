"""ListOffsets, batched, with a short wait while a partition's leader moves."""

from __future__ import annotations

import logging
from typing import Any

from eosmirror.core import settle
from eosmirror.kafka import calls
from eosmirror.kafka.cluster import Cluster
from eosmirror.kafka.retry import retry_until


class _LeadersMoving(Exception):
    """Some partitions answered that their leader is moving; ``first`` is one such answer."""

    def __init__(self, first: BaseException, topic: str, partition: int):
        super().__init__(str(first))
        self.first, self.topic, self.partition = first, topic, partition


def list_offsets(admin: Any, specs: dict[tuple[str, int], Any], cluster_label: str, read_committed: bool = True,
                 ) -> dict[tuple[str, int], int]:
    """Batched ListOffsets; {(topic, partition): offset} (-1 when no such offset). Partitions whose
    leader is moving (a broker just restarted, a topic just created) are asked again, and only they,
    for up to 15 s."""
    from confluent_kafka import IsolationLevel

    if not specs:
        return {}
    level = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
    out: dict[tuple[str, int], int] = {}
    try:
        retry_until(15, lambda: _ask(admin, specs, level, out, cluster_label),
                    lambda exc: isinstance(exc, _LeadersMoving), pause=0.3)
    except _LeadersMoving as moving:
        raise calls.translate(moving.first, f"list offsets of {moving.topic}[{moving.partition}]", cluster_label,
                              f"Describe on topic {moving.topic}") from None
    return out


def list_offsets_of(cluster: Cluster, specs: dict[tuple[str, int], Any], read_committed: bool = True,
                    ) -> dict[tuple[str, int], int]:
    """``list_offsets`` on a Cluster's own admin client, errors naming it by its label. ``list_offsets``
    keeps (admin, label) for the callers that hold a bare admin client: a slot, the tools."""
    return list_offsets(cluster.admin, specs, cluster.label, read_committed)


def _ask(admin: Any, specs: dict[tuple[str, int], Any], level: Any, out: dict[tuple[str, int], int],
         cluster_label: str) -> None:
    """One ListOffsets request for the partitions not answered yet; answers go into ``out``."""
    from confluent_kafka import TopicPartition

    request = {TopicPartition(t, p): spec for (t, p), spec in specs.items() if (t, p) not in out}
    futures = admin.list_offsets(request, isolation_level=level, request_timeout=calls.DEFAULT_TIMEOUT)
    moving: _LeadersMoving | None = None
    for tp, future in futures.items():
        try:
            out[(tp.topic, tp.partition)] = future.result(timeout=calls.DEFAULT_TIMEOUT).offset
        except Exception as exc:  # noqa: BLE001 - translated below
            if calls.error_name(exc) not in calls.LEADERSHIP_MOVING:
                raise calls.translate(exc, f"list offsets of {tp.topic}[{tp.partition}]", cluster_label,
                                      f"Describe on topic {tp.topic}") from None
            moving = moving or _LeadersMoving(exc, tp.topic, tp.partition)
    if moving is not None:
        raise moving


log = logging.getLogger(__name__)


def marking(cluster: Cluster, partitions: list[tuple[str, int]]) -> set[tuple[str, int]]:
    """Partitions whose last stable offset is below their high watermark: a transaction that wrote
    to them is open or its marker is not written yet. Best effort (a count for a settle wait): an
    error counts every partition as pending, so that it never looks like progress of the wait."""
    from confluent_kafka import admin

    if not partitions:
        return set()
    specs = dict.fromkeys(partitions, admin.OffsetSpec.latest())
    try:
        stable = list_offsets_of(cluster, specs, read_committed=True)
        high = list_offsets_of(cluster, specs, read_committed=False)
    except Exception as exc:  # noqa: BLE001 - best effort: counted as pending
        log.debug("%s: the last stable offsets could not be read (%s)", cluster.label, exc)
        return set(partitions)
    return {tp for tp in partitions if tp in stable and tp in high and stable[tp] < high[tp]}


def settle_ends(cluster: Cluster, partitions: list[tuple[str, int]], stuck_seconds: float, bound_seconds: float,
                what: str) -> settle.Outcome | None:
    """Wait while the markers of transactions already committed are being written into ``partitions``
    (core/settle.py: the set whose last stable offset is below the high watermark shrinks), so that a
    read_committed end read next includes them. None: nothing was pending. Only the partitions pending
    at the first look are followed: a transaction begun since is a run now, not the last one."""
    pending = sorted(marking(cluster, partitions))
    if not pending:
        return None

    def probe(_round_seconds: float) -> int:
        nonlocal pending
        pending = sorted(marking(cluster, pending))
        return len(pending)

    outcome = settle.wait(probe, stuck_seconds, bound_seconds,
                          on_wait=settle.reporter(lambda line: log.warning("%s: %s", cluster.label, line), what))
    if outcome.verdict != settle.SETTLED:
        log.warning("%s: %s of %d partition(s) (e.g. %s) did not settle: %s", cluster.label, what, len(pending),
                    ", ".join(f"{t}[{p}]" for t, p in pending[:3]), outcome.explain())
    elif outcome.waited >= settle.LOG_EVERY_SECONDS:
        log.warning("%s: %s %s", cluster.label, what, outcome.explain())
    return outcome
