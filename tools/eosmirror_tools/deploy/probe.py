"""What the deployment test does *inside* the deployment's network, from a tester container
(`docker exec <tester> python -m eosmirror_tools.deploy.probe <command> ...`): Kafka clients and
Airflow's REST API reach every host by its name there, and no port is published on the host.
Each command prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

SOURCE = {"bootstrap.servers": "src-kafka-1:9092,src-kafka-2:9092,src-kafka-3:9092"}
TARGET = {"bootstrap.servers": "dst-kafka-1:9092,dst-kafka-2:9092,dst-kafka-3:9092"}
CLUSTERS = {"source": SOURCE, "target": TARGET}
API = "http://airflow-api-server:8080"
PROMETHEUS = "http://prometheus:9090"


def brokers(cluster: str) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient

    meta = AdminClient(CLUSTERS[cluster]).list_topics(timeout=10)
    return {"brokers": sorted(meta.brokers), "controller": meta.controller_id}


def create_topic(cluster: str, topic: str, partitions: int) -> None:
    from eosmirror_tools.kit import topics

    topics.create_topics(CLUSTERS[cluster], [topic], partitions, cluster, configs={topic: {"min.insync.replicas": "2"}},
                         replication=3, exist_ok=True)


def workload(topic: str, partitions: int, name: str) -> Any:
    """The chaos suite's workload; numbers continue above every earlier writer's (time-based base),
    so the oracle's per-partition sequence stays increasing across writer processes."""
    from eosmirror_tools.kit.workload import Workload

    w = Workload(SOURCE, topic, partitions, seed=int(time.time()), txn_id=f"deploy-writer-{name}")
    w.next_seq = [time.time_ns() // 1000] * partitions
    return w


def seed(topic: str, partitions: int, per_partition: int, tag: str = "seed") -> dict[str, Any]:
    create_topic("source", topic, partitions)
    w = workload(topic, partitions, tag)
    w.seed(per_partition)
    return {"committed": w.committed, "aborted": w.aborted}


def produce(topic: str, partitions: int, stop_file: str, out_file: str) -> dict[str, Any]:
    """Production while a run copies: until ``stop_file`` exists; the counts go to ``out_file``."""
    w = workload(topic, partitions, "background")
    w.start_background(batches_per_second=5)
    while not Path(stop_file).exists():
        time.sleep(0.5)
    w.stop_background()
    result = {"committed": w.committed, "aborted": w.aborted, "errors": w.errors[:10], "error_count": len(w.errors)}
    Path(out_file).write_text(json.dumps(result))
    return result


def leader(cluster: str, topic: str, partition: int) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient

    meta = AdminClient(CLUSTERS[cluster]).list_topics(topic, timeout=10)
    part = meta.topics[topic].partitions[partition]
    return {"leader": part.leader, "isr": sorted(part.isrs), "replicas": sorted(part.replicas)}


def java_hash(text: str) -> int:
    h = 0
    for ch in text.encode("utf-16-be").decode("utf-16-be"):
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h


def coordinator(transactional_id: str) -> dict[str, Any]:
    """The target's transaction coordinator of a transactional id: the leader of its partition of
    __transaction_state (Kafka: abs(id.hashCode) % partitions, abs meaning & 0x7fffffff)."""
    from confluent_kafka.admin import AdminClient

    meta = AdminClient(TARGET).list_topics("__transaction_state", timeout=10).topics["__transaction_state"]
    partition = (java_hash(transactional_id) & 0x7FFFFFFF) % len(meta.partitions)
    return {"coordinator": meta.partitions[partition].leader, "partition": partition}


def open_transactions(topic: str, partitions: int) -> dict[str, Any]:
    """Target partitions whose last stable offset is below the high watermark: a transaction is open."""
    from eosmirror_tools.kit import counting

    stable, high = counting.stable_and_high(TARGET, topic, partitions, "target")
    return {"open": counting.still_open(stable, high), "records": sum(high.values())}


class Airflow:
    """Airflow's REST API with a JWT from /auth/token (the simple auth manager's admin)."""

    def __init__(self) -> None:
        body = {"username": "admin", "password": os.environ["AIRFLOW_ADMIN_PASSWORD"]}
        self.token = self.call("POST", "/auth/token", body, auth=False)["access_token"]

    def call(self, method: str, path: str, body: Any = None, auth: bool = True) -> Any:
        request = urllib.request.Request(API + path, method=method, data=json.dumps(body).encode() if body is not None
                                         else None, headers={"Content-Type": "application/json"})
        if auth:
            request.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        tis = self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return [{k: ti.get(k) for k in ("task_id", "state", "try_number", "hostname", "duration")} for ti in tis]


def dag_ready(dag_id: str) -> dict[str, Any]:
    dag = Airflow().call("GET", f"/api/v2/dags/{dag_id}")
    return {"dag_id": dag["dag_id"], "is_paused": dag.get("is_paused")}


def trigger(dag_id: str) -> dict[str, Any]:
    api = Airflow()
    run = api.call("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": {}})
    return {"run_id": run["dag_run_id"], "state": run["state"]}


def run_state(dag_id: str, run_id: str) -> dict[str, Any]:
    api = Airflow()
    run = api.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")
    return {"state": run["state"], "tasks": api.task_instances(dag_id, run_id),
            **{k: run.get(k) for k in ("queued_at", "start_date", "end_date")}}


def copy_report(dag_id: str, run_id: str) -> dict[str, Any]:
    """The copy task's run report (XCom): records, slots, errors."""
    api = Airflow()
    entry = api.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/copy/xcomEntries/return_value")
    value = entry.get("value")
    value = json.loads(value) if isinstance(value, str) else value
    return {k: value.get(k) for k in ("status", "records", "bytes", "errors", "steps")} if isinstance(value, dict) else {}


def pause_dag(dag_id: str, paused: str) -> dict[str, Any]:
    """Pause (``paused`` = "true") or unpause a DAG, as the UI's toggle does."""
    dag = Airflow().call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": paused == "true"})
    return {"dag_id": dag["dag_id"], "is_paused": dag.get("is_paused")}


def _prometheus(path: str) -> Any:
    with urllib.request.urlopen(PROMETHEUS + path, timeout=30) as response:
        answer = json.loads(response.read())
    if answer.get("status") != "success":
        raise RuntimeError(f"Prometheus {path}: {answer}")
    return answer["data"]


def prometheus_series(mirror: str) -> dict[str, Any]:
    """What Prometheus has scraped of a mirror: its status series and the scrape target's health."""
    query = urllib.parse.quote(f'eosmirror_mirror_status{{mirror="{mirror}"}} == 1')
    statuses = _prometheus(f"/api/v1/query?query={query}")["result"]
    targets = _prometheus("/api/v1/targets")["activeTargets"]
    return {"statuses": sorted(r["metric"].get("status", "?") for r in statuses),
            "targets": [{k: t.get(k) for k in ("scrapeUrl", "health", "lastError")} for t in targets]}


def prometheus_alerts(mirror: str) -> dict[str, Any]:
    """The alerts Prometheus holds for a mirror (pending or firing), from its own API."""
    alerts = _prometheus("/api/v1/alerts")["alerts"]
    return {"alerts": [{"name": a["labels"].get("alertname"), "state": a.get("state"), "activeAt": a.get("activeAt")}
                       for a in alerts if a["labels"].get("mirror") == mirror]}


def verify(mirror_name: str, topic: str, partitions: int) -> dict[str, Any]:
    """The chaos suite's oracle, with its own read_committed reads of both clusters."""
    import random

    from eosmirror.core import config
    from eosmirror_tools.kit import oracle

    mirror = config.load(os.environ["EOSMIRROR_CONFIG"]).get(mirror_name)
    verdict = oracle.check_round(mirror, topic, partitions, SOURCE, TARGET, random.Random(7))
    return {"ok": verdict.ok, "counts": verdict.counts, "examples": verdict.examples}


COMMANDS = {"open-transactions": open_transactions, "brokers": brokers, "seed": seed, "produce": produce, "leader": leader, "coordinator": coordinator,
            "dag-ready": dag_ready, "trigger": trigger, "run-state": run_state, "copy-report": copy_report,
            "verify": verify, "pause-dag": pause_dag, "prometheus-series": prometheus_series,
            "prometheus-alerts": prometheus_alerts}


def main() -> None:
    parser = argparse.ArgumentParser(prog="probe")
    parser.add_argument("command", choices=sorted(COMMANDS))
    parser.add_argument("args", nargs="*")
    ns = parser.parse_args()
    args = [int(a) if a.isdigit() else a for a in ns.args]
    try:
        print(json.dumps(COMMANDS[ns.command](*args), default=str))
    except Exception as exc:  # noqa: BLE001 - the caller reads the JSON line and decides
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:1000]}))
        sys.exit(1)


if __name__ == "__main__":
    main()
