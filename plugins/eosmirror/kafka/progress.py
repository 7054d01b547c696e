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

from eosmirror.core import settle
from eosmirror.core.errors import AuthorizationError, ProgressUnavailableError
from eosmirror.core.foreign import Accounting
from eosmirror.kafka import calls, clients, offsets
from eosmirror.kafka.cluster import Cluster
from eosmirror.kafka.retry import retry_until

log = logging.getLogger(__name__)

OFFSET_INVALID = -1001
# Answers that mean "ask again": the group coordinator is loading or moving, or (with require_stable)
# a transactional offset commit of the group is still pending.
_RETRIED = {"COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "_WAIT_COORD",
            "REBALANCE_IN_PROGRESS", "_TIMED_OUT", "UNSTABLE_OFFSET_COMMIT"}


# Partitions per committed() call. librdkafka matches its answer to the request partition by
# partition, in time quadratic in their number, so large reads go in chunks (a groups sync reads 1,000 groups;
# figures: docs/results.md, "Figures behind the code").
COMMITTED_CHUNK = 250


@dataclass(frozen=True)
class Progress:
    offset: int
    source_topic: str = ""
    source_topic_id: str = ""
    generation: int = 0
    committed_ms: int = 0   # when this progress was last committed (idle partitions: every run)
    # What the mirror accounts for on the target partition (core/foreign.py); None: not recorded
    # (a migration, a reset, an older eosmirror, or at_least_once).
    accounting: Accounting | None = None


def encode_metadata(source_topic: str, source_topic_id: str, generation: int,
                    accounting: Accounting | None = None) -> str:
    value: dict[str, Any] = {"v": 1, "src": source_topic, "sid": source_topic_id, "g": generation,
                             "t": int(time.time() * 1000)}
    if accounting is not None:   # optional: older readers ignore it
        value.update(accounting.metadata())
    return json.dumps(value, separators=(",", ":"))


def decode_metadata(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
        return value if isinstance(value, dict) else {}
    except ValueError:
        return {}


def read(cluster: Cluster, partitions: Iterable[tuple[str, int]], group: str, stable: bool,
         timeout: float = 30.0) -> dict[tuple[str, int], Progress]:
    """Committed progress of the given partitions; absent keys have none. ``cluster`` holds ``group``:
    the mirror's target for its progress, another cluster for other groups (``eosmirror migrate``).

    ``stable=True`` (a slot, after fencing): require_stable (KIP-447); a pending transactional commit
    of the group is waited for, so what it returns is never about to change.
    ``stable=False`` (verify, reports): the last committed progress, without waiting on a
    transaction that a killed producer may hold open until it times out. Its "no offset" also
    means "first commit pending": the planner reads with ``read_settled``, which tells them apart.

    Read with a consumer, never with AdminClient.list_consumer_group_offsets: librdkafka 2.16 handles
    a NOT_COORDINATOR answer with the consumer-group code path, which an admin client does not have,
    and crashes (SIGSEGV in rd_kafka_cgrp_op, reproduced on a restarting broker; see groupoffsets.py).
    """
    from confluent_kafka import TopicPartition

    wanted = [TopicPartition(t, p) for t, p in partitions]
    if not wanted:
        return {}
    needs = f"Read on group {group} (and Describe on the target topics)"
    reader = clients.progress_reader(cluster.settings, group, f"eosmirror-progress-{group}", stable=stable)
    deadline = time.monotonic() + timeout

    def ask() -> Any:
        try:
            return [tp for at in range(0, len(wanted), COMMITTED_CHUNK) for tp in reader.committed(
                wanted[at:at + COMMITTED_CHUNK], timeout=max(1.0, min(5.0, deadline - time.monotonic())))]
        except Exception:
            _raise_group_error(reader, cluster.label, group, needs)   # a missing ACL fails at once
            raise

    try:
        committed = retry_until(timeout, ask, lambda exc: calls.error_name(exc) in _RETRIED, pause=0.05)
    except Exception as exc:  # noqa: BLE001 - translated
        if stable and calls.error_name(exc) in ("_TIMED_OUT", "UNSTABLE_OFFSET_COMMIT"):
            raise ProgressUnavailableError(
                f"{cluster.label}: the progress of group {group} stayed unstable for {timeout:.0f} s: a transaction "
                f"of this mirror is still open (a killed or stalled slot). `eosmirror fence <mirror>` "
                f"(or the eosmirror_fence DAG) aborts it") from None
        raise calls.translate(exc, f"read the progress of group {group}", cluster.label, needs) from None
    finally:
        reader.close()
    errors = [tp for tp in committed if tp.error is not None]
    if errors:
        raise calls.translate(Exception(errors[0].error), f"read the progress of {errors[0].topic}"
                                f"[{errors[0].partition}] in group {group}", cluster.label, needs)
    out = {}
    for tp in committed:
        if tp.offset == OFFSET_INVALID or tp.offset < 0:
            continue
        meta = decode_metadata(tp.metadata)
        out[(tp.topic, tp.partition)] = Progress(offset=tp.offset, source_topic=str(meta.get("src", "")),
                                                 source_topic_id=str(meta.get("sid", "")),
                                                 generation=int(meta.get("g", 0) or 0),
                                                 committed_ms=int(meta.get("t", 0) or 0),
                                                 accounting=Accounting.of_metadata(meta))
    return out


def read_settled(target: Cluster, partitions: Iterable[tuple[str, int]], group: str, settle_seconds: float,
                 bound_seconds: float | None = None, what: str = "progress",
                 ) -> tuple[dict[tuple[str, int], Progress], set[tuple[str, int]], settle.Outcome | None]:
    """The planner's read: (progress, unsettled, how the wait ended or None when there was none). A
    partition absent from both has no progress.

    A plain (non-stable) OffsetFetch answers "no offset" for a partition whose FIRST progress sits
    in a transaction that is committed but whose markers have not reached __consumer_offsets yet (a
    slot's commit_transaction() returns before they are written) or that is still open: the same
    answer as for a partition never copied. So every partition without progress is asked again with
    require_stable, round after round, while the previous transactions' markers are visibly being
    written (core/settle.py: the pending set shrinks; nothing settled for ``settle_seconds`` means
    an open transaction), for at most ``bound_seconds`` (the mirror's transaction timeout). Those
    still pending then are returned as ``unsettled``, never as "no progress": the caller decides.
    Partitions WITH progress keep the plain answer: a pending commit only moves them forward, which
    the slots read after fencing; waiting on them would let one open transaction stall every plan.
    """
    wanted = list(partitions)
    found = read(target, wanted, group, stable=False)
    missing = [tp for tp in wanted if tp not in found]
    if not missing:
        return found, set(), None

    def probe(round_seconds: float) -> tuple[int, int]:
        nonlocal missing
        try:
            found.update(read(target, missing, group, stable=True, timeout=round_seconds))
            return 0, 0
        except ProgressUnavailableError:   # still pending (one answer for the whole request)
            pass
        # What moves between rounds: a pending first progress appears in the plain read once its
        # marker reached the group's partition, and the marker of each data partition of the same
        # transaction lifts its last stable offset to its high watermark (finer: per partition).
        landed = read(target, missing, group, stable=False)
        found.update(landed)
        missing = [tp for tp in missing if tp not in landed]
        return len(missing) + len(offsets.marking(target, missing)), len(missing)

    outcome = settle.wait(probe, settle_seconds, bound_seconds if bound_seconds is not None else settle_seconds,
                          on_wait=settle.reporter(lambda line: log.warning("%s: %s", target.label, line), what))
    if outcome.verdict == settle.SETTLED:
        if outcome.waited >= settle.LOG_EVERY_SECONDS:
            log.warning("%s: %s of %d partitions %s", target.label, what, len(wanted), outcome.explain())
        return found, set(), outcome
    return found, set(missing), outcome


def _raise_group_error(reader: Any, cluster_label: str, group: str, needs: str) -> None:
    """A consumer whose group is not authorized keeps retrying committed() until it times out; its
    coordinator lookup reports the cause as an event, which poll() of the (never assigned) reader
    returns. Fail at once with it."""

    event = reader.poll(0.2)
    err = event.error() if event is not None else None
    if err is not None and err.name() in ("GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED"):
        raise AuthorizationError(f"{cluster_label}: not authorized to read the progress of group {group} "
                                 f"({err.name()}): the principal needs {needs}. Grant that ACL and run again")


def publish_to_source(source_conf: dict[str, Any], offsets: dict[tuple[str, int], int], group: str,
                      timeout: float = 10.0) -> str | None:
    """Best effort (KIP-656): the same progress on the SOURCE cluster, keyed by source partition, so
    that existing lag tools (kafka-consumer-groups, Burrow, ...) see the mirror's position.
    Bounded in time; returns an error text instead of raising: this must never fail a committed run.
    (An asynchronous consumer commit, not the admin API, for the librdkafka reason given in read().)
    A fresh publisher commits here; a slot builds its ``SourcePublisher`` when it opens instead."""
    if not offsets:
        return None
    try:
        publisher = SourcePublisher(source_conf, group)
    except Exception as exc:  # noqa: BLE001 - best effort by design
        return f"{type(exc).__name__}: {exc}"
    try:
        return publisher.publish(offsets, timeout)
    finally:
        publisher.close()


class SourcePublisher:
    """A never-assigned consumer of the progress group on the SOURCE cluster that publishes progress.

    Built when a slot opens, not at its step 5: librdkafka connects to the bootstrap brokers and looks
    up the group's coordinator on its own once a consumer with a group.id exists, so those round trips
    (connection, API versions, metadata, FindCoordinator, the coordinator's connection: about six, 0.6 s
    a slot with the source 100 ms away) overlap the copy and step 5 pays one OffsetCommit."""

    def __init__(self, source_conf: dict[str, Any], group: str):
        self.outcome: list[str | None] = []
        self.consumer = clients.progress_reader(source_conf, group, f"eosmirror-progress-publisher-{group}",
                                                stable=False, on_commit=self._on_commit)

    def _on_commit(self, err: Any, partitions: Any) -> None:
        errors = [f"{tp.topic}[{tp.partition}]: {tp.error.str()}" for tp in partitions or [] if tp.error]
        self.outcome.append(err.str() if err is not None else ("; ".join(errors) or None))

    def publish(self, offsets: dict[tuple[str, int], int], timeout: float = 10.0) -> str | None:
        """Commit ``offsets`` and wait, bounded, for the answer: None when committed, else the error text.
        Never raises."""
        from confluent_kafka import TopicPartition

        if not offsets:
            return None
        self.outcome.clear()
        try:
            self.consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                                 asynchronous=True)
            deadline = time.monotonic() + timeout
            while not self.outcome and time.monotonic() < deadline:
                event = self.consumer.poll(0.05)   # serves the commit's callback; short: it ends the slot
                if event is not None and event.error() is not None and "AUTHORIZATION" in event.error().name():
                    return f"{event.error().name()}: {event.error().str()}"
            if not self.outcome:
                return f"no answer from the source group coordinator within {timeout:g} s"
            return self.outcome[0]
        except Exception as exc:  # noqa: BLE001 - best effort by design
            return f"{calls.error_name(exc) or type(exc).__name__}: {calls.error_text(exc)}"

    def close(self) -> None:
        """Close the consumer; a failure is logged (the publish's outcome is already reported), never raised."""
        try:
            self.consumer.close()
        except Exception as exc:  # noqa: BLE001 - best effort by design
            log.warning("closing the source progress publisher failed (not fatal): %s: %s", type(exc).__name__, exc)
