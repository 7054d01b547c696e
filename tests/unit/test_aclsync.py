"""Topic ACLs copied to the target like MirrorMaker 2 does: no ALLOW WRITE, ALLOW ALL -> READ, renamed."""

from eosmirror.core.aclsync import TopicAcl, to_target


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
