from eosmirror.core import naming


def test_identity_and_prefix_policies_round_trip():
    assert naming.ReplicationPolicy("identity").target_topic("orders") == "orders"
    prefix = naming.ReplicationPolicy("prefix", "dc1")
    assert prefix.target_topic("orders") == "dc1.orders"
    assert prefix.source_topic("dc1.orders") == "orders"


def test_internal_and_own_topics_are_never_selected():
    topics = ["__consumer_offsets", "__transaction_state", "mm2-offset-syncs.a.internal", "connect-configs-internal",
              "eosmirror-offset-syncs.m.internal", "eosmirror-state.m.internal", "heartbeats", "a.heartbeats",
              "orders", "orders.replica"]
    assert naming.select_topics(topics, (".*",), ()) == ["orders"]


def test_include_exclude_are_full_matches_and_sorted():
    topics = ["orders", "orders-eu", "payments", "xorders"]
    assert naming.select_topics(topics, ("orders.*", "payments"), ("orders-eu",)) == ["orders", "payments"]


def test_cycle_guard_skips_copies_that_came_from_the_target():
    assert naming.select_topics(["dc2.orders", "dc3.orders", "orders"], (".*",), (), target_alias="dc2") == [
        "dc3.orders", "orders"]


def test_transactional_ids_are_stable_per_slot():
    assert naming.slot_transactional_ids("eosmirror", "m", 3) == ["eosmirror.m.0", "eosmirror.m.1", "eosmirror.m.2"]
    assert naming.planner_transactional_id("p", "m") == "p.m.planner"


def test_separator_is_mm2s_replication_policy_separator():
    policy = naming.ReplicationPolicy("prefix", "dc1", "_")
    assert policy.target_topic("orders") == "dc1_orders" and policy.source_topic("dc1_orders") == "orders"
    assert naming.select_topics(["dc2_orders", "dc2.orders"], (".*",), (), "dc2", "_") == ["dc2.orders"]
