"""ACLs on real SASL/PLAIN brokers (StandardAuthorizer), credentials, unreachable clusters, config errors.

The least-privilege ACL set documented in docs/real-clusters.md is enough; each ACL in it is necessary, and
without it the run fails naming that permission, with no record and no progress written.
"""

import contextlib
import re
import shutil
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from eosmirror import driver
from eosmirror.core import config
from eosmirror.core.errors import EosMirrorError
from eosmirror.kafka import progress, readers
from eosmirror.kafka.cluster import Cluster
from eosmirror_tools.kit import cluster, waits
from tests.helpers import cli, mirrors_file

pytestmark = pytest.mark.integration
PASSWORDS = {"admin": "admin-" + uuid.uuid4().hex[:8], "mirror": "mirror-" + uuid.uuid4().hex[:8]}
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
TOPIC, GROUP, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
Op = AclOperation


@contextlib.contextmanager
def secure_pair(prefix: str, source_port: int, target_port: int, fresh: bool = False):
    """A running SASL source and target with ACLs enforced, stopped at the end; ``fresh``: empty storage
    (no topic or ACL left by an earlier run)."""
    source = cluster.secure_cluster(PASSWORDS, name=f"{prefix}-source", port=source_port)
    target = cluster.secure_cluster(PASSWORDS, name=f"{prefix}-target", port=target_port)
    for c in (source, target) if fresh else ():
        cluster.stop(c)
        shutil.rmtree(c.data_dir, ignore_errors=True)
    try:
        for c in (source, target):
            cluster.launch(c)
        for c in (source, target):
            cluster.wait_ready(c, timeout=waits.service_budget(90, cap_seconds=240))
        yield {"source": source, "target": target}
    finally:
        for c in (source, target):
            cluster.stop(c)


@pytest.fixture(scope="module")
def secure():
    with secure_pair("acl", 19492, 19592) as clusters:
        yield clusters


def least_privilege(name: str, topic: str) -> list[tuple]:
    """(cluster, resource type, name, pattern, operation, what the error must say when it is missing)."""
    group = f"eosmirror.{name}"
    state, syncs = f"eosmirror-state.{name}.internal", f"eosmirror-offset-syncs.{name}.internal"
    snapshot = f"eosmirror-offset-sync-snapshot.{name}.internal"
    return [
        ("source", TOPIC, topic, LITERAL, Op.READ, "Describe on the topics"),
        ("source", TOPIC, topic, LITERAL, Op.DESCRIBE_CONFIGS, f"DescribeConfigs on topic {topic} (source"),
        ("target", TOPIC, topic, LITERAL, Op.CREATE, f"Create on topic {topic}"),
        ("target", TOPIC, topic, LITERAL, Op.WRITE, f"Write on topic {topic} (target"),
        ("target", TOPIC, topic, LITERAL, Op.READ, f"Read on topic {topic} (target"),
        ("target", TOPIC, topic, LITERAL, Op.DESCRIBE_CONFIGS, f"DescribeConfigs on topic {topic}"),
        ("target", TOPIC, state, LITERAL, Op.CREATE, f"Create on topic {state}"),
        ("target", TOPIC, state, LITERAL, Op.READ, f"Read on topic {state}"),
        ("target", TOPIC, state, LITERAL, Op.WRITE, f"Write on topic {state}"),
        ("target", TOPIC, syncs, LITERAL, Op.CREATE, f"Create on topic {syncs}"),
        ("target", TOPIC, syncs, LITERAL, Op.READ, f"Read on topic {syncs}"),
        ("target", TOPIC, syncs, LITERAL, Op.WRITE, f"Write on topic {syncs}"),
        ("target", TOPIC, snapshot, LITERAL, Op.CREATE, f"Create on topic {snapshot}"),
        ("target", TOPIC, snapshot, LITERAL, Op.READ, f"Read on topic {snapshot}"),
        ("target", TOPIC, snapshot, LITERAL, Op.WRITE, f"Write on topic {snapshot}"),
        ("target", TXN, f"eosmirror.{name}.", PREFIXED, Op.WRITE, "Write on transactional id"),
        ("target", GROUP, group, LITERAL, Op.READ, f"Read on group {group}"),
    ]


def _bindings(acls):
    return [AclBinding(rt, n, pat, "User:mirror", "*", op, AclPermissionType.ALLOW) for _, rt, n, pat, op, _ in acls]


ACL_APPLY_BUDGET_S = 15


def grant(secure, acls, revoke=False):
    for side in ("source", "target"):
        mine = _bindings([a for a in acls if a[0] == side])
        if not mine:
            continue
        admin = AdminClient(secure[side].client_config())
        filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                    b.permission_type) for b in mine]
        if revoke:
            for future in admin.delete_acls(filters).values():
                future.result(30)
        else:
            for future in admin.create_acls(mine).values():
                future.result(30)
        _wait_applied(admin, side, filters, present=not revoke)


def _wait_applied(admin, side, filters, present):
    """ACL changes reach the broker's authorizer through the metadata log, after create/delete_acls return: wait
    until the broker answers with every binding present (or gone), within a budget, naming what it still lacks."""
    deadline = time.monotonic() + ACL_APPLY_BUDGET_S
    while True:
        pending = [f for f in filters if bool(admin.describe_acls(f).result(30)) != present]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{side}: {len(pending)} ACL change(s) not applied after {ACL_APPLY_BUDGET_S} s, "
                                 f"e.g. {pending[0]}")
        time.sleep(0.1)


def fresh_mirror(secure, monkeypatch, **fields):
    name = "acl" + uuid.uuid4().hex[:8]
    topic = f"{name}.orders"
    admin = AdminClient(secure["source"].client_config())
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    producer = Producer(secure["source"].client_config())
    for i in range(20):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % 2)
    producer.flush(30)
    monkeypatch.setenv("ACL_TEST_PASSWORD", PASSWORDS["mirror"])

    def ref(side):
        return {"config": {**secure[side].client_config("mirror"), "sasl.password": "${ACL_TEST_PASSWORD}"}}

    raw = {"name": name, "source": ref("source"), "target": ref("target"), "topics": [re.escape(topic)],
           "slots": 2, "max_transaction_seconds": 10, **fields}
    return name, topic, config.parse({"mirrors": [raw]}, __import__("pathlib").Path("acl.yaml")).mirrors[0], raw


def run(m):
    mirror_run = driver.MirrorRun(m)
    return mirror_run.execute(mirror_run.prepare(), driver.run_in_process).to_dict()


def nothing_written(secure, m, topic):
    admin_conf = secure["target"].client_config()
    for p in range(2):
        assert readers.read_all(Cluster.from_settings("target", admin_conf), topic, p, missing_ok=True) == []
    assert progress.read(Cluster.from_settings("target", admin_conf), [(topic, 0), (topic, 1)], m.progress_group,
                         stable=False) == {}


def test_the_least_privilege_acl_set_is_enough(secure, monkeypatch):
    name, topic, m, _ = fresh_mirror(secure, monkeypatch)
    acls = least_privilege(name, topic)
    grant(secure, acls)
    try:
        report = run(m)
        assert report["status"] == "ok" and report["records"] == 20
        assert run(m)["records"] == 0
        from eosmirror.driver import verify

        checks = verify.verify(m)
        assert checks and all(c.ok for c in checks) and sum(c.records for c in checks) == 20
    finally:
        grant(secure, acls, revoke=True)


@pytest.mark.parametrize("index", range(17), ids=lambda i: f"acl{i}")
def test_each_acl_is_needed_and_its_absence_is_named(secure, monkeypatch, index):
    name, topic, m, _ = fresh_mirror(secure, monkeypatch)
    acls = least_privilege(name, topic)
    dropped = acls[index]
    kept = acls[:index] + acls[index + 1:]
    grant(secure, kept)
    try:
        started = time.monotonic()
        try:
            report = run(m)
            failure = " ".join(report["errors"]) if report["status"] != "ok" else None
        except EosMirrorError as exc:
            failure = str(exc)
        assert failure, f"the run succeeded without {dropped[4].name} on {dropped[2]}"
        assert dropped[5] in failure, failure
        assert time.monotonic() - started < 20
        nothing_written(secure, m, topic)
    finally:
        grant(secure, kept, revoke=True)


def test_source_group_read_is_optional_and_its_absence_is_reported(secure, monkeypatch):
    name, topic, m, _ = fresh_mirror(secure, monkeypatch)
    acls = least_privilege(name, topic)
    grant(secure, acls)
    try:
        report = run(m)
        assert report["status"] == "ok" and report["records"] == 20
        errors = [s["source_commit_error"] for s in report["slots"] if s.get("partitions")]
        assert all(e and "GROUP_AUTHORIZATION_FAILED" in e for e in errors)
        extra = [("source", GROUP, m.progress_group, LITERAL, Op.READ, "")]
        grant(secure, extra)
        try:
            again = run(m)
            assert again["records"] == 0
            assert [s["source_commit_error"] for s in again["slots"] if s.get("partitions")] == [None, None]
        finally:
            grant(secure, extra, revoke=True)
    finally:
        grant(secure, acls, revoke=True)


def test_wrong_password_fails_naming_authentication(secure, monkeypatch, tmp_path):
    name, topic, m, raw = fresh_mirror(secure, monkeypatch)
    path = mirrors_file(tmp_path / "mirrors.yaml", [raw])
    started = time.monotonic()
    result = cli("run", name, "--config", str(path), "--inprocess", env={"ACL_TEST_PASSWORD": "not-the-password"})
    assert result.returncode == 1
    assert "authentication failed" in result.stderr and "127.0.0.1:19592" in result.stderr
    assert "not-the-password" not in result.stderr + result.stdout
    assert time.monotonic() - started < 60


@pytest.mark.parametrize("side", ["source", "target"])
def test_unreachable_cluster_fails_within_bounded_time_and_leaves_no_process(side, tmp_path, unique, clusters):
    reachable = {"local": "target" if side == "source" else "source"}
    dead = {"config": {"bootstrap.servers": "127.0.0.1:1"}}
    name = unique("m")
    raw = {"name": name, "topics": ["anything"], "source": dead if side == "source" else reachable,
           "target": dead if side == "target" else reachable}
    path = mirrors_file(tmp_path / "mirrors.yaml", [raw])
    started = time.monotonic()
    proc = cli("run", name, "--config", str(path), "--inprocess", background=True)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out
    assert f"{side} cluster" in out and "127.0.0.1:1" in out and "no answer" in out
    # One report of the failure, not librdkafka's per-retry `%3|...|FAIL|... Connection refused` lines.
    assert "|FAIL|" not in out and "Connection refused" not in out, out[-3000:]
    assert time.monotonic() - started < 60
    from eosmirror_tools.kit.processes import descendants

    assert descendants(proc.pid) == []


@pytest.mark.parametrize("fields, expected", [
    ({"slots": -1}, "`slots`: -1 is not allowed"),
    ({"colour": "blue"}, "field `colour`: no such field; known fields:"),
    ({"delivery": "maybe"}, "`delivery`: 'maybe' is not allowed"),
    ({"source_consumer": {"isolation.level": "read_uncommitted"}}, "isolation.level"),
    ({"source": {"config": {"bootstrap.servers": "x:1", "sasl.password": "hunter2"}}}, "holds a secret inline"),
    ({"start_from": "the beginning"}, "`start_from`: 'the beginning' is not allowed"),
])
def test_config_errors_exit_2_naming_mirror_field_value_and_write_nothing(fields, expected, tmp_path, unique,
                                                                          target_conf):
    name = unique("m")
    raw = {"name": name, "source": {"local": "source"}, "target": {"local": "target"}, "topics": ["x"], **fields}
    path = mirrors_file(tmp_path / "mirrors.yaml", [raw])
    result = cli("run", name, "--config", str(path), "--inprocess")
    assert result.returncode == 2
    assert expected in result.stderr and f"mirror '{name}'" in result.stderr and str(path) in result.stderr
    assert "hunter2" not in result.stderr
    names = AdminClient(target_conf).list_topics(timeout=10).topics
    assert f"eosmirror-state.{name}.internal" not in names


def test_target_topic_that_cannot_be_grown_fails_loudly(secure, monkeypatch):
    name, topic, m, _ = fresh_mirror(secure, monkeypatch)
    admin = AdminClient(secure["target"].client_config())
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)     # the source has 2 partitions
    acls = least_privilege(name, topic)                                # no Alter on the target topic
    grant(secure, acls)
    try:
        with pytest.raises(EosMirrorError) as info:
            run(m)
        assert f"target topic {topic} has 1 partitions but source {topic} has 2" in str(info.value)
        assert f"grant Alter on topic {topic}" in str(info.value)
        assert readers.read_all(Cluster.from_settings("target", secure["target"].client_config()), topic, 0) == []
        grant(secure, [("target", TOPIC, topic, LITERAL, Op.ALTER, "")])
        assert run(m)["records"] == 20                                # with Alter it grows and copies
        grant(secure, [("target", TOPIC, topic, LITERAL, Op.ALTER, "")], revoke=True)
    finally:
        grant(secure, acls, revoke=True)
