"""One soak: a steady load on one source topic, mirrored at the same time by (up to) three
configurations, each to its own target topic, sampled every second by the independent sampler.

    scheduled  an eosmirror mirror on `*/1`, no follow: each run copies up to its interval's end
    follow     an eosmirror mirror with `follow: true` on `*/5`: each run keeps copying until the
               next run's slots fence it (the hand-over)
    mm2        MirrorMaker 2 exactly-once (dedicated mode, 2 tasks, the bench's tuned settings)

The two eosmirror mirrors run in a real Airflow (`eosmirror airflow standalone`, its scheduler
triggering the runs); MirrorMaker 2 runs beside it. All three read the same records at the same
time, so their time lags are side by side. Steps:

  1. create the source topic; start the sampler (source + every target topic, read_committed);
  2. start MirrorMaker 2 and Airflow, unpause the mirror DAGs;
  3. produce at the fixed rate for ``minutes``; lag percentiles are taken from ``warmup_s`` after
     the load starts until it stops;
  4. stop the load, wait (bounded) until every configuration holds every committed record, then
     stop the sampler: its queues give the exact comparison (duplicates, losses, aborted);
  5. stop everything and read every DAG run's outcome from Airflow's database.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from eosmirror_tools.kit import cluster, machine, measured, mm2, runtime, topics, workload
from eosmirror_tools.kit.processes import ChildProcess, CpuWindow
from eosmirror_tools.kit.sampler import Sampler
from eosmirror_tools.soak import airflowrun

log = logging.getLogger("eosmirror_tools.soak")
CONFIGS = ("scheduled", "follow", "mm2")
ALIASES = {"scheduled": "sched", "follow": "follow", "mm2": "mm2src"}


@dataclass(frozen=True)
class SoakSettings:
    minutes: float = 30.0
    rate: float = 20_000.0            # records/s
    size: int = 200                   # bytes per record
    partitions: int = 8
    configs: tuple[str, ...] = CONFIGS
    scheduled_cron: str = "*/1 * * * *"
    follow_cron: str = "*/5 * * * *"
    follow_transaction_seconds: float = 0.1
    slots: int = 2
    warmup_s: float = 60.0
    catchup_budget_s: float = 240.0
    start_budget_s: float = 240.0
    min_handovers: int = 0            # after the load, wait (within catchup_budget_s) for this many hand-overs
    api_port: int = 18190
    keep_topics: bool = False         # keep the load and its copies on the brokers (about 20 GB per 30 min)


def _mirror_name(config: str, run_id: str) -> str:
    return f"soak_{config}_{run_id}"


def mirrors_yaml(path: Path, topic: str, run_id: str, s: SoakSettings, start_iso: str) -> dict[str, str]:
    """The soak's mirrors file; returns config -> DAG id."""
    from eosmirror.airflow.dagids import mirror_dag_id

    mirrors: list[dict[str, Any]] = []
    dag_ids: dict[str, str] = {}
    for config in ("scheduled", "follow"):
        if config not in s.configs:
            continue
        follow = config == "follow"
        name = _mirror_name(config, run_id)
        mirrors.append({
            "name": name, "source": {"local": "source"}, "target": {"local": "target"},
            "topics": [re.escape(topic)], "replication_policy": "prefix", "source_alias": ALIASES[config],
            "slots": s.slots, **({"follow": True, "max_transaction_seconds": s.follow_transaction_seconds}
                                 if follow else {}),
            "airflow": {"schedule": s.follow_cron if follow else s.scheduled_cron, "catchup": False,
                        "start_date": start_iso}})
        dag_ids[config] = mirror_dag_id(name)
    path.write_text(yaml.safe_dump({"mirrors": mirrors}, sort_keys=False))
    return dag_ids


def start_mm2(source: str, target: str, topic: str, work: Path) -> ChildProcess:
    props = mm2.properties(ALIASES["mm2"], "soaktgt", source, target, re.escape(topic), exactly_once=True,
                           rest_port=mm2.free_port(), tasks=2,
                           extra={**mm2.TUNED, "replication.policy.class":
                                  "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"})
    props_path, log4j = mm2.write_files(work / "mm2", props)
    cmd = runtime.java_command(mm2.MAIN_CLASS, str(props_path), extra_jvm=(f"-Dlog4j2.configurationFile={log4j}",))
    child = measured.child(cmd, work / "mm2" / "mm2.log", cwd=work / "mm2")
    child.__enter__()
    return child


def internal_bytes(data_dir: Path | None, prefixes: tuple[str, ...]) -> int:
    """Log bytes (``*.log`` segments; index files are preallocated at 10 MB whatever they hold) of
    the target's topic-partition folders whose names start with ``prefixes``."""
    if data_dir is None or not data_dir.is_dir():
        return 0
    return sum(f.stat().st_size for d in data_dir.iterdir() if d.is_dir() and d.name.startswith(prefixes)
               for f in d.glob("*.log"))


def _progress(sampler: Sampler, started: float) -> str:
    lags = ", ".join(f"{label} {sampler.lag_now(label):.1f} s" for label in sampler.targets)
    return f"{time.monotonic() - started:5.0f} s: {sampler.source_records:,} source records read; time lag {lags}"


def _produce_for(s: SoakSettings, source: str, topic: str, run_id: str, sampler: Sampler,
                 watched: list[tuple[ChildProcess | None, str]], say: Any) -> dict[str, int]:
    """Step 3: the load for ``s.minutes``, a progress line every 30 s; fails if a mirror process dies."""
    stop, counts = threading.Event(), {}
    load = workload.Workload({"bootstrap.servers": source}, topic, s.partitions, txn_id=f"soak-load-{run_id}",
                             size=s.size, headers=False)   # the sampler matches copies by the value's id
    per_partition = max(1, max(50, int(s.rate / 20)) // s.partitions)
    producer = threading.Thread(target=lambda: counts.update(load.produce_paced(stop, s.rate, per_partition)),
                                daemon=True, name="soak-load")
    producer.start()
    started = time.monotonic()
    try:
        while time.monotonic() - started < s.minutes * 60:
            time.sleep(min(30.0, s.minutes * 60 - (time.monotonic() - started)))
            say(_progress(sampler, started))
            for child, what in watched:
                if child is not None and not child.running():
                    raise RuntimeError(f"{what} exited during the soak:\n{child.log_tail(30)}")
    finally:
        stop.set()
        producer.join(60)
    return counts


# What Kafka Connect logs when a task dies and "will not recover until manually restarted" (an
# exactly-once MirrorMaker 2 task does, e.g. on InvalidTxnStateException after CONCURRENT_TRANSACTIONS
# retries on a loaded broker): its records stop there, and the soak reports why instead of waiting.
TASK_DIED = "Task threw an uncaught and unrecoverable exception"


def task_failures(log_path: Path | None) -> list[str]:
    """The dead Connect tasks in a MirrorMaker 2 log: each death's line and the cause under it."""
    if log_path is None or not log_path.exists():
        return []
    lines = log_path.read_text(errors="replace").splitlines()
    found = []
    for i, line in enumerate(lines):
        if TASK_DIED in line:
            trace = lines[i + 1:i + 60]
            error = trace[0].strip() if trace and not trace[0].startswith("[") else ""
            cause = next((c.strip() for c in trace if c.startswith("Caused by:")), "")
            found.append(" ".join(filter(None, [line.strip(), error, cause])))
    return found


def _wait_caught_up(s: SoakSettings, sampler: Sampler, say: Any, mm2_log: Path | None = None) -> None:
    """Step 4: every configuration holds every committed record, or the budget is spent (MirrorMaker 2
    is not waited for once one of its tasks died: it copies nothing more)."""
    deadline = time.monotonic() + s.catchup_budget_s

    def waiting() -> list[str]:
        dead = {"mm2"} if task_failures(mm2_log) else set()
        return [c for c in s.configs if c not in dead and sampler.lag_now(c) > 0]

    while time.monotonic() < deadline and waiting():
        time.sleep(2)
    say("caught up: " + ", ".join(f"{c} {sampler.lag_now(c):.1f} s behind" for c in s.configs))
    time.sleep(3)     # the last copies reach the sampler's target readers


def _wait_handovers(s: SoakSettings, dag_id: str | None, since: float, say: Any) -> None:
    """The smoke's short load may end before the scheduler's next follow run took over: wait for it
    (a follow run's report says handed-over once its task ended), within the catch-up budget."""
    if not s.min_handovers or dag_id is None:
        return
    deadline, seen = time.monotonic() + s.catchup_budget_s, 0
    while time.monotonic() < deadline:
        seen = sum("handed-over" in r["slot_statuses"] for r in airflowrun.runs(dag_id, since))
        if seen >= s.min_handovers:
            return
        time.sleep(3)
    say(f"only {seen} of {s.min_handovers} hand-over(s) within {s.catchup_budget_s:.0f} s")


def _costs(window: CpuWindow, children: list[ChildProcess | None], started: float) -> dict[str, Any]:
    tree_cpu = sum(c.peak.cpu_seconds for c in children if c is not None)
    return {"machine_busy_seconds": round(window.machine_seconds, 1), "brokers_seconds": round(window.pids_seconds, 1),
            "harness_seconds": round(window.bench_seconds, 1), "mirrors_seconds": round(tree_cpu, 1),
            "others_seconds": round(max(0.0, window.machine_seconds - window.pids_seconds - window.bench_seconds
                                        - tree_cpu), 1), "wall_seconds": round(time.time() - started, 1)}


def run(source: str, target: str, airflow_home: Path, work: Path, s: SoakSettings,
        target_data_dir: Path | None = None, say: Any = print) -> dict[str, Any]:
    """Steps 1-5 of the module doc; returns the report (see report.build)."""
    from eosmirror_tools.soak import report

    work = work.resolve()     # MirrorMaker 2 runs in its own folder: every path it is given is absolute
    work.mkdir(parents=True, exist_ok=True)
    machine_info = machine.describe()      # before the load: its load average is the machine's, not ours
    run_id = uuid.uuid4().hex[:6]
    topic = f"soak.{run_id}"
    topics.create_topics({"bootstrap.servers": source}, [topic], s.partitions)   # step 1
    targets = {c: f"{ALIASES[c]}.{topic}" for c in s.configs}
    config_file = work / "mirrors.yaml"
    start_iso = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(time.time() - 3600))
    dag_ids = mirrors_yaml(config_file, topic, run_id, s, start_iso)
    sampler = Sampler(source, target, topic, targets=targets).start()
    window = CpuWindow(cluster.broker_pids())
    db_before = airflowrun.database_bytes(airflow_home)
    internal_before = internal_bytes(target_data_dir, ("eosmirror-",))
    mm2_child = start_mm2(source, target, topic, work) if "mm2" in s.configs else None       # step 2
    airflow = airflowrun.start(config_file, s.api_port, work / "airflow-standalone.log") if dag_ids else None
    counts: dict[str, int] = {}
    t_airflow = t_load = t_end = time.time()
    try:
        if airflow is not None:
            say(f"Airflow healthy after {airflowrun.wait_healthy(airflow, s.api_port, s.start_budget_s):.0f} s")
            t_airflow = time.time()
            airflowrun.unpause(airflow, list(dag_ids.values()), s.start_budget_s)
        t_load = time.time()                                                     # step 3
        say(f"load: {s.rate:,.0f} records/s of {s.size} B on {s.partitions} partitions for {s.minutes:g} min; "
            f"mirrors: {', '.join(s.configs)}")
        counts = _produce_for(s, source, topic, run_id, sampler, [(mm2_child, "MirrorMaker 2"), (airflow, "Airflow")],
                              say)
        t_end = time.time()
        _wait_caught_up(s, sampler, say, mm2_child.log_path if mm2_child else None)   # step 4
        _wait_handovers(s, dag_ids.get("follow"), t_airflow - 120, say)
    finally:
        measured = sampler.stop(since=t_load + s.warmup_s, until=t_end)
        for child in (mm2_child, airflow):                                       # step 5
            if child is not None:
                child.__exit__(None, None, None)
        window.stop()
        if not s.keep_topics:
            topics.delete_topics({"bootstrap.servers": source}, [topic], say)
            topics.delete_topics({"bootstrap.servers": target}, list(targets.values()), say)
    runs = {config: airflowrun.runs(dag_id, t_airflow - 120) for config, dag_id in dag_ids.items()}
    usage = {"airflow": airflow.peak.as_dict() if airflow else None, "mm2": mm2_child.peak.as_dict() if mm2_child else None}
    growth = {"airflow_db_bytes": airflowrun.database_bytes(airflow_home) - db_before,
              "eosmirror_internal_topic_bytes": internal_bytes(target_data_dir, ("eosmirror-",)) - internal_before,
              "mm2_internal_topic_bytes": internal_bytes(target_data_dir, ("mm2-",))}
    measured = {c: {**m, "task_failures": task_failures(mm2_child.log_path)} if c == "mm2" and mm2_child else m
                for c, m in measured.items()}
    return report.build(machine=machine_info, settings=asdict(s), topic=topic, targets=targets, counts=counts, measured=measured,
                        runs=runs, usage=usage, cpu=_costs(window, [airflow, mm2_child], t_airflow), growth=growth,
                        series={label: list(points) for label, points in sampler.samples.items()},
                        times={"airflow_ready": t_airflow, "load_start": t_load, "load_end": t_end})
