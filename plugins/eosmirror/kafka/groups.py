"""Consumer groups on a cluster: list them, their state, their committed offsets, and one atomic write.

Offsets are never read with AdminClient.list_consumer_group_offsets in this process: librdkafka 2.16
crashes (SIGSEGV) when the coordinator answers it with NOT_COORDINATOR (see ``groupoffsets``, which
runs the one such read in a child process). Reads here use a never-assigned
consumer's ``committed()`` with require_stable; a write is ONE transaction of a
transactional producer that sends the group's offsets (``send_offsets_to_transaction`` with the
metadata of a member-less consumer of that group, exactly how the mirror commits its own progress)
together with the MirrorMaker 2 checkpoint records that audit it: both commit or neither does.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

from eosmirror.core.checkpoints import Checkpoint
from eosmirror.core.errors import EosMirrorError, ProgressUnavailableError
from eosmirror.kafka import calls, clients, progress
from eosmirror.kafka.cluster import Cluster

log = logging.getLogger(__name__)

TRANSACTION_TIMEOUT_MS = 60_000
CALL_TIMEOUT = 30.0


def list_groups(cluster: Cluster) -> list[str]:
    """Every consumer group id on the cluster (needs Describe on the groups to see them)."""
    result = calls.wait(cluster.admin.list_consumer_groups(request_timeout=CALL_TIMEOUT), "list consumer groups",
                        cluster.label, "Describe on the consumer groups")
    return sorted(g.group_id for g in result.valid)


def group_states(cluster: Cluster, groups: Iterable[str], to_write: bool = False) -> dict[str, str]:
    """Each group's state name; a group with members is never reported as writable ("ACTIVE").

    A group that does not exist is "DEAD" (that is what the coordinator answers for an unknown
    classic group; the KIP-848 API answers GROUP_ID_NOT_FOUND, mapped the same way).
    """
    groups = sorted(set(groups))
    if not groups:
        return {}
    futures = cluster.admin.describe_consumer_groups(groups, request_timeout=CALL_TIMEOUT)
    states = {}
    for group, future in futures.items():
        try:
            description = future.result(timeout=CALL_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - translated
            if calls.error_name(exc) == "GROUP_ID_NOT_FOUND":
                states[group] = "DEAD"
                continue
            raise calls.translate(exc, f"describe consumer group {group}", cluster.label,
                                  f"Read on group {group} (implies the Describe asked here; the sync writes its "
                                  f"offsets with Read)" if to_write else f"Describe on group {group}") from None
        name = getattr(description.state, "name", str(description.state)).upper()
        states[group] = "ACTIVE" if description.members and name in ("EMPTY", "DEAD") else name
    return states


def committed(cluster: Cluster, group: str, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The group's committed offsets of ``partitions`` (absent: none), waiting out a pending
    transactional commit (require_stable) so that a half-written sync is never read."""

    try:
        found = progress.read(cluster, list(partitions), group, stable=True)
    except ProgressUnavailableError:
        raise ProgressUnavailableError(
            f"{cluster.label}: the committed offsets of group {group} stayed unstable for 30 s: a transactional "
            f"producer of that group's application holds an open transaction; run the sync again when it has "
            f"committed or timed out") from None
    return {tp: p.offset for tp, p in found.items()}


def ensure_topic(cluster: Cluster, name: str, replication_factor: int) -> bool:
    """Create the compacted one-partition checkpoints topic if missing (MM2 creates it the same way)."""
    from confluent_kafka.admin import NewTopic

    if name in calls.call(cluster.admin.list_topics, "list topics", cluster.label, None, timeout=15).topics:
        return False
    new = NewTopic(name, num_partitions=1, replication_factor=replication_factor,
                   config={"cleanup.policy": "compact"})
    try:
        cluster.admin.create_topics([new], request_timeout=CALL_TIMEOUT)[name].result(timeout=CALL_TIMEOUT)
    except Exception as exc:  # noqa: BLE001 - a concurrent sync may have created it
        if calls.error_name(exc) != "TOPIC_ALREADY_EXISTS":
            raise calls.translate(exc, f"create checkpoints topic {name}", cluster.label, f"Create on {name}") from None
    return True


class GroupWriter:
    """Writes groups' offsets on one cluster, one transaction per group, with their checkpoints.

    Its transactional id (one per mirror and cluster) fences an older writer still running, so two
    overlapping syncs never interleave their writes.
    """

    def __init__(self, cluster: Cluster, transactional_id: str, overrides: Any = None):
        self.cluster = cluster
        self.producer = clients.transactional_producer(
            cluster.settings, overrides or {}, transactional_id, TRANSACTION_TIMEOUT_MS,
            f"eosmirror-groups-{transactional_id}", where=f"{cluster.label} group writer")
        self.producer.init_transactions(CALL_TIMEOUT)

    def write(self, group: str, offsets: dict[tuple[str, int], int], checkpoints_topic: str,
              records: list[Checkpoint]) -> None:
        """The group's offsets and the checkpoint records, committed together or not at all."""
        from confluent_kafka import TopicPartition

        member_less = clients.progress_reader(self.cluster.settings, group, f"eosmirror-groups-{group}")
        refused: list[str] = []     # the checkpoint records' delivery errors (the commit says only "failed delivery")
        try:
            self.producer.begin_transaction()
            for record in records:
                self.producer.produce(checkpoints_topic, key=record.key(), value=record.value(), partition=0,
                                      on_delivery=lambda err, _: refused.append(err.name()) if err else None)
            self.producer.send_offsets_to_transaction(
                [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())],
                member_less.consumer_group_metadata(), CALL_TIMEOUT)
            self.producer.commit_transaction(CALL_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - aborted, then reported with the group's name
            self._abort()
            self.producer.flush(5)      # serve the refused deliveries' reports (a failed call does not)
            name = calls.error_name(exc)
            if "TOPIC_AUTHORIZATION_FAILED" in refused or (
                    name == "_STATE" and records and not _may_write(self.cluster, checkpoints_topic)):
                name = "TOPIC_AUTHORIZATION_FAILED:checkpoints"
            raise EosMirrorError(f"{self.cluster.label}: writing the offsets of group {group} failed and was "
                                 f"rolled back ({(name or type(exc).__name__).split(':')[0]}: "
                                 f"{calls.error_text(exc)})"
                                 f"{_write_refusal_hint(name, group, checkpoints_topic, offsets)}") from None
        finally:
            member_less.close()

    def _abort(self) -> None:
        try:
            self.producer.abort_transaction(CALL_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - the transaction times out on the broker anyway
            log.warning("abort after a failed group write: %s", exc)

    def close(self) -> None:
        self.producer.flush(5)


def _may_write(cluster: Cluster, topic: str) -> bool:
    """Whether the brokers let this principal write the topic (KIP-430 authorized operations); True when they do
    not say. Asked after a failure: when AddPartitionsToTxn's refusal arrives before send_offsets_to_transaction,
    that call fails on the transaction's error state (_STATE) and the abort purges the records (_PURGE_QUEUE), so
    the delivery reports do not name the refused write."""
    from confluent_kafka import TopicCollection

    try:
        futures = cluster.admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True,
                                                request_timeout=CALL_TIMEOUT)
        ops = futures[topic].result(timeout=CALL_TIMEOUT).authorized_operations
    except Exception:  # noqa: BLE001 - the original error is reported
        return True
    names = {getattr(o, "name", str(o)) for o in ops or ()}
    return ops is None or bool(names & {"WRITE", "ALL"})

def _write_refusal_hint(error: str | None, group: str, checkpoints_topic: str,
                        offsets: dict[tuple[str, int], int]) -> str:
    """The ACL a refused group write lacks, named (measured on Kafka 4.3 with StandardAuthorizer:
    tests/integration/test_command_acls.py): AddOffsetsToTxn and TxnOffsetCommit need Read on the group,
    TxnOffsetCommit Read on each topic committed, the checkpoint records Write on the checkpoints topic."""
    if error == "GROUP_AUTHORIZATION_FAILED":
        return f"; the principal needs Read on group {group} here. Grant that ACL and run again"
    if error == "TOPIC_AUTHORIZATION_FAILED:checkpoints":     # the checkpoint records' delivery was refused
        return f"; the principal needs Write on topic {checkpoints_topic} here. Grant that ACL and run again"
    if error == "TOPIC_AUTHORIZATION_FAILED":
        topics = ", ".join(sorted({t for t, _ in offsets}))
        return (f"; the principal needs Write on topic {checkpoints_topic} and Read on topic(s) {topics} here. "
                f"Grant those ACLs and run again")
    return ""
