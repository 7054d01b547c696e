"""Chaos rounds: seed -> mirror under a fault (while production continues) -> recover -> oracle.

    python -m eosmirror_tools.chaos --rounds 50          # make chaos ROUNDS=50: faults mixed at random
    python -m eosmirror_tools.chaos --short              # every fault kind once (the CI version)
    python -m eosmirror_tools.chaos --calibrate          # a broken mirror that the oracle MUST catch

Output: build/chaos/report.json and build/chaos/summary.md.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import random
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from eosmirror import paths
from eosmirror_tools.chaos import scenarios
from eosmirror_tools.kit import cluster, oracle, topics, workload

log = logging.getLogger("eosmirror_tools.chaos")
PARTITIONS = 3


def _mirror_files(out: Path, name: str, topic: str, delivery: str) -> tuple[dict[int, Path], Path]:
    """mirrors.yaml per slot count (2, 3), and one of 2 slots that follows (0.5 s transactions)."""
    files = {}
    base = {"name": name, "source": {"local": "source"}, "target": {"local": "target"},
            "topics": [topic.replace(".", "\\.")], "delivery": delivery,
            # 40 s transaction timeout, like Kafka's transactions_test with broker bounces
            "max_transaction_seconds": 5}
    for slots in (2, 3):
        path = out / f"{name}-{slots}.yaml"
        path.write_text(yaml.safe_dump({"mirrors": [{**base, "slots": slots}]}))
        files[slots] = path
    follow = out / f"{name}-follow.yaml"
    follow.write_text(yaml.safe_dump({"mirrors": [{**base, "slots": 2, "follow": True, "max_transaction_seconds": 0.5,
                                                   "airflow": {"schedule": "*/1 * * * *"}}]}))
    return files, follow


def _recover(config_file: Path, name: str, ctx: scenarios.RoundContext) -> int:
    """Runs the mirror (no faults) until a run copies nothing: the whole source range is then mirrored."""
    from eosmirror import driver
    from eosmirror.core import config

    mirror = config.load(config_file).get(name)
    for attempt in range(1, 6):
        try:
            run = driver.MirrorRun(mirror)
            result = run.execute(run.prepare(), driver.run_in_process)
        except Exception as exc:  # noqa: BLE001 - e.g. a broker still finishing its restart
            ctx.note(f"recovery run {attempt} failed: {exc}"[:300])
            time.sleep(3)
            continue
        if result.ok and result.records == 0:
            return attempt
        if not result.ok:
            ctx.note(f"recovery run {attempt}: {result.errors[:2]}")
            if any(LEFT_OPEN in str(e) for e in result.errors):
                _abort_left_open(ctx)
    return 0


# A slot's refusal to write on top of a transaction the broker left open (eosmirror/slot/targetcheck.py).
LEFT_OPEN = "still hold an open transaction"


def _abort_left_open(ctx: scenarios.RoundContext) -> None:
    """Do what the refusal tells the operator: abort each transaction left open on the round's target
    partitions with Kafka's own tool (``kafka-transactions.sh abort``). A hard-restarted target broker
    skips the marker of a transaction it times out while the partition has no leader yet; the mirror
    refuses to commit on top of it (it would commit those records too), and this is the way out."""
    from eosmirror_tools.kit import counting, runtime

    stable, high = counting.stable_and_high(ctx.target_conf, ctx.topic, ctx.partitions, "target")
    for partition in counting.still_open(stable, high):
        topic, lso = ctx.topic, stable[partition]
        done = runtime.kafka_transactions(ctx.target_conf["bootstrap.servers"], "abort", "--topic", topic,
                                          "--partition", str(partition), "--start-offset", str(lso))
        ctx.note(f"aborted the transaction the broker left open on {topic}[{partition}] at offset {lso} "
                 f"(kafka-transactions.sh abort: exit {done.returncode}{', ' + done.stderr.strip()[-200:] if done.returncode else ''})")


def run_round(number: int, scenario: str, rng: random.Random, out: Path, records: int) -> dict[str, Any]:
    cluster.up()   # a previous round may have restarted a broker; make sure both answer
    source, target = cluster.local_cluster("source").client_config(), cluster.local_cluster("target").client_config()
    suffix = uuid.uuid4().hex[:6]
    topic, name = f"chaos.r{number}.{suffix}", f"chaos-r{number}-{suffix}"
    delivery = "at_least_once" if scenario in scenarios.CALIBRATION else "exactly_once"
    partitions = scenarios.PARTITIONS_OF.get(scenario, PARTITIONS)
    topics.create_topics(source, [topic], partitions)
    load = workload.Workload(source, topic, partitions, rng.randrange(1 << 30), f"chaos-producer-{suffix}")
    # A wide round seeds fewer records per partition: its point is the partition count.
    load.seed(records if partitions == PARTITIONS else max(20, records * PARTITIONS // 30))
    files, follow_file = _mirror_files(out, name, topic, delivery)
    ctx = scenarios.RoundContext(number=number, mirror=name, topic=topic, partitions=partitions,
                                 config_files=files, follow_file=follow_file, out=out, target_conf=target)
    started = time.monotonic()
    load.start_background()
    try:
        (scenarios.SCENARIOS.get(scenario) or scenarios.CALIBRATION[scenario])(ctx)
    finally:
        load.stop_background()
    cluster.up()
    recovery_runs = _recover(ctx.config_files[2], name, ctx)
    verdict = oracle.check_round(scenarios_mirror(ctx.config_files[2], name), topic, partitions, source, target, rng)
    outcome = {"round": number, "scenario": scenario, "topic": topic,
               "ok": verdict.ok and recovery_runs > 0 and not ctx.problems, "problems": ctx.problems,
               "seconds": round(time.monotonic() - started, 1), "source_committed": load.committed,
               "source_aborted": load.aborted, "fault_run_exit_codes": ctx.exit_codes,
               "recovery_runs": recovery_runs, "notes": ctx.notes, "workload_errors": load.errors[:3],
               **verdict.counts, "examples": verdict.examples}
    log.info("round %d %-22s %s  %d records checked, dup=%d lost=%d order=%d leaks=%d hanging=%d (%.0f s)",
             number, scenario, "ok" if outcome["ok"] else "VIOLATION", verdict.counts["records_checked"],
             verdict.counts["duplicates"], verdict.counts["losses"], verdict.counts["order_violations"],
             verdict.counts["aborted_leaks"], verdict.counts["hanging_transactions"], outcome["seconds"])
    return outcome


def scenarios_mirror(config_file: Path, name: str) -> Any:
    from eosmirror.core import config

    return config.load(config_file).get(name)


def plan(rounds: int, short: bool, only: list[str] | None, rng: random.Random) -> list[str]:
    kinds = only or list(scenarios.SCENARIOS)
    if short:
        return [k for k in kinds if only or k not in scenarios.LONG_ONLY]
    ordered = list(kinds)            # every kind at least once, then a random mix
    return ordered[:rounds] + [rng.choice(kinds) for _ in range(max(0, rounds - len(ordered)))]


def run(rounds: int = 11, seed: int | None = None, short: bool = False, only: list[str] | None = None,
        calibrate: bool = False, records: int = 300, out_dir: Path | None = None) -> dict[str, Any]:
    seed = seed if seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    out = out_dir or paths.build_dir("chaos")
    work = out / "runs"
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    kinds = list(scenarios.CALIBRATION) if calibrate else plan(rounds, short, only, rng)
    results = [run_round(i + 1, kind, rng, work, records) for i, kind in enumerate(kinds)]
    totals = {c: sum(r[c] for r in results) for c in oracle.COUNTERS}
    faults: dict[str, int] = {}
    for r in results:
        faults[r["scenario"]] = faults.get(r["scenario"], 0) + 1
    report = {"mode": "calibration" if calibrate else ("short" if short else "long"), "seed": seed,
              "rounds": len(results), "faults": faults, **totals,
              "violating_rounds": [r["round"] for r in results if not r["ok"]],
              "ok": all(r["ok"] for r in results), "seconds": round(time.monotonic() - started, 1),
              "finished_at": dt.datetime.now(dt.timezone.utc).isoformat(), "round_results": results}
    if calibrate:
        report["calibration"] = {"harness_caught_the_broken_mirror": totals["duplicates"] > 0,
                                 "duplicates_found": totals["duplicates"]}
    name = "calibration" if calibrate else "report"
    (out / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / f"{name.replace('report', 'summary')}.md").write_text(summary(report) + "\n")
    return report


def summary(report: dict[str, Any]) -> str:
    lines = [f"# eosmirror chaos: {report['mode']} run, {report['rounds']} rounds, seed {report['seed']}, "
             f"{report['seconds']:.0f} s", ""]
    if "calibration" in report:
        caught = report["calibration"]["harness_caught_the_broken_mirror"]
        lines.append(f"Calibration: a deliberately broken at_least_once mirror (killed between produce and progress "
                     f"commit) -> the oracle found {report['duplicates']} duplicates: "
                     f"{'CAUGHT (the harness can fail)' if caught else 'NOT CAUGHT: the oracle is too weak'}")
        return "\n".join(lines)
    lines += ["| faults | rounds |", "|---|---|"] + [f"| {k} | {v} |" for k, v in sorted(report["faults"].items())]
    lines += ["", "| check | count |", "|---|---|"] + [f"| {c} | {report[c]} |" for c in oracle.COUNTERS]
    lines += ["", "RESULT: " + ("0 duplicates, 0 losses, 0 order violations, 0 leaks, 0 hanging transactions"
                                if report["ok"] else f"VIOLATIONS in rounds {report['violating_rounds']}")]
    return "\n".join(lines)
