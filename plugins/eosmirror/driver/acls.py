"""Copy topic ACLs of mirrored topics to the target (``sync_topic_acls``; decisions in core/aclcopy).

Best effort by design, like MM2: a missing permission or brokers without an authorizer are reported
as warnings naming the principal, the operation and the cluster, and the run goes on.

The permissions are checked up front with KIP-430 authorized operations (DescribeCluster with
include_authorized_operations): DescribeAcls needs Describe on the CLUSTER resource, CreateAcls needs
Alter on it. Read in apache/kafka (core/src/main/scala/kafka/server/): AclApis.scala handleDescribeAcls
calls ``authHelper.authorizeClusterOperation(request, DESCRIBE)`` and handleCreateAcls
``authorizeClusterOperation(request, ALTER)``; AuthHelper.computeDescribeClusterResponse reports the
cluster's authorized operations only when the principal may Describe the cluster, else 0 (no
operations; confluent-kafka then gives None). So an empty answer means neither Describe nor Alter
(Alter implies Describe). With confluent-kafka 2.x on Kafka 4.3 SASL brokers, describe_acls by a
principal without Describe was seen to return an EMPTY list instead of an authorization error, so
"no permission" is told from "no ACLs" by this explicit check, never by the listing's emptiness.
"""

from __future__ import annotations

import logging
from typing import Any

from eosmirror.core import aclcopy
from eosmirror.kafka import calls
from eosmirror.kafka.cluster import Cluster

log = logging.getLogger(__name__)

_NEEDS = {"source": ("DESCRIBE", "Describe", "list the topic ACLs (DescribeAcls)"),
          "target": ("ALTER", "Alter", "create the topic ACLs (CreateAcls)")}


def _principal(cluster: Cluster) -> str:
    user = cluster.settings.get("sasl.username")
    return f"User:{user}" if user else "the mirror's principal"


def _cluster_operations(cluster: Cluster) -> set[str]:
    """The principal's operations on the CLUSTER resource (none at all without Describe on it)."""
    found = calls.wait(cluster.admin.describe_cluster(include_authorized_operations=True,
                                                      request_timeout=calls.DEFAULT_TIMEOUT),
                       "describe the cluster", cluster.label)
    ops = found.authorized_operations
    return {op.name for op in ops or ()}


def permission_problems(source: Cluster, target: Cluster) -> list[str]:
    """One warning per missing cluster permission; [] when both are there."""
    problems = []
    for cluster in (source, target):
        op, name, why = _NEEDS[cluster.role]
        have = _cluster_operations(cluster)
        if op not in have and "ALL" not in have:
            problems.append(f"topic ACLs not synced: {_principal(cluster)} lacks {name} on the {cluster.role} "
                            f"cluster (resource CLUSTER kafka-cluster) at {cluster.label}, needed to {why}; grant "
                            f"it or set sync_topic_acls: false. The mirror goes on without ACL sync")
    return problems


def _source_acls(source: Cluster) -> list[aclcopy.TopicAcl]:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    # None matches any name, principal and host (AclBindingFilter's documented use); its annotations,
    # inherited from AclBinding, say str.
    every_topic_acl = AclBindingFilter(
        ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None,  # type: ignore[arg-type]
        AclOperation.ANY, AclPermissionType.ANY)
    bindings = calls.wait(source.admin.describe_acls(every_topic_acl, request_timeout=calls.DEFAULT_TIMEOUT),
                          "list topic ACLs", source.label, "Describe on the source cluster")
    return [aclcopy.TopicAcl(topic=b.name, pattern=b.resource_pattern_type.name, principal=b.principal, host=b.host,
                             operation=b.operation.name, permission=b.permission_type.name) for b in bindings]


def _create(target: Cluster, acls: list[aclcopy.TopicAcl]) -> None:
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    bindings = [AclBinding(ResourceType.TOPIC, a.topic, ResourcePatternType.LITERAL, a.principal, a.host,
                           AclOperation[a.operation], AclPermissionType[a.permission]) for a in acls]
    for future in target.admin.create_acls(bindings, request_timeout=calls.DEFAULT_TIMEOUT).values():
        calls.wait(future, "create topic ACLs", target.label, "Alter on the target cluster")


def sync(pairs: list[Any], source: Cluster, target: Cluster) -> tuple[int, list[str]]:
    """(ACLs written to the target, warnings). Creating an ACL that exists is a no-op on the broker."""
    try:
        problems = permission_problems(source, target)
        if problems:
            return 0, problems
        wanted, skipped = aclcopy.to_target(_source_acls(source), {p.source: p.target for p in pairs})
        if wanted:
            _create(target, wanted)
        return len(wanted), skipped
    except Exception as exc:  # noqa: BLE001 - reported, the run goes on
        if calls.error_name(exc) == "SECURITY_DISABLED" or "SECURITY_DISABLED" in str(exc):
            return 0, [f"topic ACLs not synced: the source brokers have no authorizer, so no ACLs ({exc}); set "
                       f"sync_topic_acls: false to silence this"]
        return 0, [f"topic ACLs not synced: {exc}. The mirror goes on without ACL sync"]
