"""Check the mirror principal's ACLs before anything is written (KIP-430 authorized operations).

Without this, a missing ACL shows up mid-transaction in forms that hide the cause (a failed
AddPartitionsToTxn purges the records and the abort fails with INVALID_TXN_STATE). The brokers
tell each client which operations it may perform on a topic, so the driver compares them with what
the mirror needs and names every missing permission in one message.

Needed (docs/real-clusters.md, the least-privilege list; topics the mirror creates need Create first):
  source  topic:  Read (implies Describe), DescribeConfigs (for sync_topic_configs)
  target  topic:  Write, Read (transactional offset commits need it), DescribeConfigs
  target  internal topics eosmirror-state.<mirror>.internal, eosmirror-offset-syncs.<mirror>.internal,
                  eosmirror-offset-sync-snapshot.<mirror>.internal: Read, Write
  target  transactional ids <prefix>.<mirror>.* and group <progress group>: checked by the first
          call that needs them (init_transactions, reading the progress), which fails before any write
"""

from __future__ import annotations

from eosmirror.core import naming
from eosmirror.core.config import MirrorConfig
from eosmirror.core.errors import AuthorizationError
from eosmirror.driver.topics import TopicPair, TopicState

_NAMES = {"READ": "Read", "WRITE": "Write", "DESCRIBE_CONFIGS": "DescribeConfigs", "CREATE": "Create",
          "ALTER": "Alter", "ALTER_CONFIGS": "AlterConfigs", "DESCRIBE": "Describe"}


def required(mirror: MirrorConfig) -> dict[str, dict[str, set[str]]]:
    """What the mirror needs per cluster and topic role."""
    source = {"READ"} | ({"DESCRIBE_CONFIGS"} if mirror.sync_topic_configs else set())
    return {"source": {"topic": source},
            "target": {"topic": {"WRITE", "READ", "DESCRIBE_CONFIGS"}, "internal": {"READ", "WRITE"}}}


_WHY = {"WRITE": "to write the copies", "READ": "transactional offset commits need it",
        "DESCRIBE_CONFIGS": "to read max.message.bytes and the timestamp type"}


def missing(have: dict[str, set[str]], need: set[str], topics: list[str], where: str,
            why: dict[str, str] | None = None) -> list[str]:
    problems = []
    for topic in topics:
        if topic not in have:
            continue
        for op in sorted(need - have[topic]):
            reason = f"; {why[op]}" if why and op in why else ""
            problems.append(f"{_NAMES.get(op, op)} on topic {topic} ({where}{reason})")
    return problems


def check(mirror: MirrorConfig, pairs: list[TopicPair], targets: dict[str, TopicState],
          only: set[str] | None = None) -> None:
    """Raise one AuthorizationError naming every missing permission on the topics that exist.

    No broker call: the operations come from the run's one description of each topic. ``only``
    restricts the check to some target topics (those a run just created).
    """
    need = required(mirror)
    internal = [naming.state_topic(mirror.name), naming.offset_sync_topic(mirror.name),
                naming.offset_sync_snapshot_topic(mirror.name)]
    source_ops = {p.source: set(p.source_operations) for p in pairs if p.source_operations is not None}
    target_ops = {name: set(state.operations) for name, state in targets.items()
                  if state.operations is not None and (only is None or name in only)}
    source_topics = [] if only is not None else [p.source for p in pairs]
    problems = (missing(source_ops, need["source"]["topic"], source_topics, "source")
                + missing(target_ops, need["target"]["topic"], [p.target for p in pairs], "target", _WHY)
                + missing(target_ops, need["target"]["internal"], internal, "target, the mirror's internal topic"))
    if problems:
        raise AuthorizationError(
            f"mirror {mirror.name!r}: the principal lacks these permissions (ACLs): " + "; ".join(problems)
            + ". Grant them (see the ACL list in docs/real-clusters.md) and run again; no record or progress was written")
