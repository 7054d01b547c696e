"""make deploy-test: build, deploy, seed, mirror through Airflow, fault, verify, tear down.

Writes build/deploy/report.json and prints a summary. Everything it started (containers, the
network, a dockerd it had to start) is removed at the end, also on failure; images stay as cache.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
import traceback
from typing import Any

from eosmirror_tools.deploy import alerting, engine, images, runs, timed
from eosmirror_tools.deploy.shell import log, wait_for
from eosmirror_tools.deploy.stack import Stack, dump
from eosmirror_tools.deploy.tester import Tester, write_mirrors_file

BUILD_DIR = images.REPO / "build" / "deploy"
TOPIC, PARTITIONS, SEED_PER_PARTITION = "orders", 6, 3000


def build(report: dict[str, Any]) -> None:
    started = time.monotonic()
    report["base_image_seconds"] = round(images.ensure_base_image(), 1)
    context = images.assemble_context(BUILD_DIR)
    report["context_seconds"] = round(time.monotonic() - started, 1)
    report["image_seconds"] = images.build_images(context)
    report["build_seconds"] = round(time.monotonic() - started, 1)


def deploy(stack: Stack, tester: Tester, report: dict[str, Any]) -> None:
    started = time.monotonic()
    stack.up()
    report["healthy_seconds"] = round(stack.wait_healthy(600) + 0, 1)
    report["up_to_healthy_seconds"] = round(time.monotonic() - started, 1)
    tester.start()
    for cluster in ("source", "target"):
        wait_for(lambda: ((seen := tester.probe("brokers", cluster, check=False)).get("brokers") == [1, 2, 3], seen),
                 f"3 brokers in the {cluster} cluster", 180, 3)
    runs.wait_dag_parsed(tester)


def verify(tester: Tester, what: str) -> dict[str, Any]:
    verdict = tester.probe("verify", "deploy", TOPIC, PARTITIONS, timeout=600)
    log.info("%s: oracle %s %s", what, "OK" if verdict["ok"] else "FAILED", verdict["counts"])
    return verdict


def basic_path(tester: Tester, report: dict[str, Any]) -> None:
    report["seed"] = tester.probe("seed", TOPIC, PARTITIONS, SEED_PER_PARTITION, timeout=600)
    first = runs.run_once(tester)
    first["verdict"] = verify(tester, "first run")
    report["scenarios"].append({"name": "first run", **first, "ok": first["state"] == "success" and first["verdict"]["ok"]})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="deploy-test")
    parser.add_argument("--keep", action="store_true", help="leave the deployment running (debugging)")
    parser.add_argument("--faults", default="all", help="comma-separated fault names, 'all' or 'none'")
    parser.add_argument("--run-server", action="store_true",
                        help="a run server on each Celery worker (docs/run-server.md); with --timed-runs, "
                             "served runs are timed beside spark-submit runs")
    parser.add_argument("--timed-runs", type=int, default=0, metavar="N",
                        help="after the faults: N rounds of a 10,000-record DAG run per run shape, timed")
    ns = parser.parse_args(argv)
    from eosmirror_tools.deploy import faults

    try:   # checked before anything is installed, built or started
        fault_names = faults.fault_names(ns.faults)
    except ValueError as exc:
        parser.error(f"--faults: {exc}")
    if ns.timed_runs < 0:
        parser.error(f"--timed-runs {ns.timed_runs}: a count of rounds, 0 or more")
    # SIGTERM (a CI timeout, kill) unwinds like Ctrl-C, so the teardown in `finally` still runs.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt("SIGTERM")))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    report: dict[str, Any] = {"scenarios": [], "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    started = time.monotonic()
    dockerd = stack = tester = None
    try:
        report["installed_packages"] = engine.ensure_packages()
        dockerd = engine.ensure_dockerd(BUILD_DIR / "dockerd.log")
        report["started_dockerd"] = dockerd is not None
        build(report)
        stack = Stack(write_mirrors_file(BUILD_DIR / "mirrors.yaml", TOPIC, lag_schedule=alerting.LAG_SCHEDULE),
                      alert_rules=alerting.write_test_rules(BUILD_DIR / "alerts-test.yml"))
        if ns.run_server:
            stack.env.update(timed.SERVER_ENV)
        tester = Tester(stack)
        deploy(stack, tester, report)
        basic_path(tester, report)
        if fault_names:
            faults.run_all(stack, tester, report, fault_names)
        if ns.timed_runs:
            report["scenarios"].append(timed.scenario(stack, tester, TOPIC, PARTITIONS, ns.timed_runs, ns.run_server))
            verdict = verify(tester, "after the timed runs")
            report["scenarios"].append({"name": "after the timed runs", "state": "checked", "verdict": verdict,
                                        "ok": verdict["ok"]})
        report["scenarios"].append(alerting.scenario(tester, "deploy", runs.DAG_ID, TOPIC, PARTITIONS))
        # A hard check only when every fault ran (14 runs); with fewer it is reported, not required.
        every_fault = len(fault_names) == len(faults.FAULTS)
        report["scenarios"].append(runs.cross_host_check(report["scenarios"], required=every_fault))
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - reported, then everything is torn down
        report["error"] = f"{type(exc).__name__}: {exc}"
        log.error("deploy-test failed: %s\n%s", exc, traceback.format_exc())
        if stack is not None:
            report["logs_tail"] = stack.logs_tail(8)
    finally:
        teardown(stack, tester, dockerd, ns.keep)
    report["wall_seconds"] = round(time.monotonic() - started, 1)
    report["ok"] = "error" not in report and bool(report["scenarios"]) and all(s["ok"] for s in report["scenarios"])
    dump(BUILD_DIR / "report.json", report)
    print(summary(report))
    return 0 if report["ok"] else 1


def teardown(stack: Stack | None, tester: Tester | None, dockerd: Any, keep: bool) -> None:
    if keep:
        if stack is None:
            return
        # compose needs the deployment's variables even for `down`: they go to a 0600 file, never a log.
        env_file = BUILD_DIR / "compose.env"
        env_file.touch(mode=0o600)
        env_file.chmod(0o600)
        env_file.write_text("".join(f"{k}={v}\n" for k, v in sorted(stack.env.items())))
        log.warning("--keep: the deployment stays up; %s (0600) holds its generated passwords (the Airflow admin's: "
                    "EOSMIRROR_AIRFLOW_ADMIN_PASSWORD); remove it with: %s --env-file %s down -v", env_file,
                    " ".join(stack.compose), env_file)
        return
    for step, fn in (("tester", tester and tester.remove), ("compose down", stack and stack.down),
                     ("dockerd", lambda: engine.stop_dockerd(dockerd))):
        if fn:
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - tear down the rest regardless
                log.error("teardown %s: %s", step, exc)


def hosts(scenario: dict[str, Any]) -> str:
    """Where copy and publish ran, and their tries: whether the run crossed hosts or was retried."""
    tasks = {t["task_id"]: t for t in scenario.get("tasks") or []}
    parts = [f"{tid}@{t.get('hostname') or '?'} try {t.get('try_number')}" for tid, t in sorted(tasks.items())
             if tid in ("copy", "publish")]
    return f" [{', '.join(parts)}]" if parts else ""


def summary(report: dict[str, Any]) -> str:
    lines = [f"deploy-test: {'PASSED' if report['ok'] else 'FAILED'} in {report['wall_seconds']:.0f} s",
             f"  build {report.get('build_seconds', '-')} s (images {report.get('image_seconds', {})}), "
             f"up to healthy {report.get('up_to_healthy_seconds', '-')} s"]
    for s in report["scenarios"]:
        if "rules_for" in s:
            lines.append(f"  {'ok  ' if s['ok'] else 'FAIL'} {s['name']}: series after {s.get('series_seconds', '-')} s, "
                         f"{alerting.ALERT} firing {s.get('firing_seconds', '-')} s after the DAG was paused "
                         f"(rules' for: cut to {s['rules_for']}){'; ' + s['error'][-300:] if s.get('error') else ''}")
            continue
        if "medians" in s:
            lines.append(f"  {'ok  ' if s['ok'] else 'FAIL'} {s['name']}: medians {s['medians']}")
            lines += [f"      {r['shape']}: {r['state']}, trigger to end {r['trigger_to_end']} s, copy task "
                      f"{r['copy_task']} s on {r['copy_host']}, {r['records']} records" for r in s["rows"]]
            continue
        if "crossed" in s:
            lines.append(f"  {'ok  ' if s['ok'] else 'FAIL'} {s['name']}: {len(s['crossed'])} of {s['runs']} "
                         f"successful runs ({', '.join(s['crossed']) or 'none'})")
            continue
        counts = (s.get("verdict") or {}).get("counts", {})
        bad = {k: v for k, v in counts.items() if v and k != "records_checked"}
        lines.append(f"  {'ok  ' if s['ok'] else 'FAIL'} {s['name']}: run {s.get('state')} "
                     f"({s.get('seconds', '-')} s), {counts.get('records_checked', 0)} records checked"
                     f"{', ' + str(bad) if bad else ', 0 duplicates/losses/order/aborted/hanging'}"
                     f"{'; ' + s['fault'] if s.get('fault') else ''}{hosts(s)}")
    if report.get("error"):
        lines.append(f"  error: {report['error'][-1500:]}")
    lines.append(f"  report: {BUILD_DIR / 'report.json'}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
