"""``python -m eosmirror_tools.bench.dagrun``: what a mirror DAG run costs through Airflow, trigger to success.

Issue #21's fixed-cost goals for Airflow: an empty DAG run of a mirror <= 6 s from trigger to
success, a 10,000-record DAG run <= 10 s. This starts a real Airflow (`eosmirror airflow standalone`:
scheduler, DAG processor, API server, LocalExecutor, SQLite) in its own home (``var/dagrun``, brokers
on 16092/26092, API on 18192), defines one manual mirror (2 slots, 8 partitions), and triggers it in
turn with 10,000 new records and with none, ``--rounds`` times each, after a first round (the
mirror's first run creates its target topic and fences: reported, not in the medians). Every figure comes from
Airflow's own database: the run's ``queued_at`` (the trigger) to its ``end_date``, and each task's
queue, start and end. Every copy is checked by a read_committed count of the target.

``--run-server``: the same with ``airflow.run_server`` and a run server in that home (docs/run-server.md).

Output: the table on stdout and ``build/bench/dagrun.json`` (``dagrun-served.json``). Its brokers are
stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

PORTS = {"EOSMIRROR_SOURCE_PORT": "16092", "EOSMIRROR_TARGET_PORT": "26092"}
API_PORT = 18192
PARTITIONS, SLOTS = 8, 2
GOALS = {"records": 10.0, "empty": 6.0}      # seconds, trigger to success
RUN_BUDGET = 300                             # one run, trigger to an end state


def _timings(dag_id: str, run_id: str) -> dict[str, Any] | None:
    """The run's state and times (None until it has ended), from Airflow's database."""
    from airflow.models import DagRun, TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        run = session.execute(select(DagRun.state, DagRun.queued_at, DagRun.start_date, DagRun.end_date).where(
            DagRun.dag_id == dag_id, DagRun.run_id == run_id)).first()
        if run is None or run.end_date is None:
            return None
        tasks = session.execute(select(TaskInstance.task_id, TaskInstance.state, TaskInstance.queued_dttm,
                                       TaskInstance.start_date, TaskInstance.end_date).where(
            TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id)).all()
    t0 = run.queued_at.timestamp()

    def rel(value: Any) -> float | None:
        return round(value.timestamp() - t0, 2) if value else None
    return {"state": str(getattr(run.state, "value", run.state)), "seconds": rel(run.end_date),
            "run_started": rel(run.start_date),
            "tasks": {t.task_id: {"state": str(getattr(t.state, "value", t.state)), "queued": rel(t.queued_dttm),
                                  "started": rel(t.start_date), "ended": rel(t.end_date)} for t in tasks}}


def _trigger(env: dict[str, str], dag_id: str) -> str:
    run_id = f"bench__{uuid.uuid4().hex[:8]}"
    subprocess.run([str(Path(sys.executable).parent / "airflow"), "dags", "trigger", dag_id, "--run-id", run_id],
                   env=env, check=True, capture_output=True, timeout=120)
    return run_id


def _wait(dag_id: str, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + RUN_BUDGET
    while time.monotonic() < deadline:
        found = _timings(dag_id, run_id)
        if found is not None:
            return found
        time.sleep(0.5)
    raise TimeoutError(f"run {run_id} of {dag_id} did not end within {RUN_BUDGET} s")


def _produce(source: str, topic: str, records: int, tag: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": source, "linger.ms": 5, "enable.idempotence": True})
    for n in range(records):
        producer.produce(topic, value=f"{tag}-{n}".encode().ljust(200, b"."), key=str(n % 97).encode(),
                         partition=n % PARTITIONS)
        if n % 5000 == 4999:
            producer.poll(0)
    if producer.flush(60):
        raise RuntimeError(f"{topic}: records still unsent after 60 s")


def _count(target: str, topic: str) -> int:
    from eosmirror_tools.bench.counting import count_committed

    return count_committed({"bootstrap.servers": target}, topic, PARTITIONS, "target")[0]


def measure(source: str, target: str, work: Path, rounds: int, records: int, say: Any = print,
            run_server: bool = False) -> dict[str, Any]:
    import yaml

    from eosmirror.airflow.dagids import mirror_dag_id
    from eosmirror_tools.soak import airflowrun
    from eosmirror_tools.soak.harness import _create_topic

    work.mkdir(parents=True, exist_ok=True)
    name = f"dagrun-{uuid.uuid4().hex[:6]}"
    topic = name.replace("-", ".")
    _create_topic(source, topic, PARTITIONS)
    config_file = work / "mirrors.yaml"
    config_file.write_text(yaml.safe_dump({"mirrors": [{
        "name": name, "source": {"local": "source"}, "target": {"local": "target"}, "topics": [topic],
        "slots": SLOTS, "airflow": {"schedule": None, "retries": 0, "run_server": run_server}}]}))
    dag_id = mirror_dag_id(name)
    airflow = airflowrun.start(config_file, API_PORT, work / "airflow-standalone.log")
    rows: list[dict[str, Any]] = []
    try:
        say(f"Airflow healthy after {airflowrun.wait_healthy(airflow, API_PORT, 240):.0f} s")
        airflowrun.unpause(airflow, [dag_id], 240)
        assert airflow.env is not None
        expected = 0
        # Round 0 is the mirror's first run (target topic, generation, fencing): reported, not counted.
        for n in range(rounds + 1):
            for kind in ("records", "empty"):
                if kind == "records":
                    _produce(source, topic, records, f"r{n}")
                    expected += records
                run_id = _trigger(airflow.env, dag_id)
                row = {"round": n, "kind": kind if n else f"first {kind}", "records_new": records if kind == "records" else 0,
                       **_wait(dag_id, run_id)}
                row["target_count"] = _count(target, topic)
                row["verified"] = row["state"] == "success" and row["target_count"] == expected
                rows.append(row)
                say(_line(row))
    finally:
        airflow.__exit__(None, None, None)
    return {"dag_id": dag_id, "run_server": run_server, "rows": rows, "goals": GOALS, "summary": _summary(rows)}


def _line(row: dict[str, Any]) -> str:
    tasks = " ".join(f"{tid} {t['queued']}/{t['started']}-{t['ended']}" for tid, t in
                     sorted(row["tasks"].items(), key=lambda kv: kv[1]["started"] or 0))
    return (f"round {row['round']} {row['kind']:<7} {row['state']:<8} {row['seconds']:6.2f} s trigger to end "
            f"(verified {row['verified']}); tasks queued/started-ended s: {tasks}")


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out = {}
    for kind, goal in GOALS.items():
        seconds = sorted(r["seconds"] for r in rows if r["kind"] == kind)
        median = seconds[len(seconds) // 2] if seconds else None
        out[kind] = {"seconds": seconds, "median": median, "goal": goal,
                     "met": median is not None and median <= goal and all(r["verified"] for r in rows)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="eosmirror_tools.bench.dagrun", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=10_000, help="new records before each non-empty run")
    parser.add_argument("--run-server", action="store_true",
                        help="the mirror sets airflow.run_server and a run server runs in the same home (started "
                             "before Airflow, not timed; stopped at the end)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.records < 1:
        parser.error("--rounds and --records must be above 0")
    from eosmirror import paths

    os.environ.setdefault("EOSMIRROR_HOME", str((paths.checkout_root() or paths.home()) / "var" / "dagrun"))
    for key, value in PORTS.items():
        os.environ.setdefault(key, value)
    from eosmirror.airflow import home

    home.apply()      # before anything imports airflow
    home.migrate()
    from eosmirror_tools.local import cluster

    source, target = cluster.up()
    out = paths.build_dir("bench")
    from eosmirror.spark import serverclient

    try:
        if args.run_server:
            print(f"run server ready in {serverclient.start()['seconds']} s")
        doc = measure(source.bootstrap, target.bootstrap, out / "dagrun-work", args.rounds, args.records,
                      run_server=args.run_server)
    finally:
        if args.run_server:
            serverclient.stop()
        cluster.down([source, target])   # its own brokers: nothing else uses them
    (out / f"dagrun{'-served' if args.run_server else ''}.json").write_text(json.dumps(doc, indent=2) + "\n")
    for kind, s in doc["summary"].items():
        print(f"{kind} DAG run, trigger to success: median {s['median']} s of {s['seconds']} (goal <= {s['goal']} s): "
              f"{'met' if s['met'] else 'MISSED'}")
    print(f"written: {out / ('dagrun-served.json' if args.run_server else 'dagrun.json')}")
    return 0 if all(r["verified"] for r in doc["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
