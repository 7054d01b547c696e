"""Resolve and sync topics (docs/architecture.md "How a run works", driver steps 1 and 3).

Partition i of a source topic always goes to partition i of its target topic, so a target topic
needs at least the source's partition count; a target that has fewer and cannot be grown is an
error, never a silent re-partitioning. Target topics are always ``CreateTime`` topics: with
``LogAppendTime`` the target broker would replace the source timestamps.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from eosmirror.core import naming
from eosmirror.core.config import MirrorConfig
from eosmirror.core.errors import ClusterUnreachableError, ConfigError, TargetMismatchError
from eosmirror.driver import acls
from eosmirror.kafka import calls
from eosmirror.kafka.cluster import Cluster
from eosmirror.kafka.retry import retry_until, wait_until

log = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_BYTES = 1048588
# How long a topic just created may take to reach the metadata: a broker shows it only once it has made the
# logs of the partitions created before it, so the wait grows with them: 30 s, plus this per partition
# created before (the run that showed it, 6d43b53: docs/results.md, "Incidents behind the code").
DESCRIBE_NEW_SECONDS = 30.0
DESCRIBE_NEW_PER_PARTITION = 0.01


@dataclass(frozen=True)
class TopicPair:
    source: str
    target: str
    partitions: int
    source_topic_id: str
    source_operations: frozenset[str] | None = field(default=None, compare=False)


@dataclass
class TopicSyncReport:
    created: list[str] = field(default_factory=list)
    grown: dict[str, tuple[int, int]] = field(default_factory=dict)
    configs_changed: dict[str, dict[str, str]] = field(default_factory=dict)
    target_topic_ids: dict[str, str] = field(default_factory=dict)
    max_message_bytes: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    acls_synced: int = 0
    acl_warnings: list[str] = field(default_factory=list)   # also in warnings; shown in the run report

    def summary(self) -> str:
        parts = []
        if self.acls_synced:
            parts.append(f"synced {self.acls_synced} topic ACL(s) to the target (downgraded as MM2 does)")
        if self.created:
            parts.append(f"created {len(self.created)} target topic(s): {', '.join(self.created)}")
        for topic, (old, new) in self.grown.items():
            parts.append(f"grew {topic} from {old} to {new} partitions")
        for topic, changes in self.configs_changed.items():
            parts.append(f"synced configs of {topic}: {', '.join(sorted(changes))}")
        parts += self.acl_warnings
        return "; ".join(parts) or "target topics already in sync"


def _uuid(value: Any) -> str:
    return str(value) if value is not None else ""


@dataclass(frozen=True)
class TopicState:
    """One described topic: its id, partition count and, where the broker says, the operations the
    mirror's principal may perform on it (KIP-430; None without an authorizer)."""

    topic_id: str
    partitions: int
    operations: frozenset[str] | None = None


def describe_existing(cluster: Cluster, names: list[str], authorized_operations: bool = False) -> dict[str, Any]:
    """{topic: TopicDescription} for the named topics that exist; any other error fails loudly."""
    from confluent_kafka import TopicCollection

    if not names:
        return {}
    futures = cluster.admin.describe_topics(TopicCollection(names), include_authorized_operations=authorized_operations,
                                            request_timeout=calls.DEFAULT_TIMEOUT)
    found = {}
    for name, future in futures.items():
        try:
            found[name] = future.result(timeout=calls.DEFAULT_TIMEOUT)
        except Exception as exc:  # noqa: BLE001
            if calls.error_name(exc) in calls.MISSING_TOPIC:
                continue
            raise calls.translate(exc, f"describe topic {name}", cluster.label, f"Describe on topic {name}") from None
    return found


def describe(cluster: Cluster, names: list[str]) -> dict[str, TopicState]:
    """One DescribeTopics of the named topics that exist, with the principal's authorized operations."""
    out = {}
    for name, desc in describe_existing(cluster, names, authorized_operations=True).items():
        ops = desc.authorized_operations
        out[name] = TopicState(topic_id=_uuid(desc.topic_id), partitions=len(desc.partitions),
                               operations=None if ops is None else frozenset(getattr(o, "name", str(o)) for o in ops))
    return out


FIRST_CONTACT_SECONDS = 15.0   # how long a cluster may take to answer a run's first request
FIRST_CONTACT_SLICE = 2.0


def list_topic_names(cluster: Cluster) -> list[str]:
    """The cluster's topic names; the first call of a run, so it also proves the cluster answers."""
    import time

    # Asked in slices of FIRST_CONTACT_SLICE seconds: after each, calls.call looks at the client's
    # error events, so a refused login fails within seconds ("authentication failed", not retried),
    # while an unreachable cluster still gets FIRST_CONTACT_SECONDS in all.
    deadline = time.monotonic() + FIRST_CONTACT_SECONDS

    def ask() -> Any:
        return calls.call(cluster.admin.list_topics, "list topics", cluster.label, "Describe on the topics",
                          timeout=max(0.5, min(FIRST_CONTACT_SLICE, deadline - time.monotonic())))

    try:
        metadata = retry_until(FIRST_CONTACT_SECONDS, ask, lambda exc: isinstance(exc, ClusterUnreachableError))
    except ClusterUnreachableError as exc:
        # The embedded clusters of the demo and the tests: say how to start them.
        if cluster.ref is not None and cluster.ref.local:
            raise ClusterUnreachableError(f"{exc}. It is a local cluster: start it with `eosmirror local up`"
                                          ) from None
        raise
    return sorted(metadata.topics)


def resolve(mirror: MirrorConfig, source: Cluster, only: list[str] | None = None) -> list[TopicPair]:
    """The (source, target) topic pairs of a mirror, sorted; ``only`` restricts to a subset."""
    names = list_topic_names(source)
    selected = naming.select_topics(names, mirror.topics, mirror.topics_exclude, mirror.target_alias,
                                     mirror.replication_separator)
    if only:
        unknown = sorted(set(only) - set(selected))
        if unknown:
            raise ConfigError(f"mirror {mirror.name!r}: topics {', '.join(unknown)} are not mirrored by it "
                              f"(it mirrors: {', '.join(selected) or 'nothing'})")
        selected = [t for t in selected if t in only]
    if not selected:
        raise ConfigError(
            f"mirror {mirror.name!r}: no topic on the {source.label} matches topics: "
            f"{naming.as_written(mirror.topics)} (topics_exclude: {naming.as_written(mirror.topics_exclude)}). Check the patterns, and that the principal has "
            f"Describe on the topics (topics it may not describe are invisible)")
    policy = naming.policy_of(mirror)
    described = describe(source, selected)
    return [TopicPair(source=t, target=policy.target_topic(t), partitions=described[t].partitions,
                      source_topic_id=described[t].topic_id, source_operations=described[t].operations)
            for t in selected if t in described]


def internal_topics(mirror: MirrorConfig) -> dict[str, dict[str, str]]:
    """The mirror's state topic (compacted), offset-sync topic (kept forever) and offset-sync snapshot
    (compacted, a cache of each partition's newest sync; segments roll hourly so compaction keeps it
    about one record per partition) on the target."""
    return {
        naming.state_topic(mirror.name): {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"},
        naming.offset_sync_topic(mirror.name): {"cleanup.policy": "delete", "retention.ms": "-1",
                                                 "retention.bytes": "-1"},
        naming.offset_sync_snapshot_topic(mirror.name): {"cleanup.policy": "compact", "min.compaction.lag.ms": "0",
                                                          "segment.ms": "3600000"},
    }


def describe_targets(mirror: MirrorConfig, pairs: list[TopicPair], target: Cluster) -> dict[str, TopicState]:
    """The run's one description of its target topics and internal topics (those that exist)."""
    return describe(target, [p.target for p in pairs] + list(internal_topics(mirror)))


def _configs(cluster: Cluster, names: list[str], non_default_only: bool) -> dict[str, dict[str, str]]:
    from confluent_kafka.admin import ConfigResource, ResourceType

    if not names:
        return {}
    resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
    futures = cluster.admin.describe_configs(resources, request_timeout=calls.DEFAULT_TIMEOUT)
    out = {}
    for resource, future in futures.items():
        entries = calls.wait(future, f"describe configs of {resource.name}", cluster.label,
                             f"DescribeConfigs on topic {resource.name}")
        out[resource.name] = {k: e.value for k, e in entries.items()
                              if e.value is not None and not (non_default_only and e.is_default)}
    return out


def configs_of(cluster: Cluster, names: list[str], non_default_only: bool) -> dict[str, dict[str, str]]:
    """Each named topic's configs (the non-default ones only, as topic sync copies them, or every value)."""
    return _configs(cluster, names, non_default_only)


def prepare_targets(mirror: MirrorConfig, pairs: list[TopicPair], source: Cluster, target: Cluster,
                 existing: dict[str, TopicState], dry_run: bool = False) -> TopicSyncReport:
    """Create missing target topics, grow short ones, sync allow-listed configs.

    ``existing`` is the run's one description of the target (``describe_targets``); only topics this
    call creates or grows are described again (for their ids and permissions), and are added to it.
    """
    from confluent_kafka.admin import NewTopic

    report = TopicSyncReport()
    allowed = set(mirror.sync_topic_configs)
    source_configs = _configs(source, [p.source for p in pairs], non_default_only=True)
    wanted = {p.source: {k: v for k, v in source_configs.get(p.source, {}).items() if k in allowed} for p in pairs}
    to_create, to_grow = [], []
    for pair in pairs:
        have = existing[pair.target].partitions if pair.target in existing else None
        if have is None:
            to_create.append(NewTopic(pair.target, num_partitions=pair.partitions,
                                      replication_factor=mirror.target_replication_factor,
                                      config={**wanted[pair.source], "message.timestamp.type": "CreateTime"}))
        elif have < pair.partitions:
            to_grow.append((pair, have))
        elif have > pair.partitions:
            report.warnings.append(f"target {pair.target} has {have} partitions, source {pair.source} has "
                                   f"{pair.partitions}; partitions {pair.partitions}..{have - 1} stay unused")
    if dry_run:
        report.created = [t.topic for t in to_create]
        report.grown = {p.target: (have, p.partitions) for p, have in to_grow}
        return report
    report.created = _create(target, to_create, "target topic")
    for pair, have in to_grow:
        _grow(target, pair, have)
        report.grown[pair.target] = (have, pair.partitions)
    existing.update(_describe_new(target, [t.topic for t in to_create] + list(report.grown),
                                  sum(t.num_partitions for t in to_create)
                                  + sum(p.partitions - have for p, have in to_grow)))
    _check_and_sync_configs(pairs, target, existing, wanted, report)
    if mirror.sync_topic_acls:
        report.acls_synced, report.acl_warnings = acls.sync(pairs, source, target)
        report.warnings += report.acl_warnings
    for warning in report.warnings:
        log.warning("%s", warning)
    return report


def _create(target: Cluster, new_topics: list[Any], what: str) -> list[str]:
    """Create topics; one a concurrent run created meanwhile counts as created."""
    created: list[str] = []
    if not new_topics:
        return created
    for name, future in target.admin.create_topics(new_topics, request_timeout=calls.DEFAULT_TIMEOUT).items():
        try:
            future.result(timeout=calls.DEFAULT_TIMEOUT)
            log.info("created %s %s", what, name)
        except Exception as exc:  # noqa: BLE001
            if calls.error_name(exc) != "TOPIC_ALREADY_EXISTS":   # else a concurrent run created it
                raise calls.translate(exc, f"create {what} {name}", target.label, f"Create on topic {name}") from None
            continue
        created.append(name)
    return created


def _grow(target: Cluster, pair: TopicPair, have: int) -> None:
    from confluent_kafka.admin import NewPartitions

    future = target.admin.create_partitions([NewPartitions(pair.target, pair.partitions)],
                                            request_timeout=calls.DEFAULT_TIMEOUT)[pair.target]
    try:
        future.result(timeout=calls.DEFAULT_TIMEOUT)
    except Exception as exc:  # noqa: BLE001
        raise TargetMismatchError(
            f"{target.label}: target topic {pair.target} has {have} partitions but source {pair.source} has "
            f"{pair.partitions}, and growing it failed ({calls.error_text(exc)}). Partition i must go to "
            f"partition i; grant Alter on topic {pair.target} or add the partitions by hand") from None


def _describe_new(target: Cluster, names: list[str], partitions: int) -> dict[str, TopicState]:
    """Describe topics just created or grown; a new topic may take a moment to reach the metadata, more
    when the broker has the logs of many ``partitions`` created just before to make."""
    if not names:
        return {}
    budget = DESCRIBE_NEW_SECONDS + DESCRIBE_NEW_PER_PARTITION * partitions
    found = wait_until(budget, lambda: describe(target, names), lambda d: len(d) == len(set(names)))
    missing = sorted(set(names) - set(found))
    if missing:
        raise TargetMismatchError(f"{target.label}: target topic(s) {', '.join(missing)} do not exist {budget:.0f} s "
                                  f"after creation")
    return found


def _check_and_sync_configs(pairs: list[TopicPair], target: Cluster, existing: dict[str, TopicState],
                            wanted: dict[str, dict[str, str]], report: TopicSyncReport) -> None:
    """CreateTime everywhere, record limits known, allow-listed configs equal to the source's."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    target_configs = _configs(target, [p.target for p in pairs], non_default_only=False)
    for pair in pairs:
        report.target_topic_ids[pair.target] = existing[pair.target].topic_id
        have_configs = target_configs.get(pair.target, {})
        if have_configs.get("message.timestamp.type", "CreateTime") != "CreateTime":
            raise TargetMismatchError(
                f"{target.label}: target topic {pair.target} has message.timestamp.type="
                f"{have_configs['message.timestamp.type']}; the broker would replace the source timestamps. "
                f"Set it to CreateTime")
        report.max_message_bytes[pair.target] = int(have_configs.get("max.message.bytes", DEFAULT_MAX_MESSAGE_BYTES))
        drift = {k: v for k, v in wanted[pair.source].items() if have_configs.get(k) != v}
        if not drift or pair.target in report.created:
            continue
        resource = ConfigResource(ResourceType.TOPIC, pair.target, incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sorted(drift.items())])
        future = target.admin.incremental_alter_configs([resource])[resource]
        calls.wait(future, f"alter configs of {pair.target}", target.label, f"AlterConfigs on topic {pair.target}")
        report.configs_changed[pair.target] = drift
        if "max.message.bytes" in drift:
            report.max_message_bytes[pair.target] = int(drift["max.message.bytes"])


def cleanup_policies(cluster: Cluster, names: list[str]) -> dict[str, str]:
    """cleanup.policy of each named topic that exists."""
    present = list(describe(cluster, names))
    return {n: c.get("cleanup.policy", "delete") for n, c in _configs(cluster, present, False).items()}


def target_limits(target: Cluster, pairs: list[TopicPair], existing: dict[str, TopicState]) -> dict[str, int]:
    """max.message.bytes of each existing target topic (for planning without syncing)."""
    names = [p.target for p in pairs if p.target in existing]
    configs = _configs(target, names, non_default_only=False)
    return {n: int(c.get("max.message.bytes", DEFAULT_MAX_MESSAGE_BYTES)) for n, c in configs.items()}


def ensure_internal_topics(mirror: MirrorConfig, target: Cluster, existing: dict[str, TopicState]) -> list[str]:
    """Create the mirror's internal topics that ``existing`` lacks; returns the names created."""
    from confluent_kafka.admin import NewTopic

    missing = [NewTopic(name, num_partitions=1, replication_factor=mirror.target_replication_factor, config=cfg)
               for name, cfg in internal_topics(mirror).items() if name not in existing]
    created = _create(target, missing, "internal topic")
    # A first run creates them right after its target topics: the broker may still be making those logs.
    existing.update(_describe_new(target, [t.topic for t in missing],
                                  len(missing) + (sum(t.partitions for t in existing.values()) if missing else 0)))
    return created
