"""What eosmirror needs from each cluster's brokers, and the verdict on one broker's ApiVersions answer.

A broker lists, per API key, the versions it serves (its ApiVersions answer: ``{api key: (min, max)}``).
Each feature below names the API and the first version of it that provides the feature, and the Kafka
release that first shipped that version (from the request schemas in apache/kafka,
``clients/src/main/resources/common/message/*Request.json``, and the KIPs they cite). A command needs
some features of its source cluster and some of its target cluster (``NEEDS``); ``check`` turns one
answer into ok, a refusal (the cluster, what its answer says of its Kafka release, the feature, the
minimum) or the list of what a degradable feature leaves out.

The features that decide the floors:
  target  transactions whose offset commits carry the consumer-group metadata, and stable offset
          reads (KIP-447: TxnOffsetCommit v3, OffsetFetch v7 with require_stable): Kafka 2.5;
  source  read_committed fetches and ListOffsets with an isolation level: Kafka 0.11.
A reverse or a resume writes the reverse mirror's progress and state on the old source: there the
old source is a target, and needs 2.5 too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

ApiTable = Mapping[int, tuple[int, int]]      # api key -> (min version, max version) the broker serves


@dataclass(frozen=True)
class Feature:
    name: str              # what eosmirror uses it for
    api: str               # the API's name in Kafka's protocol
    key: int               # its API key
    version: int           # the first version that provides the feature
    release: str           # the Kafka release that first shipped that version
    left_out: str = ""     # degradable: what is left out without it ("" = required)

    def met_by(self, table: ApiTable) -> bool:
        return self.key in table and table[self.key][1] >= self.version

    @property
    def minimum(self) -> str:
        return f"{self.api} v{self.version} (API key {self.key}), Kafka {self.release}"


TRANSACTIONS = Feature("transactions", "EndTxn", 26, 0, "0.11")
TXN_GROUP_METADATA = Feature("transactional offset commits with the consumer-group metadata (KIP-447)",
                             "TxnOffsetCommit", 28, 3, "2.5")
STABLE_OFFSETS = Feature("stable progress reads, require_stable (KIP-447)", "OffsetFetch", 9, 7, "2.5")
READ_COMMITTED = Feature("read_committed fetches", "Fetch", 1, 4, "0.11")
STABLE_ENDS = Feature("ListOffsets with an isolation level (the last stable offset)", "ListOffsets", 2, 2, "0.11")
TOPIC_CONFIGS = Feature("reading topic configs", "DescribeConfigs", 32, 0, "0.11")
CONFIG_SYNC = Feature("topic config sync (incremental)", "IncrementalAlterConfigs", 44, 0, "2.3")
GROW_TOPICS = Feature("growing target topics", "CreatePartitions", 37, 0, "1.0")
TOPIC_IDS = Feature("topic ids (KIP-516)", "Metadata", 3, 10, "2.8",
                    left_out="a deleted and re-created topic is not told by its topic id (only by offsets that no "
                             "longer fit the mirror's progress)")
ACL_PERMISSIONS = Feature("ACL sync: the principal's cluster permissions (KIP-700)", "DescribeCluster", 60, 0, "2.8",
                          left_out="topic ACLs are not synced (sync_topic_acls)")
ACL_READ = Feature("ACL sync: reading the source's topic ACLs", "DescribeAcls", 29, 0, "0.11",
                   left_out="topic ACLs are not synced (sync_topic_acls)")
ACL_WRITE = Feature("ACL sync: creating topic ACLs on the target", "CreateAcls", 30, 0, "0.11",
                    left_out="topic ACLs are not synced (sync_topic_acls)")
PRODUCERS = Feature("naming the producer that holds a partition (KIP-664, kafka-transactions.sh describe-producers)",
                    "DescribeProducers", 61, 0, "2.8",
                    left_out="a refusal over an open transaction names the partition and its offsets; the "
                             "kafka-transactions.sh describe-producers it suggests does not work on this cluster")
TXN_STATES = Feature("the state of a transactional id (KIP-664, kafka-transactions.sh describe)",
                     "DescribeTransactions", 65, 0, "3.0",
                     left_out="a refusal over an open transaction names the transactional ids without their state")
HANGING = Feature("finding hanging transactions (KIP-664, kafka-transactions.sh find-hanging)",
                  "ListTransactions", 66, 0, "3.0",
                  left_out="the kafka-transactions.sh find-hanging a refusal suggests does not work on this cluster")

READS = (READ_COMMITTED, STABLE_ENDS)
SOURCE = (*READS, TOPIC_CONFIGS, TOPIC_IDS)
TARGET = (TRANSACTIONS, TXN_GROUP_METADATA, STABLE_OFFSETS, *READS, TOPIC_CONFIGS, CONFIG_SYNC, GROW_TOPICS,
          TOPIC_IDS, PRODUCERS, TXN_STATES, HANGING)
ACL_SYNC = {"source": (ACL_PERMISSIONS, ACL_READ), "target": (ACL_PERMISSIONS, ACL_WRITE)}
# A group move writes the groups' offsets in a transaction with their checkpoints, as the mirror commits its
# progress; it is checked on the side it writes (the target in failover, the source in failback).
GROUP_WRITES = (TRANSACTIONS, TXN_GROUP_METADATA, *READS)

# command -> {role of the cluster in the command: the features it needs there}. A promotion does not
# look at the source (it may be gone); a reverse and a resume write on the old source (the reverse
# mirror's target), so there it needs what a target needs.
NEEDS: dict[str, dict[str, tuple[Feature, ...]]] = {
    "run": {"source": SOURCE, "target": TARGET},
    "migrate": {"source": SOURCE, "target": TARGET},
    "switchover": {"source": SOURCE, "target": TARGET},
    "switchover --cancel": {"target": (TRANSACTIONS,)},
    "promote": {"target": TARGET},
    "reverse": {"source": TARGET, "target": TARGET},
    "resume": {"source": TARGET, "target": TARGET},
    "verify": {"source": READS, "target": READS},
    "lag": {"source": (STABLE_ENDS,), "target": (STABLE_ENDS, STABLE_OFFSETS)},
    "groups": {"source": GROUP_WRITES, "target": GROUP_WRITES},
}


def needs(command: str, role: str, acl_sync: bool = False) -> tuple[Feature, ...]:
    """The features ``command`` needs of its ``role`` cluster (with ``acl_sync``: the ACL sync's too, for
    the commands that run the topic sync)."""
    if command not in NEEDS:
        raise ValueError(f"no broker needs are known for the command {command!r}")
    found = NEEDS[command].get(role, ())
    if acl_sync and command in ("run", "migrate", "switchover"):
        found = found + ACL_SYNC[role]
    return found


# Markers that tell a release from an answer: (release, api key, first max version that shows it).
# Each is the first release with that API (or that version of it), read from the request schemas.
MARKERS: tuple[tuple[str, int, int], ...] = (
    ("0.10.0", 18, 0),    # ApiVersions
    ("0.10.1", 19, 0),    # CreateTopics
    ("0.11", 28, 0),      # TxnOffsetCommit
    ("1.0", 37, 0),       # CreatePartitions
    ("1.1", 42, 0),       # DeleteGroups
    ("2.2", 43, 0),       # ElectLeaders
    ("2.3", 44, 0),       # IncrementalAlterConfigs
    ("2.4", 47, 0),       # OffsetDelete
    ("2.5", 28, 3),       # TxnOffsetCommit v3 (KIP-447)
    ("2.6", 48, 0),       # DescribeClientQuotas
    ("2.7", 50, 0),       # DescribeUserScramCredentials
    ("2.8", 60, 0),       # DescribeCluster (and DescribeProducers: the 2.8.2 answer has it)
    ("3.0", 65, 0),       # DescribeTransactions (KIP-664: not in 2.8.2's answer, in 3.9.1's)
)


PRODUCE, METADATA = 0, 3   # API keys every broker's client listener serves


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


def release_of(table: ApiTable) -> str:
    """What the answer says of the broker's Kafka release, as far as the markers tell: 'Kafka 2.4 (not 2.5:
    no TxnOffsetCommit v3)', or 'Kafka 3.0 or newer'."""
    present = [m for m in MARKERS if m[1] in table and table[m[1]][1] >= m[2]]
    if not present:
        return "a Kafka release older than 0.10 (no ApiVersions)"
    newest = max(present, key=lambda m: _release_key(m[0]))[0]
    above = sorted((m for m in MARKERS if _release_key(m[0]) > _release_key(newest)), key=lambda m: _release_key(m[0]))
    if not above:
        return f"Kafka {newest} or newer"
    release, key, version = above[0]
    return f"Kafka {newest} (its ApiVersions lack {_api_text(key, version)}, new in {release})"


def _api_text(key: int, version: int) -> str:
    names = {f.key: f.api for f in (*TARGET, *ACL_SYNC["source"], *ACL_SYNC["target"])}
    names.update({42: "DeleteGroups", 43: "ElectLeaders", 47: "OffsetDelete", 48: "DescribeClientQuotas",
                  50: "DescribeUserScramCredentials", 19: "CreateTopics", 18: "ApiVersions"})
    name = names.get(key, f"API key {key}")
    return f"{name} v{version}" if version else name


@dataclass(frozen=True)
class Verdict:
    """One cluster's verdict for one command: ``refusal`` ("" when the command may run) and, per
    degradable feature it lacks, what is left out."""
    cluster_label: str
    release: str
    refusal: str = ""
    left_out: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.refusal


def check(table: ApiTable, command: str, role: str, cluster_label: str, acl_sync: bool = False) -> Verdict:
    """The verdict of one broker answer (``table``) for ``command`` on the ``role`` cluster ``cluster_label``."""
    if PRODUCE not in table and METADATA not in table:
        # A KRaft controller's listener answers ApiVersions with the controller's own APIs (Fetch among
        # them, for the Raft log; never Produce or Metadata, which every broker serves since 0.8): the
        # address is wrong, not the brokers old (a configuration error, like any bootstrap typo).
        return Verdict(cluster_label, "a KRaft controller (no Produce or Metadata API)", refusal=(
            f"`eosmirror {command}` refused: the {cluster_label} answers but serves no Kafka client API (its "
            f"ApiVersions list neither Produce nor Metadata). Is it a KRaft controller port? Point "
            f"bootstrap.servers at the brokers' client listener. Nothing was written."))
    release = release_of(table)
    wanted = needs(command, role, acl_sync)
    missing = [f for f in wanted if not f.met_by(table) and not f.left_out]
    degraded = tuple(dict.fromkeys(f"{f.left_out}: {f.name} needs {f.minimum}; {_served(table, f)}"
                                   for f in wanted if not f.met_by(table) and f.left_out))
    if not missing:
        return Verdict(cluster_label, release, left_out=degraded)
    lines = [f"{f.name} needs {f.minimum}; {_served(table, f)}" for f in missing]
    floor = max((f.release for f in missing), key=_release_key)
    refusal = (f"`eosmirror {command}` refused: the {cluster_label} answers as {release}, and {command} needs Kafka "
               f"{floor} or newer there:\n" + "\n".join(f"  {line}" for line in lines) +
               "\nNothing was written. Upgrade that cluster's brokers (docs/versions.md#minimums names what each "
               "command needs of each cluster).")
    return Verdict(cluster_label, release, refusal=refusal, left_out=degraded)


def _served(table: ApiTable, feature: Feature) -> str:
    if feature.key not in table:
        return f"the broker does not serve {feature.api} at all"
    low, high = table[feature.key]
    return f"the broker serves {feature.api} v{low}-v{high}"
