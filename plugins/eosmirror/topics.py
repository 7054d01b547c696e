"""Resolve and sync topics (design steps 1 and 2).

Partition i of a source topic always goes to partition i of its target topic, so a target topic
needs at least the source's partition count; a target that has fewer and cannot be grown is an
error, never a silent re-partitioning. Target topics are always ``CreateTime`` topics: with
``LogAppendTime`` the target broker would replace the source timestamps.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from eosmirror import kafkaio, naming
from eosmirror.config import MirrorConfig
from eosmirror.errors import ConfigError, TargetMismatchError

log = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_BYTES = 1048588


@dataclass(frozen=True)
class TopicPair:
    source: str
    target: str
    partitions: int
    source_topic_id: str


@dataclass
class TopicSyncReport:
    created: list[str] = field(default_factory=list)
    grown: dict[str, tuple[int, int]] = field(default_factory=dict)
    configs_changed: dict[str, dict[str, str]] = field(default_factory=dict)
    target_topic_ids: dict[str, str] = field(default_factory=dict)
    max_message_bytes: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = []
        if self.created:
            parts.append(f"created {len(self.created)} target topic(s): {', '.join(self.created)}")
        for topic, (old, new) in self.grown.items():
            parts.append(f"grew {topic} from {old} to {new} partitions")
        for topic, changes in self.configs_changed.items():
            parts.append(f"synced configs of {topic}: {', '.join(sorted(changes))}")
        return "; ".join(parts) or "target topics already in sync"


def _uuid(value: Any) -> str:
    return str(value) if value is not None else ""


def describe_existing(admin: Any, names: list[str], cluster: str, authorized_operations: bool = False,
                      ) -> dict[str, Any]:
    """{topic: TopicDescription} for the named topics that exist; any other error fails loudly."""
    from confluent_kafka import TopicCollection

    if not names:
        return {}
    futures = admin.describe_topics(TopicCollection(names), include_authorized_operations=authorized_operations,
                                    request_timeout=kafkaio.DEFAULT_TIMEOUT)
    found = {}
    for name, future in futures.items():
        try:
            found[name] = future.result(timeout=kafkaio.DEFAULT_TIMEOUT)
        except Exception as exc:  # noqa: BLE001
            if kafkaio.error_name(exc) in kafkaio.MISSING_TOPIC:
                continue
            raise kafkaio.translate(exc, f"describe topic {name}", cluster, f"Describe on topic {name}") from None
    return found


def describe(admin: Any, names: list[str], cluster: str) -> dict[str, tuple[str, int]]:
    """{topic: (topic id, partition count)} for the named topics that exist."""
    return {name: (_uuid(desc.topic_id), len(desc.partitions))
            for name, desc in describe_existing(admin, names, cluster).items()}


def list_topic_names(admin: Any, cluster: str) -> list[str]:
    metadata = kafkaio.call(admin.list_topics, "list topics", cluster, "Describe on the topics", timeout=15)
    return sorted(metadata.topics)


def resolve(mirror: MirrorConfig, source_admin: Any, cluster: str,
            only: list[str] | None = None) -> list[TopicPair]:
    """The (source, target) topic pairs of a mirror, sorted; ``only`` restricts to a subset."""
    names = list_topic_names(source_admin, cluster)
    selected = naming.select_topics(names, mirror.topics, mirror.topics_exclude, mirror.target_alias)
    if only:
        unknown = sorted(set(only) - set(selected))
        if unknown:
            raise ConfigError(f"mirror {mirror.name!r}: topics {', '.join(unknown)} are not mirrored by it "
                              f"(it mirrors: {', '.join(selected) or 'nothing'})")
        selected = [t for t in selected if t in only]
    if not selected:
        raise ConfigError(
            f"mirror {mirror.name!r}: no topic on the {cluster} matches topics={list(mirror.topics)} "
            f"(exclude={list(mirror.topics_exclude)}). Check the patterns, and that the principal has "
            f"Describe on the topics (topics it may not describe are invisible)")
    policy = naming.ReplicationPolicy(mirror.replication_policy, mirror.source_alias)
    described = describe(source_admin, selected, cluster)
    return [TopicPair(source=t, target=policy.target_topic(t), partitions=described[t][1],
                      source_topic_id=described[t][0]) for t in selected if t in described]


def _configs(admin: Any, names: list[str], cluster: str, non_default_only: bool) -> dict[str, dict[str, str]]:
    from confluent_kafka.admin import ConfigResource, ResourceType

    if not names:
        return {}
    resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
    futures = admin.describe_configs(resources, request_timeout=kafkaio.DEFAULT_TIMEOUT)
    out = {}
    for resource, future in futures.items():
        entries = kafkaio.wait(future, f"describe configs of {resource.name}", cluster,
                               f"DescribeConfigs on topic {resource.name}")
        out[resource.name] = {k: e.value for k, e in entries.items()
                              if e.value is not None and not (non_default_only and e.is_default)}
    return out


def sync_targets(mirror: MirrorConfig, pairs: list[TopicPair], source_admin: Any, target_admin: Any,
                 source_label: str, target_label: str, dry_run: bool = False) -> TopicSyncReport:
    """Create missing target topics, grow short ones, sync allow-listed configs."""
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                       NewTopic, ResourceType)

    report = TopicSyncReport()
    targets = describe(target_admin, [p.target for p in pairs], target_label)
    source_configs = _configs(source_admin, [p.source for p in pairs], source_label, non_default_only=True)
    allowed = set(mirror.sync_topic_configs)
    to_create, to_grow = [], []
    for pair in pairs:
        wanted = {k: v for k, v in source_configs.get(pair.source, {}).items() if k in allowed}
        if pair.target not in targets:
            to_create.append(NewTopic(pair.target, num_partitions=pair.partitions,
                                      replication_factor=mirror.target_replication_factor,
                                      config={**wanted, "message.timestamp.type": "CreateTime"}))
        else:
            have = targets[pair.target][1]
            if have < pair.partitions:
                to_grow.append((pair, have))
            elif have > pair.partitions:
                report.warnings.append(f"target {pair.target} has {have} partitions, source {pair.source} has "
                                       f"{pair.partitions}; partitions {pair.partitions}..{have - 1} stay unused")
    if dry_run:
        report.created = [t.topic for t in to_create]
        report.grown = {p.target: (have, p.partitions) for p, have in to_grow}
        return report
    if to_create:
        futures = target_admin.create_topics(to_create, request_timeout=kafkaio.DEFAULT_TIMEOUT)
        for name, future in futures.items():
            try:
                future.result(timeout=kafkaio.DEFAULT_TIMEOUT)
                report.created.append(name)
            except Exception as exc:  # noqa: BLE001
                if kafkaio.error_name(exc) != "TOPIC_ALREADY_EXISTS":  # a concurrent run created it
                    raise kafkaio.translate(exc, f"create target topic {name}", target_label,
                                            f"Create on topic {name}") from None
    for pair, have in to_grow:
        future = target_admin.create_partitions([NewPartitions(pair.target, pair.partitions)],
                                                request_timeout=kafkaio.DEFAULT_TIMEOUT)[pair.target]
        try:
            future.result(timeout=kafkaio.DEFAULT_TIMEOUT)
            report.grown[pair.target] = (have, pair.partitions)
        except Exception as exc:  # noqa: BLE001
            raise TargetMismatchError(
                f"{target_label}: target topic {pair.target} has {have} partitions but source {pair.source} has "
                f"{pair.partitions}, and growing it failed ({kafkaio.error_text(exc)}). Partition i must go to "
                f"partition i; grant Alter on topic {pair.target} or add the partitions by hand") from None
    # Re-describe: ids of created topics, and existing configs for drift and record limits. A topic
    # just created may take a moment to appear in the broker's metadata.
    deadline = time.monotonic() + 30
    targets = describe(target_admin, [p.target for p in pairs], target_label)
    while len(targets) < len(pairs) and time.monotonic() < deadline:
        time.sleep(0.2)
        targets = describe(target_admin, [p.target for p in pairs], target_label)
    target_configs = _configs(target_admin, [p.target for p in pairs], target_label, non_default_only=False)
    for pair in pairs:
        if pair.target not in targets:
            raise TargetMismatchError(f"{target_label}: target topic {pair.target} does not exist after creation")
        report.target_topic_ids[pair.target] = targets[pair.target][0]
        have_configs = target_configs.get(pair.target, {})
        if have_configs.get("message.timestamp.type", "CreateTime") != "CreateTime":
            raise TargetMismatchError(
                f"{target_label}: target topic {pair.target} has message.timestamp.type="
                f"{have_configs['message.timestamp.type']}; the broker would replace the source timestamps. "
                f"Set it to CreateTime")
        report.max_message_bytes[pair.target] = int(have_configs.get("max.message.bytes", DEFAULT_MAX_MESSAGE_BYTES))
        wanted = {k: v for k, v in source_configs.get(pair.source, {}).items() if k in allowed}
        drift = {k: v for k, v in wanted.items() if have_configs.get(k) != v}
        if drift and pair.target not in report.created:
            resource = ConfigResource(ResourceType.TOPIC, pair.target, incremental_configs=[
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sorted(drift.items())])
            future = target_admin.incremental_alter_configs([resource])[resource]
            kafkaio.wait(future, f"alter configs of {pair.target}", target_label, f"AlterConfigs on topic {pair.target}")
            report.configs_changed[pair.target] = drift
            if "max.message.bytes" in drift:
                report.max_message_bytes[pair.target] = int(drift["max.message.bytes"])
    for warning in report.warnings:
        log.warning("%s", warning)
    return report


def cleanup_policies(admin: Any, names: list[str], cluster: str) -> dict[str, str]:
    """cleanup.policy of each named topic that exists."""
    existing = list(describe(admin, names, cluster))
    return {n: c.get("cleanup.policy", "delete") for n, c in _configs(admin, existing, cluster, False).items()}


def target_limits(target_admin: Any, pairs: list[TopicPair], target_label: str) -> dict[str, int]:
    """max.message.bytes of each existing target topic (for planning without syncing)."""
    names = list(describe(target_admin, [p.target for p in pairs], target_label))
    configs = _configs(target_admin, names, target_label, non_default_only=False)
    return {n: int(c.get("max.message.bytes", DEFAULT_MAX_MESSAGE_BYTES)) for n, c in configs.items()}


def ensure_internal_topics(mirror: MirrorConfig, target_admin: Any, target_label: str) -> None:
    """The mirror's state topic (compacted) and offset-sync topic (kept forever) on the target."""
    from confluent_kafka.admin import NewTopic

    wanted = {
        naming.state_topic(mirror.name): {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"},
        naming.offset_sync_topic(mirror.name): {"cleanup.policy": "delete", "retention.ms": "-1",
                                                 "retention.bytes": "-1"},
    }
    existing = describe(target_admin, list(wanted), target_label)
    missing = [NewTopic(name, num_partitions=1, replication_factor=mirror.target_replication_factor, config=cfg)
               for name, cfg in wanted.items() if name not in existing]
    if not missing:
        return
    for name, future in target_admin.create_topics(missing, request_timeout=kafkaio.DEFAULT_TIMEOUT).items():
        try:
            future.result(timeout=kafkaio.DEFAULT_TIMEOUT)
            log.info("created internal topic %s", name)
        except Exception as exc:  # noqa: BLE001
            if kafkaio.error_name(exc) != "TOPIC_ALREADY_EXISTS":
                raise kafkaio.translate(exc, f"create internal topic {name}", target_label,
                                        f"Create on topic {name}") from None
