"""One mirror DAG run in a matrix cell, against the local clusters ($EOSMIRROR_SOURCE_PORT/TARGET_PORT):
a fresh topic seeded with known records, `airflow dags test eosmirror__<name>` from the cell's venv
(preflight, spark-submit of the packaged job with the cell's PySpark, publish), then the target read
back with a read_committed librdkafka consumer. The clusters are connections, as a user's would be.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS, PER_PARTITION = 2, 100


def seed(source: dict[str, str], topic: str) -> None:
    admin = AdminClient(source)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=60)
    producer = Producer({**source, "enable.idempotence": True})
    for p in range(PARTITIONS):
        for n in range(PER_PARTITION):
            producer.produce(topic, value=f"{p}-{n}".encode(), partition=p)
    if producer.flush(60):
        raise RuntimeError(f"seeding {topic}: records still unsent after 60 s")


def read_back(target: dict[str, str], topic: str, budget: float = 60.0) -> dict[int, list[bytes]]:
    """Every committed record of ``topic`` on the target, per partition (gives up after ``budget`` s)."""
    consumer = Consumer({**target, "group.id": f"matrix-{uuid.uuid4().hex}", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        seen: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + budget
        while time.monotonic() < deadline and sum(map(len, seen.values())) < PARTITIONS * PER_PARTITION:
            msg = consumer.poll(1.0)
            if msg is not None and not msg.error():
                seen[msg.partition()].append(msg.value())
        return seen
    finally:
        consumer.close()


def last_error(output: str) -> str:
    """The last exception line (``SomeError: why``: the one raised, after any chained ones) of a failed
    command's output, else its last 300 characters."""
    found = re.findall(r"^(?:[\w.]+\.)?\w*(?:Error|Exception): .*$", output, re.MULTILINE)
    return found[-1][:300] if found else output[-300:]


def run(venv: Path, home: Path, env: dict[str, str], source: dict[str, str], target: dict[str, str]) -> str:
    """'' when the run copied every record exactly once in order; otherwise what went wrong."""
    name = f"mx{uuid.uuid4().hex[:8]}"
    topic = f"matrix.{name}"
    seed(source, topic)
    dags = home / "dags"
    (dags / "mirrors.yaml").write_text(json.dumps({"mirrors": [{
        "name": name, "source": {"connection": "kafka_src"}, "target": {"connection": "kafka_dst"},
        "topics": [topic], "slots": 2, "max_transaction_seconds": 10, "airflow": {"schedule": None}}]}))
    env = {**env, "EOSMIRROR_HOME": str(home / "eosmirror"),
           "AIRFLOW_CONN_KAFKA_SRC": json.dumps({"conn_type": "kafka", "extra": source}),
           "AIRFLOW_CONN_KAFKA_DST": json.dumps({"conn_type": "kafka", "extra": target}),
           "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]",
                                                     "extra": {"deploy-mode": "client"}})}
    airflow = str(venv / "bin" / "airflow")
    for args, budget in ((["db", "migrate"], 600), (["dags", "test", f"eosmirror__{name}"], 900)):
        done = subprocess.run([airflow, *args], env=env, capture_output=True, text=True, timeout=budget)
        if done.returncode:
            return f"`airflow {' '.join(args)}` exit {done.returncode}: {last_error(done.stdout + done.stderr)}"
    if "state=success" not in done.stdout.split("DagRun Finished")[-1]:
        return f"the DAG run did not succeed: {done.stdout[-600:]}"
    seen = read_back(target, topic)
    wrong = [p for p, values in seen.items() if values != [f"{p}-{n}".encode() for n in range(PER_PARTITION)]]
    return f"target partitions {wrong} differ from the source ({ {p: len(v) for p, v in seen.items()} })" if wrong else ""
