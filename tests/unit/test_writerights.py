"""Write rights move with the role: who can write a topic, what a switch grants, what reverse takes away
and how it is given back (core/writerights.py, pure), and how a switch says it could not move them."""

from pathlib import Path

import pytest

from eosmirror import drcommands
from eosmirror.core import config
from eosmirror.core import writerights as rules
from eosmirror.core.aclcopy import TopicAcl
from eosmirror.core.errors import AuthorizationError, ConfigError, TargetGuardError
from eosmirror.core.mirrorstate import MirrorState, Phase
from eosmirror.core.naming import ReplicationPolicy
from eosmirror.core.transitions import Command
from eosmirror.driver import switchover
from eosmirror.driver.transition import Transition


def acl(topic, principal, op="WRITE", permission="ALLOW", pattern="LITERAL", host="*"):
    return TopicAcl(topic, pattern, principal, host, op, permission)


def who(found):
    return sorted((w.topic, w.principal) for w in found)


def test_literal_prefixed_and_wildcard_grants_write_unless_denied():
    acls = [acl("orders", "User:app"), acl("ord", "User:pre", pattern="PREFIXED"), acl("*", "User:any", op="ALL"),
            acl("orders", "User:reader", op="READ"), acl("payments", "User:other"),
            acl("orders", "User:blocked"), acl("orders", "User:blocked", permission="DENY"),
            acl("orders", "User:mirror")]
    assert who(rules.writers(acls, ["orders"], own=["User:mirror"])) == [
        ("orders", "User:any"), ("orders", "User:app"), ("orders", "User:pre")]


def test_a_deny_for_everyone_or_from_another_host_decides_as_the_authorizer_does():
    acls = [acl("orders", "User:app", host="10.0.0.1"), acl("orders", "User:b"),
            acl("orders", "User:app", permission="DENY", host="10.0.0.2"),
            acl("or", "User:*", permission="DENY", pattern="PREFIXED", op="ALL")]
    assert rules.writers(acls, ["orders"]) == []
    assert who(rules.writers(acls[:3], ["orders"])) == [("orders", "User:app"), ("orders", "User:b")]


def test_a_topic_no_binding_names_is_open_when_everyone_is_allowed_without_acls():
    acls = [acl("orders", "User:mirror"), acl("pay", "User:x", pattern="PREFIXED", op="READ")]
    assert rules.unguarded(acls, ["orders", "payments", "stock"]) == ["stock"]


def test_grants_are_literal_writes_on_the_renamed_mirrored_topics_only():
    policy = ReplicationPolicy("prefix", "dc1")
    target_of = {t: policy.target_topic(t) for t in ("orders", "order-lines")}
    source = [acl("orders", "User:app", host="10.0.0.9"), acl("order", "User:batch", op="ALL", pattern="PREFIXED"),
              acl("orders", "User:mirror", op="READ"), acl("orders", "User:src-mirror"),
              acl("other", "User:app")]
    granted = rules.grants(source, target_of, own=["User:src-mirror"])
    assert sorted((a.topic, a.principal, a.host, a.operation, a.permission, a.pattern) for a in granted) == [
        ("dc1.order-lines", "User:batch", "*", "WRITE", "ALLOW", "LITERAL"),
        ("dc1.orders", "User:app", "10.0.0.9", "WRITE", "ALLOW", "LITERAL"),
        ("dc1.orders", "User:batch", "*", "WRITE", "ALLOW", "LITERAL")]


def test_a_plan_finds_what_is_there_already():
    want = [acl("orders", "User:app"), acl("orders", "User:b")]
    first = rules.plan([], create=want)
    assert first.create == tuple(want) and not first.empty
    again = rules.plan(want, create=want)
    assert again.empty and again.present == tuple(want)
    gone = rules.plan([], delete=want)
    assert gone.empty and gone.absent == tuple(want)
    assert rules.plan(want, delete=want[:1]).delete == (want[0],)
    assert first.by_hand()[0] == ("add: principal User:app, host *, operation WRITE, permission ALLOW, resource "
                                  "TOPIC 'orders', pattern LITERAL")


def test_takeaway_removes_literal_writes_denies_the_others_and_names_grants_to_everyone():
    old = [acl("orders", "User:app"), acl("orders", "User:ops", op="ALL"), acl("ord", "User:batch", pattern="PREFIXED"),
           acl("orders", "User:reverse"), acl("*", "User:*"), acl("orders", "User:reader", op="READ")]
    t = rules.takeaway(old, ["orders"], keep=["User:reverse"])
    assert t.remove == (acl("orders", "User:app"),)
    assert t.deny == (acl("orders", "User:ops", permission="DENY"), acl("orders", "User:batch", permission="DENY"))
    assert [w.principal for w in t.left] == ["User:*"]
    # Applied, the principals it could take the right from no longer write; the grant to everyone stays.
    after = [a for a in old if a not in t.remove] + list(t.deny)
    assert who(rules.writers(after, ["orders"], own=["User:reverse"])) == [("orders", "User:*")]
    assert rules.takeaway(after, ["orders"], keep=["User:reverse"]).changes() == []


def test_give_back_undoes_exactly_the_recorded_changes_on_one_cluster():
    t = rules.takeaway([acl("orders", "User:app"), acl("orders", "User:ops", op="ALL")], ["orders"], ["User:rev"])
    granted = [rules.RightsChange(rules.NEW_PRIMARY, rules.GRANTED, acl("orders", "User:app"))]
    recorded = rules.merged(granted, t.changes(), t.changes())
    assert len(recorded) == 3
    create, delete = rules.give_back(recorded, rules.OLD_SOURCE)
    assert create == [acl("orders", "User:app")] and delete == [acl("orders", "User:ops", permission="DENY")]
    assert rules.give_back(recorded, rules.NEW_PRIMARY) == ([], [acl("orders", "User:app")])
    assert rules.without(recorded, rules.OLD_SOURCE) == tuple(granted)


def test_the_state_record_keeps_the_changes():
    changes = (rules.RightsChange(rules.OLD_SOURCE, rules.REMOVED, acl("orders", "User:app", host="10.0.0.1")),)
    state = MirrorState(Phase.REVERSED, 1, "cli:me", note="n", rights=changes)
    assert MirrorState.decode(state.encode()) == state
    assert MirrorState.decode(MirrorState(Phase.PROMOTED, 1, "x").encode()).rights == ()
    assert "removed on the old source: principal User:app, host 10.0.0.1" in changes[0].line()


def test_the_principal_comes_from_the_sasl_username():
    assert rules.principal_of({"sasl.username": "mirror"}) == "User:mirror"
    assert rules.principal_of({"bootstrap.servers": "x"}) is None


def _mirror(**fields):
    raw = {"name": "m", "source": {"local": "source"}, "target": {"local": "target"}, "topics": ["orders"], **fields}
    return config.parse({"mirrors": [raw]}, Path("mirrors.yaml")).mirrors[0]


def test_target_guard_defaults_to_report_and_a_bad_value_names_the_field():
    assert _mirror().target_guard == "report"
    assert _mirror(target_guard="refuse").target_guard == "refuse"
    with pytest.raises(ConfigError, match=r"field `target_guard`.*report, refuse"):
        _mirror(target_guard="block")


def test_a_switchover_whose_write_rights_did_not_move_is_no_bare_safe():
    said: list[str] = []
    run = Transition(Command.SWITCHOVER, "m", said.append, by="cli:ops")
    out = switchover.SwitchoverOutcome("m", safe=True, run=run)
    out.rights.lines.append("present already: principal User:a, host *, operation WRITE, ...")
    assert out.exit_code == 0 and out.verdict() == switchover.SAFE

    def refused():
        raise AuthorizationError(f"User:mirror lacks Alter on the target cluster: {rules.CANNOT_WRITE_YET}. add: "
                                 f"principal User:app, host *, operation WRITE")

    run.step(rules.GRANT_STEP, refused, optional="the switch is recorded without it")
    assert out.exit_code == 6
    assert out.verdict().startswith(f"zero loss, but {rules.CANNOT_WRITE_YET}: {rules.GRANT_STEP} DID NOT RUN "
                                    f"(User:mirror lacks Alter")
    text = drcommands.text_of(out)
    assert text[0] == "  write rights: present already: principal User:a, host *, operation WRITE, ..."
    assert text[1] == out.verdict() and any("step grant write rights on the target: failed" in line for line in text)


def test_mirror_principals_are_validated_and_join_the_sasl_usernames_as_the_mirrors_own():
    assert _mirror().mirror_principals == ()
    named = _mirror(mirror_principals=["User:CN=mirror,OU=ops", "User:CN=mirror,OU=ops", "User:oauth-mirror"])
    assert named.mirror_principals == ("User:CN=mirror,OU=ops", "User:oauth-mirror")
    assert named.reverse().mirror_principals == named.mirror_principals      # the reverse mirror is the same client
    for bad in (["mirror"], ["User:*"], ["User:"], [""], "User: x", [3], {"User": "a"}):
        with pytest.raises(ConfigError, match=r"field `mirror_principals`") as refused:
            _mirror(mirror_principals=bad)
        assert refused.value.exit_code == 2
    assert rules.own_principals(named.mirror_principals, {"sasl.username": "mirror"}, {"sasl.username": "mirror"},
                                {}) == ["User:CN=mirror,OU=ops", "User:oauth-mirror", "User:mirror"]
    # a certificate-authenticated mirror's own grant is no other writer once named
    grants = [acl("orders", "User:CN=mirror,OU=ops"), acl("orders", "User:app")]
    assert who(rules.writers(grants, ["orders"], rules.own_principals(named.mirror_principals, {}))) == [
        ("orders", "User:app")]
    assert who(rules.writers(grants, ["orders"], rules.own_principals((), {}))) == [
        ("orders", "User:CN=mirror,OU=ops"), ("orders", "User:app")]


def test_super_users_are_listed_per_principal_with_their_brokers_the_mirrors_own_left_out():
    brokers = {"2": "User:admin;User:mirror", "1": "User:admin; User:ops ;", "3": ""}
    assert rules.super_users(brokers, ["User:mirror"]) == [
        "User:admin (super user on broker(s) 1, 2: ACLs cannot stop it writing the mirrored topics)",
        "User:ops (super user on broker(s) 1: ACLs cannot stop it writing the mirrored topics)"]
    assert rules.super_users({"1": ""}) == []
    hidden = rules.super_users({"1": None, "2": None})
    assert len(hidden) == 1 and hidden[0].startswith("the super users of super.users on broker(s) 1, 2 (set, its "
                                                     "value hidden by the brokers")
    assert rules.allow_everyone({"1": "true", "2": None, "3": "false"}) == (["1"], ["2"])


def test_target_guard_refuse_lists_super_users_but_never_refuses_for_them(monkeypatch):
    from eosmirror.core.readiness import NOT_READY, WARN, writers_check
    from eosmirror.driver import writerights

    supers = rules.super_users({"1": "User:admin"})
    refuse = _mirror(target_guard="refuse", mirror_principals=["User:CN=mirror"])
    seen = {}

    def found(target, topics, configured):
        seen["configured"] = configured
        return writerights.TargetWriters(super_users=list(supers))
    monkeypatch.setattr(writerights, "target_writers", found)
    assert writerights.guard(refuse, None, ["orders"]) == supers and seen["configured"] == ("User:CN=mirror",)
    monkeypatch.setattr(writerights, "target_writers", lambda *_: writerights.TargetWriters(
        writers=rules.writers([acl("orders", "User:app")], ["orders"]), super_users=list(supers)))
    with pytest.raises(TargetGuardError) as refused:
        writerights.guard(refuse, None, ["orders"])
    assert "User:app" in str(refused.value) and "super user" not in str(refused.value)
    assert writers_check([], [], "", supers).verdict == WARN
    assert writers_check([], [], "", (), "DescribeConfigs missing").verdict == WARN
    assert writers_check(["User:app can write orders"], [], "", supers).verdict == NOT_READY
