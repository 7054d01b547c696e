"""ACLs on real SASL/PLAIN brokers (StandardAuthorizer), credentials, unreachable clusters, config errors.

The least-privilege ACL set documented in docs/real-clusters.md is enough; each ACL in it is necessary, and
without it the run fails naming that permission, with no record and no progress written.
"""

import time

import pytest
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
)

from eosmirror.core.errors import EosMirrorError
from eosmirror.kafka import progress, readers
from eosmirror.kafka.cluster import Cluster
from tests.helpers import cli, mirrors_file
from tests.support.security import GROUP, LITERAL, TOPIC, Op, fresh_mirror, grant, least_privilege, run, secure_pair

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secure():
    with secure_pair("acl", 19492, 19592) as clusters:
        yield clusters


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
