"""Names: replication policies (target topic names), internal topics, transactional ids.

Pure functions. The prefix policy is MirrorMaker 2's DefaultReplicationPolicy naming
(``<source-alias>.<topic>``) so that a mirror can take over from MM2 without renaming topics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

SEPARATOR = "."

# Never mirrored, whatever the include patterns say: Kafka's own topics (``__consumer_offsets``,
# ``__transaction_state``), Connect/MM2 internals (``*.internal``, ``*-internal``), MM2 heartbeats
# and checkpoints, Kafka Streams internals, and eosmirror's own topics.
BUILTIN_EXCLUDES = (
    r"__.*",
    r".*[-.]internal",
    r".*\.replica",
    r"(.*\.)?heartbeats",
    r".*\.checkpoints\.internal",
    r"eosmirror-.*",
)


@dataclass(frozen=True)
class ReplicationPolicy:
    """Maps a source topic name to its target topic name."""

    kind: str = "identity"          # "identity" or "prefix"
    source_alias: str | None = None
    separator: str = SEPARATOR      # MM2's replication.policy.separator

    def target_topic(self, source_topic: str) -> str:
        if self.kind == "prefix":
            return f"{self.source_alias}{self.separator}{source_topic}"
        return source_topic

    def source_topic(self, target_topic: str) -> str:
        if self.kind == "prefix":
            prefix = f"{self.source_alias}{self.separator}"
            if not target_topic.startswith(prefix):
                raise ValueError(f"{target_topic!r} is not a topic this policy produced (prefix {prefix!r})")
            return target_topic[len(prefix):]
        return target_topic


def upstream_alias(topic: str, separator: str = SEPARATOR) -> str | None:
    """The alias a prefixed (remote) topic came from, if its name has one: ``dc1.orders`` -> ``dc1``."""
    head, sep, _ = topic.partition(separator)
    return head if sep else None


def is_cycle(source_topic: str, target_alias: str | None, separator: str = SEPARATOR) -> bool:
    """True when the source topic is itself a copy of a topic from the target cluster.

    Only detectable when the target has an alias and the topic carries a prefix (like MM2, an
    identity-named mirror cannot detect cycles; never run two identity mirrors in opposite directions).
    """
    return bool(target_alias) and upstream_alias(source_topic, separator) == target_alias


def is_builtin_excluded(topic: str) -> bool:
    return any(re.fullmatch(pattern, topic) for pattern in BUILTIN_EXCLUDES)


def as_written(patterns: tuple[str, ...] | list[str]) -> str:
    """Patterns as the user wrote them in the mirror file, for messages: `a\\.b`, never the doubled
    backslashes of a Python repr ('a\\\\.b'), which send a reader hunting for an escaping bug."""
    return ", ".join(f"`{p}`" for p in patterns) if patterns else "none"


def select_topics(topics: list[str], include: tuple[str, ...], exclude: tuple[str, ...],
                  target_alias: str | None = None, separator: str = SEPARATOR) -> list[str]:
    """Source topics a mirror copies: matching an include pattern, no exclude, never internal."""
    chosen = []
    for topic in sorted(topics):
        if is_builtin_excluded(topic) or is_cycle(topic, target_alias, separator):
            continue
        if not any(re.fullmatch(p, topic) for p in include):
            continue
        if any(re.fullmatch(p, topic) for p in exclude):
            continue
        chosen.append(topic)
    return chosen


def state_topic(mirror: str) -> str:
    """Compacted, one partition, on the target: the slot generations of the mirror."""
    return f"eosmirror-state.{mirror}.internal"


def offset_sync_topic(mirror: str) -> str:
    """On the target: exact source->target offset runs, written inside each copy transaction."""
    return f"eosmirror-offset-syncs.{mirror}.internal"


def offset_sync_snapshot_topic(mirror: str) -> str:
    """On the target, compacted: each partition's newest offset sync and the sync-topic offset it was
    folded up to (a cache the driver rewrites after each run; see ``kafka.syncstore``)."""
    return f"eosmirror-offset-sync-snapshot.{mirror}.internal"


def snapshot_transactional_id(prefix: str, mirror: str) -> str:
    """The transactional id that writes the offset-sync snapshot (serializes concurrent refreshes)."""
    return f"{prefix}.{mirror}.snapshot"


def lag_topic(mirror: str) -> str:
    """On the target, time-retained: the mirror's lag samples and run outcomes (see kafka/lagstore.py)."""
    return f"eosmirror-lag.{mirror}.internal"


def slot_transactional_id(prefix: str, mirror: str, slot: int) -> str:
    return f"{prefix}.{mirror}.{slot}"


def planner_transactional_id(prefix: str, mirror: str) -> str:
    return f"{prefix}.{mirror}.planner"


def slot_transactional_ids(prefix: str, mirror: str, slots: int) -> list[str]:
    return [slot_transactional_id(prefix, mirror, k) for k in range(slots)]


def group_writer_transactional_id(prefix: str, mirror: str) -> str:
    """The transactional id that writes consumer-group offsets (failover on the target, failback on the source)."""
    return f"{prefix}.{mirror}.groups"


def cluster_alias(alias: str | None, role: str) -> str:
    """A cluster's alias for MirrorMaker 2 style names (checkpoints topic): the configured alias, else the role."""
    return alias or role


def policy_of(mirror: "Any") -> ReplicationPolicy:
    """The replication policy a mirror definition (MirrorConfig) names."""
    return ReplicationPolicy(mirror.replication_policy, mirror.source_alias, mirror.replication_separator)


# --- the way back after a promotion (docs/disaster-recovery.md, "The way back") ---------------------

REVERSE_SUFFIX = "__reverse"
DIVERGED_HEADER = "eosmirror.diverged.from"


def reverse_mirror_name(mirror: str) -> str:
    """The generated mirror target -> old source of an identity mirror: ``<mirror>__reverse``."""
    return f"{mirror}{REVERSE_SUFFIX}"


def forward_mirror_name(name: str) -> str | None:
    """The forward mirror a generated reverse mirror belongs to (None: ``name`` is no reverse mirror)."""
    if name.endswith(REVERSE_SUFFIX) and len(name) > len(REVERSE_SUFFIX):
        return name[: -len(REVERSE_SUFFIX)]
    return None


def diverged_topic(topic: str, mirror: str) -> str:
    """On the new primary (the forward mirror's target): the side topic that receives, once, the old
    source's records of ``topic`` that never reached the target before the promotion. Partition k
    receives the diverged records of partition k, in their order."""
    return f"{topic}.diverged.{mirror}"


def diverged_topic_pattern(mirror: str) -> str:
    """Every side topic of ``mirror`` (a regular expression): never mirrored back by the reverse mirror."""
    return r".*\.diverged\." + re.escape(mirror)


def diverged_transactional_id(prefix: str, mirror: str) -> str:
    """The transactional id that copies the diverged records (one per mirror: a second copier fences the first)."""
    return f"{prefix}.{mirror}.diverged"


def diverged_origin(topic: str, partition: int, offset: int) -> bytes:
    """The header each copied diverged record carries: where it lies in the old source's log."""
    return f"{topic}/{partition}/{offset}".encode()
