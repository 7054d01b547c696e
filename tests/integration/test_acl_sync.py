"""sync_topic_acls on SASL brokers with ACLs enforced: a source topic ACL shows up on the target,
downgraded as MirrorMaker 2 does; without the permissions it needs, the run reports it and goes on.

Own secure clusters on fixed ports 19892/19942 (+1 for their controllers), apart from test_security.py's
pair and the default test clusters, so both modules can run side by side (tests/unit/test_test_ports.py)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from eosmirror import driver
from tests.support.security import LITERAL, fresh_mirror, grant, least_privilege, run, secure_pair
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration
CLUSTER = ResourceType.BROKER   # the CLUSTER resource "kafka-cluster"


@pytest.fixture(scope="module")
def secure():
    # Fresh storage: cluster ACLs granted by an earlier run of this test would hide the warnings.
    with secure_pair("aclcopy", 19892, 19942, fresh=True) as clusters:
        yield clusters


def topic_acls(conf, topic):
    admin = AdminClient(conf)
    found = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None,
                                                 AclOperation.ANY, AclPermissionType.ANY)).result(30)
    return sorted((b.principal, b.operation.name, b.permission_type.name) for b in found
                  if not b.principal.endswith(":mirror"))


def test_topic_acls_are_copied_downgraded_or_reported(secure, monkeypatch):
    name, topic, m, _ = fresh_mirror(secure, monkeypatch, sync_topic_acls=True)
    admin = AdminClient(secure["source"].client_config())
    for future in admin.create_acls([
            AclBinding(ResourceType.TOPIC, topic, LITERAL, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
            AclBinding(ResourceType.TOPIC, topic, LITERAL, "User:bob", "*", AclOperation.WRITE, AclPermissionType.ALLOW),
            AclBinding(ResourceType.TOPIC, topic, LITERAL, "User:carol", "*", AclOperation.ALL, AclPermissionType.ALLOW),
            AclBinding(ResourceType.TOPIC, topic, LITERAL, "User:mallory", "*", AclOperation.READ,
                       AclPermissionType.DENY)]).values():
        future.result(30)
    grant(secure, least_privilege(name, topic))

    # Without Describe on the source cluster nor Alter on the target one: both reported by name, the
    # mirror copies its records all the same and no ACL reaches the target.
    first = run(m)
    assert first["status"] == "ok" and first["records"] == 20, first
    assert "topic ACLs not synced: User:mirror lacks Describe on the source cluster" in first["topic_sync"], first
    assert "User:mirror lacks Alter on the target cluster" in first["topic_sync"], first
    assert topic_acls(secure["target"].client_config(), topic) == []

    cluster_rights = [("source", CLUSTER, "kafka-cluster", LITERAL, AclOperation.DESCRIBE, ""),
                      ("target", CLUSTER, "kafka-cluster", LITERAL, AclOperation.ALTER, "")]
    grant(secure, cluster_rights[:1])
    second = driver.MirrorRun(m).preflight()
    acl_warnings = [w for w in second["warnings"] if "ACL" in w]
    assert len(acl_warnings) == 1 and "User:mirror lacks Alter on the target cluster" in acl_warnings[0], second
    assert topic_acls(secure["target"].client_config(), topic) == []

    grant(secure, cluster_rights[1:])
    third = driver.MirrorRun(m).preflight()
    assert not [w for w in third["warnings"] if "ACL" in w], third
    # alice, carol and mallory, plus the mirror's own Read and DescribeConfigs on the source topic (MM2
    # copies those too); bob's ALLOW WRITE is not copied.
    assert "synced 5 topic ACL(s)" in third["topic_sync"], third
    # ACL changes reach the authorizer through the metadata log: the broker answers with them soon after
    copied = [("User:alice", "READ", "ALLOW"), ("User:carol", "READ", "ALLOW"), ("User:mallory", "READ", "DENY")]
    wait_for("the copied topic ACLs on the target", lambda: (
        (seen := topic_acls(secure["target"].client_config(), topic)) == copied, seen), 15)
