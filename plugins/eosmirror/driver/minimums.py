"""Minimums enforced: before a command writes anything, the clusters it touches answer ApiVersions, and a
cluster too old for the command refuses it (exit 2, ``BrokerTooOldError``), naming the cluster, its release as
the answer tells, the feature and the minimum (``core/brokerfeatures.py`` holds the needs and the verdict).

Called where each command starts: ``MirrorRun.resolve`` (run, plan, the Airflow preflight, migrate, reset),
the transition runner's ``check`` (switchover, its cancel, promote, reverse, resume), ``verify.verify``, the
lag's ``report`` and ``groups.move_groups`` (on the side it writes). One read per cluster per command: inside ``scope()`` (a disaster-recovery command, whose
steps plan a final run, verify, migrate in its process) an answer is read once and reused; outside, each check
reads once (a run checks its two clusters once, in its resolve step; a final run sent to spark-submit or the
run server is a process of its own and reads once more).

A feature that can degrade is not refused: each thing it leaves out is logged as a warning and returned. A
cluster whose answer cannot be read (TLS refused, settings only librdkafka can honour) is not checked: a
warning says so, and the command goes on to meet the cluster on its own terms; one no connection reaches at
all is left to the command's first request, which fails naming it.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from typing import Any, Iterable, Iterator

from eosmirror.core import brokerfeatures
from eosmirror.core.errors import BrokerTooOldError
from eosmirror.kafka import apiversions
from eosmirror.kafka.cluster import Cluster

log = logging.getLogger(__name__)

_ANSWERS: ContextVar[dict[str, Any] | None] = ContextVar("eosmirror_broker_answers", default=None)


@contextlib.contextmanager
def scope() -> Iterator[None]:
    """Within: each cluster's answer is read once, whatever checks the command's steps make."""
    token = _ANSWERS.set({})
    try:
        yield
    finally:
        _ANSWERS.reset(token)


def _key(cluster: Cluster) -> str:
    """The cluster's connection, hashed (its settings hold secrets; the digest never leaves memory)."""
    text = json.dumps({str(k): str(v) for k, v in cluster.settings.items()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def answer(cluster: Cluster) -> apiversions.Answer | apiversions.NotRead:
    """The cluster's ApiVersions answer, or why there is none (read once per scope)."""
    known = _ANSWERS.get()
    key = _key(cluster) if known is not None else ""
    if known is not None and key in known:
        found: apiversions.Answer | apiversions.NotRead = known[key]
        return found
    try:
        found = apiversions.read(cluster.settings)
        log.debug("%s: ApiVersions of %s read in %.1f ms", cluster.label, found.broker, found.seconds * 1000)
    except apiversions.NotRead as exc:
        found = exc
    if known is not None:
        known[key] = found
    return found


def require(command: str, clusters: Iterable[Cluster], acl_sync: bool = False) -> list[str]:
    """Refuse ``command`` (BrokerTooOldError) when a cluster lacks what it needs there; else the lines of
    what degradable features leave out, and of clusters not checked (each also logged as a warning). A
    cluster no connection reaches at all is left to the command's own first request, which fails naming
    it (once, not twice): that is only logged at info."""
    notes = []
    clusters = list(clusters)
    # Asked at once (a round trip each), each in a copy of the caller's context: the scope's answers are shared.
    contexts = [contextvars.copy_context() for _ in clusters]
    with ThreadPoolExecutor(max_workers=max(1, len(clusters))) as pool:
        answers = list(pool.map(lambda ctx, c: ctx.run(answer, c), contexts, clusters))
    for cluster, found in zip(clusters, answers):
        if isinstance(found, apiversions.NotRead):
            why = (f"the {cluster.label} was not checked for `{command}`'s minimums: its ApiVersions could not be "
                   f"read ({found})")
            if found.unreachable:
                log.info("%s", why)
            else:
                notes.append(why)
            continue
        verdict = brokerfeatures.check(found.table, command, cluster.role, cluster.label, acl_sync)
        if verdict.refusal:
            raise BrokerTooOldError(verdict.refusal)
        notes += [f"the {cluster.label}, answering as {verdict.release}: {line}" for line in verdict.left_out]
    for note in notes:
        log.warning("%s", note)
    return notes
