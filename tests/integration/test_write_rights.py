"""Write rights move with the role, on SASL brokers with ACLs enforced (StandardAuthorizer), judged by a real
librdkafka producer authenticated as the application principal ``User:app`` (issue #51 items 1 and 2):

- while mirrored, ``app`` may write the source topic and is refused on its target copy (ACL sync drops ALLOW
  WRITE); the run lists a planted wildcard grant among the target's writers, and ``target_guard: refuse``
  stops the run before it copies (exit 7);
- ``eosmirror readiness`` names a LITERAL write grant of another principal on the mirrored target topic and a
  READ ACL the source holds and the target lacks, each planted by the test: NOT READY, exit 9 (what the brokers
  hold judged by Kafka's own AclCommand);
- with DescribeConfigs on the target cluster, the brokers' ``super.users`` are listed as writers no ACL stops
  (Kafka hides its value: said so), and ``target_guard: refuse`` copies all the same;
- a switchover by a mirror without Alter on the target cluster completes with exit 6, naming the exact ACL
  to add and "producers cannot write yet"; once Alter is granted, the switchover again grants it and ``app``
  writes on the target;
- ``reverse`` takes ``app``'s write on the old source away (recorded in the state record): refused there;
- the switch back gives it back (``app`` writes on the old source again), ``resume`` takes the switch's
  grant from the target (refused there again);
- a promotion of a prefix-named mirror turns a PREFIXED source grant into a LITERAL write on the renamed
  target topic, and nothing broader;
- a promotion whose source does not answer (its address a closed port) grants what the latest recorded readiness
  report staged (the report's age said), and ``app`` writes on the target;
- on brokers without an authorizer (the default test clusters) the run says every principal can write, and
  ``target_guard: refuse`` refuses the run (exit 7) before it copies.

Own secure clusters on ports 17520/27520 (+1 for their controllers)."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AclBinding, AclBindingFilter, AclPermissionType, AdminClient, ResourceType

from eosmirror import driver
from eosmirror.core import readiness as readiness_rules
from eosmirror.core import writerights as rules
from eosmirror.core.aclcopy import TopicAcl
from eosmirror.core.errors import EXIT_MAY_HAVE_LOST, EXIT_NOT_READY, EXIT_OTHER_WRITERS, EXIT_STEP_NOT_RUN
from eosmirror.core.mirrorstate import Phase
from eosmirror.driver import promote, readiness, resume, reverse, switchover
from eosmirror.driver.writerights import TargetGuardError
from eosmirror.kafka import state
from eosmirror.kafka.cluster import Cluster
from tests import helpers
from tests.helpers import cli, create_topic, mirror, mirrors_file, producer, read_all
from tests.support.security import (
    GROUP,
    LITERAL,
    PREFIXED,
    TOPIC,
    TXN,
    Op,
    fresh_mirror,
    grant,
    java_topic_acls,
    run,
    secure_pair,
)
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
CLUSTER = ResourceType.BROKER   # the CLUSTER resource "kafka-cluster"
QUIET = switchover.SwitchoverOptions(wait_s=60, quiet_s=1)


@pytest.fixture(scope="module")
def secure():
    with secure_pair("writerights", 17520, 27520, fresh=True) as clusters:
        yield clusters


def mirror_rights(alter_on_target: bool) -> list[tuple]:
    """The mirror may do anything with topics, groups and transactional ids, describe both clusters and change
    the source's ACLs; the target's only when asked."""
    rights = []
    for side in ("source", "target"):
        rights += [(side, TOPIC, "*", LITERAL, Op.ALL, ""), (side, GROUP, "*", LITERAL, Op.ALL, ""),
                   (side, TXN, "*", LITERAL, Op.ALL, ""), (side, CLUSTER, "kafka-cluster", LITERAL, Op.DESCRIBE, "")]
    return rights + [("source", CLUSTER, "kafka-cluster", LITERAL, Op.ALTER, "")] + (
        [("target", CLUSTER, "kafka-cluster", LITERAL, Op.ALTER, "")] if alter_on_target else [])


def write_as_app(secure, side: str, topic: str) -> str:
    """One record produced by ``User:app`` (librdkafka): "written", or the error the broker answered."""
    producer = Producer({**secure[side].client_config("app"), "message.timeout.ms": 8000, "retries": 0})
    reports: list = []
    producer.produce(topic, value=b"from the application", partition=0, on_delivery=lambda err, _: reports.append(err))
    producer.flush(15)
    if not reports:
        return "no delivery report"
    return "written" if reports[0] is None else reports[0].name()


def may_write(secure, side: str, topic: str, budget: float = 20) -> None:
    """A grant reaches the broker's authorizer through the metadata log shortly after the admin call: write
    until written (a refused attempt leaves no record)."""
    wait_for(f"User:app's write on the {side} to be accepted", lambda: (
        (seen := write_as_app(secure, side, topic)) == "written", seen), budget)


def may_not_write(secure, side: str, topic: str, budget: float = 20) -> None:
    """Refused, once the broker's authorizer has no write grant of User:app left (waited on through DescribeAcls,
    which the broker answers from the same data: an attempt meanwhile could land a record)."""
    wait_for(f"User:app's grants on the {side} to be gone", lambda: (
        not (seen := app_write_acls(secure, side, topic)), seen), budget)
    assert write_as_app(secure, side, topic) == "TOPIC_AUTHORIZATION_FAILED"


def app_acl(topic: str) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, topic, LITERAL, "User:app", "*", Op.WRITE, AclPermissionType.ALLOW)


def app_write_acls(secure, side: str, topic: str) -> list:
    admin = AdminClient(secure[side].client_config())
    found = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, topic, LITERAL, "User:app", None, Op.ANY,
                                                 AclPermissionType.ANY)).result(30)
    return sorted((b.operation.name, b.permission_type.name) for b in found)


def readiness_names_the_planted_writer_and_the_missing_read_acl(secure, name, topic, raw, tmp_path) -> str:
    """`eosmirror readiness` on these brokers (issue #51 item 5): a LITERAL ALLOW WRITE of another principal on the
    mirrored target topic and a READ ACL the source holds and the target lacks, each planted here (after the run
    whose ACL sync would have copied the READ), make it NOT READY (exit 9), naming both; Kafka's AclCommand says
    what the brokers hold. Both are taken away again. With DescribeConfigs on the target cluster (granted here,
    kept), the brokers' super users are named too, as writers no ACL stops: that line is returned."""
    grant(secure, [("target", CLUSTER, "kafka-cluster", LITERAL, Op.DESCRIBE_CONFIGS, "")])
    other = AclBinding(ResourceType.TOPIC, topic, LITERAL, "User:other", "*", Op.WRITE, AclPermissionType.ALLOW)
    reader = AclBinding(ResourceType.TOPIC, topic, LITERAL, "User:reader", "*", Op.READ, AclPermissionType.ALLOW)
    began = time.monotonic()
    planted = {"target": other, "source": reader}
    admins = {side: AdminClient(secure[side].client_config()) for side in planted}
    for side, binding in planted.items():
        for future in admins[side].create_acls([binding]).values():
            future.result(30)
    for side, binding in planted.items():
        wait_for(f"the planted {binding.principal} grant to be listed on the {side}", lambda: (
            bool(seen := admins[side].describe_acls(_filter(binding)).result(30)), seen), 15)
    done = cli("readiness", name, "--config", str(mirrors_file(tmp_path / "mirrors.yaml", [raw])), "--json",
               timeout=120)
    held = java_topic_acls(secure, {"source": topic, "target": topic})
    assert done.returncode == EXIT_NOT_READY, done.stdout[-3000:] + done.stderr[-3000:]
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert not [c for c in checks.values() if "could not be checked" in c["reason"]], checks
    named = [w for w in checks["writers"]["figures"]["writers"] if w.startswith(f"User:other from host * can write "
                                                                                 f"{topic} ")]
    assert checks["writers"]["verdict"] == "not ready" and named, checks["writers"]
    # Kafka 4.3 reports super.users (set: User:admin;User:ANONYMOUS) with its value hidden: said so
    (supers,) = checks["writers"]["figures"]["super_users"]
    assert supers.startswith("the super users of super.users on broker(s) 1 (set, its value hidden") and \
        "ACLs cannot stop them" in supers, checks["writers"]
    read_acl = TopicAcl(topic, "LITERAL", "User:reader", "*", "READ", "ALLOW")
    assert checks["drift"]["verdict"] == "not ready", checks["drift"]
    assert checks["drift"]["figures"]["missing_acls"] == [rules.shown(read_acl)], checks["drift"]
    # what the brokers hold, as Kafka's own tool lists it
    assert ("User:reader", "*", "READ", "ALLOW") in held["source"]
    assert not [b for b in held["target"] if b[0] == "User:reader"], held["target"]
    assert ("User:other", "*", "WRITE", "ALLOW") in held["target"]
    assert not [b for b in held["source"] if b[0] == "User:other"], held["source"]
    for side, binding in planted.items():
        for future in admins[side].delete_acls([_filter(binding)]).values():
            future.result(30)
    print(f"readiness on SASL brokers (plant, the CLI, AclCommand on both sides, clean up): "
          f"{time.monotonic() - began:.1f} s")
    return supers


def _filter(b: AclBinding) -> AclBindingFilter:
    return AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                            b.permission_type)


def final_run(m):
    def once():
        mirror_run = driver.MirrorRun(m, driver.RunOptions(final_of_switchover=True))
        return mirror_run.execute(mirror_run.prepare(), driver.run_in_process)
    return once


def steps(outcome) -> dict[str, tuple[str, float]]:
    return {s.name: (s.status, s.seconds) for s in outcome.run.steps}


def test_write_rights_move_with_the_switch_and_others_are_listed(secure, monkeypatch, tmp_path):
    name, topic, m, raw = fresh_mirror(secure, monkeypatch, sync_topic_acls=True)
    source_admin, target_admin = (AdminClient(secure[s].client_config()) for s in ("source", "target"))
    intruder = AclBinding(ResourceType.TOPIC, "*", LITERAL, "User:intruder", "*", Op.WRITE, AclPermissionType.ALLOW)
    for admin, binding in ((source_admin, app_acl(topic)), (target_admin, intruder)):
        for future in admin.create_acls([binding]).values():
            future.result(30)
    grant(secure, mirror_rights(alter_on_target=False))
    b = Cluster.from_settings("target", secure["target"].client_config())
    timings: dict[str, float] = {}

    # While mirrored: the application writes the source only; the run lists the planted wildcard grant.
    first = run(m)
    assert first["status"] == "ok" and first["records"] == 20, first
    print(f"target guard step with ACLs: {first['steps']['target guard']} s")
    assert any(w.startswith(f"User:intruder from host * can write {topic}") and "'*'" in w
               for w in first["writers"]), first["writers"]
    assert not [w for w in first["writers"] if "User:app" in w or "User:mirror" in w], first["writers"]
    assert write_as_app(secure, "source", topic) == "written"
    assert write_as_app(secure, "target", topic) == "TOPIC_AUTHORIZATION_FAILED"
    supers = readiness_names_the_planted_writer_and_the_missing_read_acl(secure, name, topic, raw, tmp_path)
    with pytest.raises(TargetGuardError, match="User:intruder") as refused:
        run(dataclasses.replace(m, target_guard="refuse"))
    assert refused.value.exit_code == EXIT_OTHER_WRITERS and "Nothing was copied" in str(refused.value)
    assert "super user" not in str(refused.value)
    target_admin.delete_acls([AclBindingFilter(intruder.restype, intruder.name, intruder.resource_pattern_type,
                                               intruder.principal, intruder.host, intruder.operation,
                                               intruder.permission_type)])
    wait_for("the intruder's grant to be gone from the run's writers", lambda: (
        not (seen := [w for w in driver.MirrorRun(m).plan().writers if "intruder" in w]), seen), 20)
    # Only the super users are left: listed, never refused (target_guard: refuse copies).
    calm = run(dataclasses.replace(m, target_guard="refuse"))
    assert calm["status"] == "ok" and calm["writers"] == [supers], calm
    print(f"target guard step with ACLs and super.users read: {calm['steps']['target guard']} s")

    # A switchover without Alter on the target cluster: zero loss, but no bare "safe": exit 6 and the ACL to add.
    wrote = write_as_app(secure, "source", topic)     # the last application record before the switch
    assert wrote == "written"
    blocked = switchover.switchover(m, final_run(m), QUIET)
    assert blocked.safe and blocked.exit_code == EXIT_STEP_NOT_RUN, blocked.as_dict()
    verdict = blocked.verdict()
    assert verdict.startswith(f"zero loss, but {rules.CANNOT_WRITE_YET}") and "lacks Alter on the target" in verdict
    assert (f"add: principal User:app, host *, operation WRITE, permission ALLOW, resource TOPIC '{topic}', pattern "
            f"LITERAL") in verdict, verdict
    assert steps(blocked)[rules.GRANT_STEP][0] == "failed"
    assert write_as_app(secure, "target", topic) == "TOPIC_AUTHORIZATION_FAILED"
    recorded = state.read_mirror_state(b, m.name, m.progress_group)
    assert recorded.phase is Phase.SWITCHED_OVER
    assert [(c.side, c.action, c.acl.principal, c.acl.topic) for c in recorded.rights] == [
        (rules.NEW_PRIMARY, rules.GRANTED, "User:app", topic)]

    # Alter granted: the switchover again grants what is missing, and the application writes the target.
    grant(secure, [("target", CLUSTER, "kafka-cluster", LITERAL, Op.ALTER, "")])
    granted = switchover.switchover(m, final_run(m), QUIET)
    assert granted.already and granted.exit_code == 0 and granted.verdict() == switchover.SAFE, granted.as_dict()
    assert any(line.startswith("added: principal User:app") for line in granted.rights.lines), granted.rights.lines
    timings["grant"] = steps(granted)[rules.GRANT_STEP][1]
    may_write(secure, "target", topic)
    again = switchover.switchover(m, final_run(m), QUIET)        # idempotent: found, not granted twice
    assert any(line.startswith("present already: principal User:app") for line in again.rights.lines), again.rights.lines
    assert app_write_acls(secure, "target", topic) == [("WRITE", "ALLOW")]

    # Reverse: the old source is written by the reverse mirror only; what was removed is recorded.
    reversed_ = reverse.reverse(m, reverse.ReverseOptions(settle_s=10))
    assert reversed_.exit_code == 0, reversed_.as_dict()
    timings["take"] = steps(reversed_)[rules.TAKE_STEP][1]
    assert any(line.startswith("removed: principal User:app") for line in reversed_.rights.lines), reversed_.lines()
    may_not_write(secure, "source", topic)
    removed = state.read_mirror_state(b, m.name, m.progress_group).rights
    assert (rules.OLD_SOURCE, rules.REMOVED, "User:app", topic) in [
        (c.side, c.action, c.acl.principal, c.acl.topic) for c in removed], removed
    rerun = reverse.reverse(m, reverse.ReverseOptions(settle_s=10))   # done before: finds it taken, says so
    assert any(line.startswith("absent already: principal User:app") for line in rerun.rights.lines), rerun.lines()
    back = m.reverse()
    copied_back = run(back)
    assert copied_back["status"] == "ok" and "writers" not in copied_back, copied_back

    # The switch back gives the right back on the old source; resume takes the switch's grant from the target.
    switched = switchover.switchover(back, final_run(back), QUIET)
    assert switched.safe and switched.exit_code == 0, switched.as_dict()
    timings["give back"] = steps(switched)[rules.GIVE_BACK_STEP][1]
    may_write(secure, "source", topic)
    resumed = resume.resume(m)
    assert resumed.exit_code == 0 and resumed.state.phase is Phase.MIRRORING, resumed.as_dict()
    timings["take grants"] = steps(resumed)[rules.TAKE_GRANTS_STEP][1]
    assert any(line.startswith("present already: principal User:app") for line in resumed.rights.lines)
    may_not_write(secure, "target", topic)
    assert write_as_app(secure, "source", topic) == "written"
    assert state.read_mirror_state(b, m.name, m.progress_group).rights == ()
    audits = [r for r in state.read_audit(b, m.name, m.progress_group) if r.action == rules.AUDIT_ACTION]
    assert [r.origin for r in audits] == ["switchover", "reverse", "resume"], audits
    assert all("principal User:app" in r.note for r in audits), audits
    a = Cluster.from_settings("source", secure["source"].client_config())
    assert [r.origin for r in state.read_audit(a, back.name, back.progress_group)
            if r.action == rules.AUDIT_ACTION] == ["switch back"]
    print(f"write-rights step timings (s): {timings}")


def test_a_promotion_grants_a_prefixed_source_grant_as_literal_writes_on_the_renamed_topics(secure, monkeypatch):
    name, topic, m, _ = fresh_mirror(secure, monkeypatch, sync_topic_acls=True, replication_policy="prefix",
                                     source_alias="dc1")
    renamed = f"dc1.{topic}"
    grant(secure, mirror_rights(alter_on_target=True))
    prefixed = AclBinding(ResourceType.TOPIC, name, PREFIXED, "User:app", "*", Op.WRITE, AclPermissionType.ALLOW)
    source_admin = AdminClient(secure["source"].client_config())    # kept: its futures die with it
    for future in source_admin.create_acls([prefixed]).values():
        future.result(30)
    assert run(m)["status"] == "ok"
    assert write_as_app(secure, "target", renamed) == "TOPIC_AUTHORIZATION_FAILED"

    promoted = promote.promote(m, source_budget_s=5)
    assert promoted.exit_code == 0 and promoted.state.phase is Phase.PROMOTED, promoted.as_dict()
    added = (f"added: principal User:app, host *, operation WRITE, permission ALLOW, resource TOPIC '{renamed}', "
             f"pattern LITERAL")
    assert promoted.rights is not None and promoted.rights.lines == [added], promoted.rights
    print(f"promote: write-rights step {steps(promoted)[rules.GRANT_STEP][1]} s")
    may_write(secure, "target", renamed)
    assert app_write_acls(secure, "target", renamed) == [("WRITE", "ALLOW")]
    # exactly the mirrored topic: no prefixed grant reaches the target, where it would cover other topics
    target_admin = AdminClient(secure["target"].client_config())
    found = target_admin.describe_acls(AclBindingFilter(
        ResourceType.TOPIC, None, PREFIXED, "User:app", None, Op.ANY, AclPermissionType.ANY)).result(30)
    assert found == []
    assert [c.acl.topic for c in promoted.state.rights] == [renamed]


def test_a_promotion_with_the_source_gone_grants_what_the_latest_readiness_report_staged(secure, monkeypatch):
    name, topic, m, _ = fresh_mirror(secure, monkeypatch, sync_topic_acls=True)
    grant(secure, mirror_rights(alter_on_target=True))
    source_admin = AdminClient(secure["source"].client_config())
    for future in source_admin.create_acls([app_acl(topic)]).values():
        future.result(30)
    assert run(m)["status"] == "ok"
    recorded = readiness.report(m, record=True)         # the readiness DAG's daily report, while the source answers
    staged = {c.name: c for c in recorded.checks}["drift"].figures[readiness_rules.STAGED_FIGURE]
    assert staged == [rules.acl_dict(TopicAcl(topic, "LITERAL", "User:app", "*", "WRITE", "ALLOW"))], staged
    assert write_as_app(secure, "target", topic) == "TOPIC_AUTHORIZATION_FAILED"

    # The source gone for the promotion: its address a closed port (the same path as a dead broker: the
    # promotion's one question to the source is refused, and nothing more is asked of it).
    closed = closed_port()
    gone = dataclasses.replace(m, source=dataclasses.replace(m.source, config={
        **dict(m.source.config or {}), "bootstrap.servers": f"127.0.0.1:{closed}"}))
    promoted = promote.promote(gone, source_budget_s=4)
    assert not promoted.source_answered and promoted.state.phase is Phase.PROMOTED, promoted.as_dict()
    # every step ran (the write rights too); 5 only says the source's ends were never observed (no lag sample)
    assert promoted.as_dict()["not_run"] == [] and steps(promoted)[rules.GRANT_STEP][0] == "ran", promoted.as_dict()
    assert promoted.exit_code == (EXIT_MAY_HAVE_LOST if promoted.loss.unobserved else 0), promoted.as_dict()
    assert promoted.rights is not None
    said, added = promoted.rights.lines
    assert said.startswith("the source did not answer: granting the 1 WRITE ACL(s) the readiness report of "), said
    assert added == (f"added: principal User:app, host *, operation WRITE, permission ALLOW, resource TOPIC "
                     f"'{topic}', pattern LITERAL"), promoted.rights.lines
    print(f"promote with the source gone: write-rights step {steps(promoted)[rules.GRANT_STEP][1]} s, promotion "
          f"{promoted.recovery_seconds} s")
    may_write(secure, "target", topic)
    assert [(c.action, c.acl.principal, c.acl.topic) for c in promoted.state.rights] == [
        (rules.GRANTED, "User:app", topic)]


def closed_port() -> int:
    """A loopback port nothing listens on: one the kernel just gave out, closed again unlistened."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_without_an_authorizer_a_run_says_everyone_can_write_and_target_guard_refuse_refuses(
        source_conf, target_conf, unique, tmp_path):
    topic = create_topic(source_conf, unique("open"))
    sent = producer(source_conf)
    sent.produce(topic, b"first")
    sent.flush(30)
    m = mirror(unique("m"), [topic])
    report = helpers.run(m)
    assert report["status"] == "ok" and report["records"] == 1, report
    assert len(report["writers"]) == 1 and "has no authorizer: every principal can write" in report["writers"][0]
    print(f"target guard step without an authorizer: {report['steps']['target guard']} s")

    sent.produce(topic, b"second")
    sent.flush(30)
    path = mirrors_file(tmp_path / "mirrors.yaml", [{"name": m.name, "source": {"local": "source"},
                                                     "target": {"local": "target"}, "topics": list(m.topics),
                                                     "target_guard": "refuse"}])
    done = cli("run", m.name, "--config", str(path), "--inprocess", timeout=120)
    assert done.returncode == EXIT_OTHER_WRITERS, done.stdout + done.stderr
    assert "target_guard: refuse" in done.stderr and "no authorizer" in done.stderr, done.stderr
    assert [r.value for r in read_all(target_conf, topic)] == [b"first"]      # refused before it copied
