"""SASL/PLAIN brokers with ACLs enforced (StandardAuthorizer), the least-privilege ACL set, and a
mirror that reads and writes as the ``mirror`` user."""

from __future__ import annotations

import contextlib
import re
import shutil
import time
import uuid

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
from eosmirror_tools.kit import cluster, waits

LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
TOPIC, GROUP, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID


# ``app``: an application producer (the write rights that move with the switch, test_write_rights.py).
PASSWORDS = {"admin": "admin-" + uuid.uuid4().hex[:8], "mirror": "mirror-" + uuid.uuid4().hex[:8],
             "app": "app-" + uuid.uuid4().hex[:8]}


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


def java_topic_acls(secure, topics: dict[str, str]) -> dict[str, set[tuple[str, str, str, str]]]:
    """Kafka's own AclCommand (``kafka-acls.sh --list --topic``, as the admin super user) on each side in
    ``topics`` (side -> topic), run side by side: the LITERAL bindings the brokers hold on that topic, as
    (principal, host, operation, permission)."""
    import os
    import subprocess
    import tempfile

    from eosmirror_tools.kit import runtime

    started = {}
    with tempfile.TemporaryDirectory() as folder:
        for side, topic in topics.items():
            path = os.path.join(folder, f"{side}.properties")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                          "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                          f'username="admin" password="{PASSWORDS["admin"]}";\n')
            command = runtime.java_command("org.apache.kafka.tools.AclCommand", "--bootstrap-server",
                                           secure[side].bootstrap, "--command-config", path, "--list", "--topic",
                                           topic, heap="256m", short_lived=True)
            started[side] = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        found = {}
        for side, child in started.items():
            out, err = child.communicate(timeout=120)
            assert child.returncode == 0, f"AclCommand on the {side} exited {child.returncode}: {err[-1500:]}"
            found[side] = set(re.findall(r"\(principal=([^,]+), host=([^,]+), operation=(\w+), permissionType=(\w+)\)",
                                         out))
    return found
