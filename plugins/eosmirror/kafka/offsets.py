"""ListOffsets, batched, with a short wait while a partition's leader moves."""

from __future__ import annotations

from typing import Any

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
