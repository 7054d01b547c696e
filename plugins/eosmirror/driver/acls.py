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
from eosmirror.core.errors import EosMirrorError
from eosmirror.core.writerights import principal_of
from eosmirror.kafka import calls
from eosmirror.kafka.cluster import Cluster

log = logging.getLogger(__name__)

_NEEDS = {"source": ("DESCRIBE", "Describe", "list the topic ACLs (DescribeAcls)"),
          "target": ("ALTER", "Alter", "create the topic ACLs (CreateAcls)")}


def principal(cluster: Cluster) -> str:
    """The principal the mirror's client authenticates as on ``cluster``, for messages."""
    return principal_of(cluster.settings) or "the mirror's principal"


def cluster_operations(cluster: Cluster) -> set[str]:
    """The principal's operations on the CLUSTER resource (none at all without Describe on it)."""
    found = calls.wait(cluster.admin.describe_cluster(include_authorized_operations=True,
                                                      request_timeout=calls.DEFAULT_TIMEOUT),
                       "describe the cluster", cluster.label)
    ops = found.authorized_operations
    return {op.name for op in ops or ()}


def may(cluster: Cluster, operation: str) -> bool:
    """The principal has ``operation`` (or All) on the CLUSTER resource."""
    have = cluster_operations(cluster)
    return operation in have or "ALL" in have


def permission_problems(source: Cluster, target: Cluster) -> list[str]:
    """One warning per missing cluster permission; [] when both are there."""
    problems = []
    for cluster in (source, target):
        op, name, why = _NEEDS[cluster.role]
        if not may(cluster, op):
            problems.append(f"topic ACLs not synced: {principal(cluster)} lacks {name} on the {cluster.role} "
                            f"cluster (resource CLUSTER kafka-cluster) at {cluster.label}, needed to {why}; grant "
                            f"it or set sync_topic_acls: false. The mirror goes on without ACL sync")
    return problems


class NoAuthorizerError(EosMirrorError):
    """The cluster has no authorizer (SECURITY_DISABLED): no ACL applies, every principal may do anything."""


def list_topic_acls(cluster: Cluster) -> list[aclcopy.TopicAcl]:
    """Every TOPIC binding of the cluster (DescribeAcls: Describe on the cluster). NoAuthorizerError on a
    cluster without an authorizer."""
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
    try:
        bindings = cluster.admin.describe_acls(every_topic_acl, request_timeout=calls.DEFAULT_TIMEOUT).result(
            timeout=calls.DEFAULT_TIMEOUT)
    except Exception as exc:  # noqa: BLE001 - translated below
        if calls.error_name(exc) == "SECURITY_DISABLED" or "SECURITY_DISABLED" in str(exc):
            raise NoAuthorizerError(f"{cluster.label}: the brokers have no authorizer ({calls.error_text(exc)})"
                                    ) from None
        raise calls.translate(exc, "list topic ACLs", cluster.label,
                              f"Describe on the {cluster.role} cluster") from None
    if not bindings and _without_authorizer(cluster):
        raise NoAuthorizerError(f"{cluster.label}: the brokers have no authorizer (authorizer.class.name is empty)")
    return [aclcopy.TopicAcl(topic=b.name, pattern=b.resource_pattern_type.name, principal=b.principal, host=b.host,
                             operation=b.operation.name, permission=b.permission_type.name) for b in bindings]


def broker_settings(cluster: Cluster, names: tuple[str, ...]) -> dict[str, dict[str, str | None]]:
    """Per broker id, the values of the broker configs ``names`` as each broker reports them (DescribeConfigs on
    every broker: DescribeConfigs on the cluster); a name the broker does not report is left out. None: the
    broker reports the setting but hides its value. Kafka hides every setting its broker config does not define
    as sensitive, and the authorizer's (``super.users``, ``allow.everyone.if.no.acl.found``) are such: seen on
    Kafka 4.3 with StandardAuthorizer, both set in server.properties, both reported with a null value."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    nodes = calls.wait(cluster.admin.describe_cluster(request_timeout=calls.DEFAULT_TIMEOUT), "describe the cluster",
                       cluster.label).nodes
    resources = [ConfigResource(ResourceType.BROKER, str(n.id)) for n in nodes]
    found = {}
    for resource, future in cluster.admin.describe_configs(resources, request_timeout=calls.DEFAULT_TIMEOUT).items():
        configs = calls.wait(future, f"read the brokers' {', '.join(names)}", cluster.label,
                             f"DescribeConfigs on the {cluster.role} cluster")
        found[resource.name] = {n: None if configs[n].value is None else str(configs[n].value)
                                for n in names if n in configs}
    return found


def _without_authorizer(cluster: Cluster) -> bool:
    """The brokers report no ``authorizer.class.name`` (an empty ACL listing is then no permission problem: there
    is no authorizer, and confluent-kafka 2.x was seen to list [] instead of SECURITY_DISABLED from Kafka 4.3).
    False when the configs cannot be read (the caller tells an empty listing apart by the cluster permissions)."""
    try:
        brokers = broker_settings(cluster, ("authorizer.class.name",))
    except EosMirrorError:
        return False
    return bool(brokers) and not any(b.get("authorizer.class.name") for b in brokers.values())


def _bindings(acls: list[aclcopy.TopicAcl]) -> list[Any]:
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    return [AclBinding(ResourceType.TOPIC, a.topic, ResourcePatternType[a.pattern], a.principal, a.host,
                       AclOperation[a.operation], AclPermissionType[a.permission]) for a in acls]


def create_acls(cluster: Cluster, acls: list[aclcopy.TopicAcl]) -> None:
    """Create the bindings (CreateAcls: Alter on the cluster). One that exists already is a no-op on the broker."""
    if not acls:
        return
    for future in cluster.admin.create_acls(_bindings(acls), request_timeout=calls.DEFAULT_TIMEOUT).values():
        calls.wait(future, "create topic ACLs", cluster.label, f"Alter on the {cluster.role} cluster")


def delete_acls(cluster: Cluster, acls: list[aclcopy.TopicAcl]) -> None:
    """Delete exactly these bindings (DeleteAcls with one exact filter each: Alter on the cluster)."""
    from confluent_kafka.admin import AclBindingFilter

    if not acls:
        return
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                b.permission_type) for b in _bindings(acls)]
    for future in cluster.admin.delete_acls(filters, request_timeout=calls.DEFAULT_TIMEOUT).values():
        calls.wait(future, "delete topic ACLs", cluster.label, f"Alter on the {cluster.role} cluster")


def sync(pairs: list[Any], source: Cluster, target: Cluster) -> tuple[int, list[str]]:
    """(ACLs written to the target, warnings). Creating an ACL that exists is a no-op on the broker."""
    try:
        problems = permission_problems(source, target)
        if problems:
            return 0, problems
        wanted, skipped = aclcopy.to_target(list_topic_acls(source), {p.source: p.target for p in pairs})
        create_acls(target, wanted)
        return len(wanted), skipped
    except NoAuthorizerError as exc:
        return 0, [f"topic ACLs not synced: the source brokers have no authorizer, so no ACLs ({exc}); set "
                   f"sync_topic_acls: false to silence this"]
    except Exception as exc:  # noqa: BLE001 - reported, the run goes on
        return 0, [f"topic ACLs not synced: {exc}. The mirror goes on without ACL sync"]
