"""Topic ACLs copied to the target like MirrorMaker 2 does: no ALLOW WRITE, ALLOW ALL -> READ, renamed."""

from eosmirror.core.aclcopy import TopicAcl, to_target


def acl(topic, op, permission="ALLOW", pattern="LITERAL", principal="User:alice"):
    return TopicAcl(topic, pattern, principal, "*", op, permission)


def test_write_dropped_all_downgraded_deny_kept_and_renamed():
    found = [acl("orders", "READ"), acl("orders", "WRITE", principal="User:bob"),
             acl("orders", "ALL", principal="User:carol"), acl("orders", "READ", "DENY", principal="User:mallory"),
             acl("other", "READ"), acl("orders", "DESCRIBE")]
    wanted, skipped = to_target(found, {"orders": "dc1.orders"})
    assert wanted == [acl("dc1.orders", "READ"), acl("dc1.orders", "READ", principal="User:carol"),
                      acl("dc1.orders", "READ", "DENY", principal="User:mallory"), acl("dc1.orders", "DESCRIBE")]
    assert skipped == []


def test_prefixed_acls_covering_mirrored_topics_are_reported_not_copied():
    wanted, skipped = to_target([acl("ord", "READ", pattern="PREFIXED")], {"orders": "orders"})
    assert wanted == [] and "PREFIXED ACL on 'ord'" in skipped[0]


def test_the_literal_wildcard_is_reported_not_copied():
    wanted, skipped = to_target([acl("*", "READ")], {"orders": "orders"})
    assert wanted == [] and "LITERAL ACL on '*'" in skipped[0]


def test_missing_cluster_permissions_are_named_with_principal_and_cluster():
    """The broker gives no operations at all without Describe on the cluster (confluent-kafka: None)."""
    from concurrent.futures import Future
    from types import SimpleNamespace

    from confluent_kafka.admin import AclOperation

    from eosmirror.driver import acls

    def cluster(role, ops):
        done = Future()
        done.set_result(SimpleNamespace(authorized_operations=ops))
        admin = SimpleNamespace(describe_cluster=lambda **kwargs: done)
        return SimpleNamespace(role=role, settings={"sasl.username": "mirror", "sasl.password": "hidden"},
                               label=f"{role} cluster (127.0.0.1:1)", admin=admin)

    problems = acls.permission_problems(cluster("source", None), cluster("target", [AclOperation.DESCRIBE]))
    assert len(problems) == 2 and all("hidden" not in p for p in problems)
    assert "User:mirror lacks Describe on the source cluster" in problems[0]
    assert "User:mirror lacks Alter on the target cluster" in problems[1]
    assert acls.permission_problems(cluster("source", [AclOperation.DESCRIBE]),
                                    cluster("target", [AclOperation.ALTER, AclOperation.DESCRIBE])) == []
