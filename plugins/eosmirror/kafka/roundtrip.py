"""The round trip to a cluster, measured: what the disaster commands state their source budgets in.

A disaster-recovery pair is a region apart (20-150 ms). A budget of fixed seconds is either too tight for a
long link or needlessly long for a short one, so a command that talks to the source measures the round trip
first (the fastest of a few metadata requests of a connected admin client: one request, one answer) and
gives each later wait on the source at least as many round trips as its requests need
(``core/budgets.py``). A source that does not answer is not measured: its budget stays the fixed one.
"""

from __future__ import annotations

import time

from eosmirror.core.errors import ClusterUnreachableError
from eosmirror.kafka import calls
from eosmirror.kafka.cluster import Cluster

TRIES = 3


def measure(cluster: Cluster, topic: str | None, budget_s: float) -> float:
    """Seconds of one round trip to ``cluster``: the fastest of TRIES metadata requests (of ``topic`` only
    when given: a whole large cluster's metadata would also measure the bandwidth) after the one that
    connects. ClusterUnreachableError when the first answer does not come within ``budget_s``."""
    admin = cluster.admin
    try:
        admin.list_topics(topic, timeout=budget_s)   # connects (TCP, ApiVersions, authentication): not one trip
    except Exception as exc:  # noqa: BLE001 - any failure to answer is "not reachable" here, named in the error
        raise ClusterUnreachableError(f"{cluster.label}: no answer within {budget_s:g} s "
                                      f"({calls.error_text(exc)})") from None
    best = float("inf")
    for _ in range(TRIES):
        began = time.perf_counter()
        admin.list_topics(topic, timeout=budget_s)
        best = min(best, time.perf_counter() - began)
    return best
