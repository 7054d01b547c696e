"""Helpers shared by integration and e2e tests: topics, producers, reading back, mirror definitions."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from eosmirror.core import config
from eosmirror.kafka import readers
from eosmirror.kafka.cluster import Cluster


def create_topic(conf: dict[str, Any], name: str, partitions: int = 1, **topic_config: str) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(conf)
    admin.create_topics([NewTopic(name, partitions, 1, config={k.replace("_", "."): v for k, v in topic_config.items()})]
                        )[name].result(30)
    return name


def producer(conf: dict[str, Any], **extra: Any):
    from confluent_kafka import Producer

    from eosmirror.kafka import clients

    # eosmirror's librdkafka log level (EOSMIRROR_KAFKA_LOG_LEVEL): a producer still alive when a
    # worker's brokers stop printed 154 `Connection refused` lines into one suite's output.
    return Producer({**conf, "linger.ms": 2, "log_level": clients.librdkafka_log_level(), **extra})


def read_all(conf: dict[str, Any], topic: str, partition: int = 0, read_committed: bool = True) -> list[readers.Record]:
    return readers.read_all(Cluster.from_settings("target", conf, "test"), topic, partition,
                            read_committed=read_committed)


def mirror(name: str, topics: list[str], patterns: list[str] | None = None, **fields: Any) -> config.MirrorConfig:
    """A mirror of exactly the given source topics (or of ``patterns``) on the local clusters."""
    raw = {"name": name, "source": {"local": "source"}, "target": {"local": "target"},
           "topics": patterns or [re.escape(t) for t in topics], "slots": 2, "max_transaction_seconds": 10,
           **fields}
    return config.parse({"mirrors": [raw]}, Path("test.yaml")).mirrors[0]


def mirrors_file(path: Path, mirrors: list[dict[str, Any]]) -> Path:
    import yaml

    path.write_text(yaml.safe_dump({"mirrors": mirrors}, sort_keys=False))
    return path


def run(m: config.MirrorConfig, **options: Any) -> dict[str, Any]:
    """One mirror run with the slots in this process (the same SlotCopier a Spark task runs): its
    report's JSON, the keys XCom consumers, tools and the docs read."""
    from eosmirror import driver

    mirror_run = driver.MirrorRun(m, driver.RunOptions(**options))
    return mirror_run.execute(mirror_run.prepare(), driver.run_in_process).to_dict()


def progress_of(target_conf: dict[str, Any], m: config.MirrorConfig, topic: str, partitions: int) -> dict[int, Any]:
    from eosmirror.kafka import progress

    found = progress.read(Cluster.from_settings("target", target_conf), [(topic, p) for p in range(partitions)],
                          m.progress_group, stable=False)
    return {p: found.get((topic, p)) for p in range(partitions)}


def values(records: list[readers.Record]) -> list[bytes | None]:
    return [r.value for r in records]


def seed_sequence(conf: dict[str, Any], topic: str, partitions: int, count: int, prefix: str = "") -> None:
    """``count`` records per partition with values '<prefix><partition>-<n>' (idempotent producer)."""
    p = producer(conf, **{"enable.idempotence": True})
    for n in range(count):
        for k in range(partitions):
            p.produce(topic, value=f"{prefix}{k}-{n}".encode(), key=f"k{n % 5}".encode(), partition=k)
    p.flush(60)


def transactional_batches(conf: dict[str, Any], topic: str, txn_id: str, batches: list[tuple[bool, list[bytes]]],
                          partition: int = 0) -> None:
    """Write each batch in its own transaction: (commit?, values). Aborted records really reach the log."""
    p = producer(conf, **{"transactional.id": txn_id})
    p.init_transactions(30)
    for commit, vals in batches:
        p.begin_transaction()
        for v in vals:
            p.produce(topic, value=v, partition=partition, headers=[("txn", b"committed" if commit else b"aborted")])
        p.flush(30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)


def write_mirror_file(path: Path, m: config.MirrorConfig, **overrides: Any) -> Path:
    """A mirrors.yaml holding one mirror like ``m`` (for runs in other processes)."""
    raw = {"name": m.name, "source": {"local": "source"}, "target": {"local": "target"}, "topics": list(m.topics),
           "topics_exclude": list(m.topics_exclude), "slots": m.slots, "max_transaction_seconds": m.max_transaction_seconds,
           "delivery": m.delivery, **overrides}
    return mirrors_file(path, [raw])


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300, background: bool = False):
    import os
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "eosmirror.cli", *args]
    full_env = {**os.environ, **(env or {})}
    if background:
        return subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=timeout)


def faults_env(*rules: dict[str, Any]) -> dict[str, str]:
    import json

    return {"EOSMIRROR_FAULTS": json.dumps(list(rules))}


def plan_refused_while_held(source_conf: dict[str, Any], target_conf: dict[str, Any], m: config.MirrorConfig,
                            topic: str, transactional_id: str) -> tuple[str, float]:
    """A copied 2-partition ``topic`` grows to 4 on both sides, and a transaction of
    ``transactional_id`` holds the first progress of partitions 2 and 3 in the mirror's group, open
    (a slot killed in its commit). Returns the plan's refusal text and how long it took to refuse;
    the transaction is aborted afterwards."""
    import time

    import pytest
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewPartitions

    from eosmirror import driver
    from eosmirror.core.errors import ProgressUnavailableError

    for conf in (source_conf, target_conf):
        admin = AdminClient(conf)     # held: a collected admin client cancels its futures
        admin.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
    zombie = Producer({**target_conf, "transactional.id": transactional_id, "transaction.timeout.ms": 120000})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    group = Consumer({**target_conf, "group.id": m.progress_group}).consumer_group_metadata()
    zombie.send_offsets_to_transaction([TopicPartition(topic, 2, 1), TopicPartition(topic, 3, 1)], group, 30)
    try:
        started = time.monotonic()
        with pytest.raises(ProgressUnavailableError) as refused:
            driver.MirrorRun(m, driver.RunOptions()).prepare(plan_only=True)
        return str(refused.value), time.monotonic() - started
    finally:
        zombie.abort_transaction(30)


def committed_offsets(conf: dict[str, Any], group: str, topic: str, partitions: int, stable: bool = True,
                      timeout: float = 30) -> dict[int, int]:
    """A group's committed offsets as librdkafka's own consumer reads them (stable: with require_stable)."""
    from confluent_kafka import Consumer, TopicPartition

    reader = Consumer({**conf, "group.id": group, "enable.auto.commit": False,
                       "isolation.level": "read_committed" if stable else "read_uncommitted"})
    try:
        got = reader.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=timeout)
        return {tp.partition: tp.offset for tp in got if tp.error is None and tp.offset >= 0}
    finally:
        reader.close()
