"""``make demo``: the mirror on the embedded clusters, run through Airflow, with a summary to read.

  1. both local clusters up (KRaft, loopback)
  2. the demo data set appended on the source (see data.py)
  3. DAG run 1 of eosmirror__demo (Airflow -> SparkSubmitOperator -> Spark local): copies it
  4. DAG run 2: nothing new, so it copies nothing (its wall time is the fixed cost of a DAG run)
  5. eosmirror verify: source and target record by record
"""

from __future__ import annotations

import time
from pathlib import Path

from eosmirror import paths
from eosmirror.airflow import home
from eosmirror.airflow.dagids import mirror_dag_id
from eosmirror.core import config
from eosmirror.core.errors import EXIT_FAILED, EXIT_OK
from eosmirror.core.report import write_json
from eosmirror.driver import verify
from eosmirror.kafka import readers
from eosmirror.kafka.cluster import Cluster
from eosmirror_tools.demo import data as demo_data
from eosmirror_tools.kit import cluster

MIRROR = "demo"


def _step(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def _dag_run(log_file: Path) -> tuple[bool, dict, float]:
    """One `airflow dags test` run of the demo DAG; its full task log goes to ``log_file``, its run
    report (the `copy` task's XCom) beside it as JSON."""
    from eosmirror.airflow import reports

    dag_id = mirror_dag_id(MIRROR)
    before = reports.latest_runs(dag_id)
    started = time.monotonic()
    with open(log_file, "w") as log:
        done = home.run_airflow(["dags", "test", dag_id], stdout=log, stderr=log)
    wall = time.monotonic() - started
    runs = reports.latest_runs(dag_id)
    fresh = runs and runs != before
    found = reports.run_report(dag_id, runs[0][0]) if fresh else None
    result = found.to_dict() if found else {}   # the report's JSON, as it is written beside the log
    write_json(result, log_file.with_suffix(".json"))
    ok = done.returncode == 0 and bool(fresh) and runs[0][1] == "success" and result.get("status") == "ok"
    return ok, result, wall


def main(records: int = 2000, master: str = "local[2]") -> int:
    running = [c.name for c in cluster.default_clusters() if cluster.is_reachable(c)]
    _step("the embedded Kafka clusters (KRaft, loopback): " + (
        "already running" if len(running) == len(cluster.default_clusters()) else "starting"))
    for c in cluster.up():
        print(f"    {c.name:<7} {c.bootstrap}   data {c.data_dir}")
    source, target = cluster.local_cluster("source"), cluster.local_cluster("target")

    _step(f"writing the demo data set on the source ({records} records per topic)")
    seeded = demo_data.seed(source.client_config(), records=records)
    for topic in demo_data.TOPICS:
        extra = f" (+{seeded.aborted[topic]} in aborted transactions)" if topic in seeded.aborted else ""
        print(f"    {topic:<15} {seeded.committed[topic]} committed{extra}")

    out = paths.build_dir("demo")
    home.apply()     # this process reads the run reports from Airflow's database
    home.migrate()
    _step(f"DAG run 1 of {mirror_dag_id(MIRROR)}: preflight -> copy (spark-submit, Spark local) -> publish")
    ok1, first, wall1 = _dag_run(out / "dag-run-1.log")
    print(f"    {'success' if ok1 else 'FAILED'}: {first.get('records', 0)} records, "
          f"{first.get('bytes', 0) / 1e6:.2f} MB in {wall1:.1f} s (Airflow and Spark start included); "
          f"log: {out / 'dag-run-1.log'}")
    _step("DAG run 2: nothing new on the source, so it must copy nothing")
    ok2, second, wall2 = _dag_run(out / "dag-run-2.log")
    print(f"    {'success' if ok2 else 'FAILED'}: {second.get('records', 0)} records in {wall2:.1f} s "
          f"(the fixed cost of one DAG run)")

    _step(f"eosmirror verify {MIRROR}: source and target, record by record")
    checks = verify.verify(config.load().get(MIRROR))
    print(verify.format_checks(checks))
    aborted_leaks = sum(1 for p in range(demo_data.TOPICS["demo.payments"][0])
                        for r in readers.read_all(Cluster.from_settings("target", target.client_config()),
                                                  "src.demo.payments", p)
                        if ("txn", b"aborted") in r.headers)

    _step(f"eosmirror lag {MIRROR}: how far behind (also the eosmirror_lag DAG, the Mirror lag page, metrics)")
    from eosmirror.core import lagview
    from eosmirror.driver import lag

    statuses = lag.report_all(config.load(), MIRROR, record=True)
    print("    " + lagview.mirrors_table(statuses, statuses[0].time_ms).replace("\n", "\n    "))

    ok = ok1 and ok2 and second.get("records") == 0 and all(c.ok for c in checks) and not aborted_leaks
    _step("summary")
    print(f"    copied {first.get('records', 0)} records ({first.get('records_per_second', 0):.0f} records/s inside "
          f"the Spark tasks); the second run copied {second.get('records', 0)}; verify: "
          f"{sum(c.records for c in checks)} records in {len(checks)} partitions "
          f"{'identical' if all(c.ok for c in checks) else 'DIFFER'}; aborted source records on the target: "
          f"{aborted_leaks}")
    print(f"    run reports and task logs: {out}")
    print("\n    Airflow UI on this setup:  make airflow   (= .venv/bin/eosmirror airflow standalone)")
    print(f"      open {home.api_url()}, log in as `admin` with the password that `airflow standalone` prints")
    print(f"      (also in {home.airflow_home() / 'simple_auth_manager_passwords.json.generated'}),")
    print(f"      unpause or trigger {mirror_dag_id(MIRROR)} (the trigger form takes until, max records, topics, "
          f"dry run), or eosmirror_fence.")
    print(f"    Mirror lag page (Browse > Mirror lag in the UI): {home.api_url().rstrip('/')}/eosmirror/")
    print("    Stop the Kafka clusters with: make down")
    print(f"\nDEMO {'PASSED' if ok else 'FAILED'}")
    return EXIT_OK if ok else EXIT_FAILED
