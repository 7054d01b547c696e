"""The Prometheus part of the deployment test (#24): the series of /eosmirror/metrics arrive in the
deployment's Prometheus, and a mirror that stops copying while records wait makes the shipped
``EosMirrorStalled`` rule fire, as Prometheus's own /api/v1/alerts says.

The rules Prometheus loads are the package's ``alerts.yml`` with one change, made here and stated in
the report: every ``for:`` is cut to ``TEST_FOR`` (the shipped 5-30 minutes would add that much to
every CI run). Expressions, labels and names are the shipped ones.

The test's lag DAG samples every minute (``LAG_SCHEDULE`` in the mirrors file), so STALLED can be
said one minute after the last copy (the mirror is manual: its cover is the lag interval).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

from eosmirror.monitoring import rules_path
from eosmirror_tools.deploy.shell import DeployError, log, wait_for
from eosmirror_tools.deploy.tester import Tester

TEST_FOR = "30s"
LAG_SCHEDULE = "*/1 * * * *"
ALERT = "EosMirrorStalled"
SERIES_BUDGET = 240      # the lag DAG's first samples and two scrapes (15 s)
FIRING_BUDGET = 480      # 1-2 lag intervals to STALLED, then `for` plus scrape and evaluation steps


def write_test_rules(path: Path) -> Path:
    """The shipped rules with every ``for:`` cut to ``TEST_FOR``."""
    document = yaml.safe_load(rules_path().read_text())
    for group in document["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = TEST_FOR
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _alert_state(tester: Tester, mirror: str) -> tuple[str | None, dict[str, Any]]:
    seen = tester.probe("prometheus-alerts", mirror, timeout=60)
    states = [a["state"] for a in seen["alerts"] if a["name"] == ALERT]
    return ("firing" if "firing" in states else states[0] if states else None), seen


def scenario(tester: Tester, mirror: str, dag_id: str, topic: str, partitions: int) -> dict[str, Any]:
    """Series first; then pause the mirror's DAG, keep producing, and time the alert to firing."""
    result: dict[str, Any] = {"name": "prometheus: series and the STALLED alert", "rules_for": TEST_FOR}
    started = time.monotonic()
    series = wait_for(lambda: (bool((s := tester.probe("prometheus-series", mirror, check=False)).get("statuses"))
                               and all(t["health"] == "up" for t in s["targets"]), s),
                      f"eosmirror_mirror_status of mirror {mirror} in Prometheus", SERIES_BUDGET, 5)
    result["series"] = series
    result["series_seconds"] = round(time.monotonic() - started, 1)
    log.info("prometheus: series of %s after %.0f s: %s", mirror, result["series_seconds"], series)

    # The mirror just ran: the alert must not fire yet, or its firing below would prove nothing.
    before, result["alerts_before"] = _alert_state(tester, mirror)
    if before == "firing":
        return {**result, "ok": False, "error": f"{ALERT} already fired before the DAG was paused: "
                                                f"{result['alerts_before']}"}
    tester.probe("pause-dag", dag_id, "true")
    tester.start_production(topic, partitions, "alert")
    paused = time.monotonic()
    pending_at = None
    try:
        def check():
            nonlocal pending_at
            state, seen = _alert_state(tester, mirror)
            if state and pending_at is None:
                pending_at = time.monotonic()
            return state == "firing", seen
        result["alerts"] = wait_for(check, f"{ALERT} firing for mirror {mirror}", FIRING_BUDGET, 5)
        result["firing_seconds"] = round(time.monotonic() - paused, 1)
        result["pending_seconds"] = round(pending_at - paused, 1) if pending_at else None
        log.info("prometheus: %s firing %.0f s after the DAG was paused (pending after %s s)", ALERT,
                 result["firing_seconds"], result["pending_seconds"])
        result["ok"] = True
    except DeployError as exc:
        result.update(ok=False, error=str(exc)[-2000:])
    finally:
        result["produced"] = tester.stop_production("alert")
        tester.probe("pause-dag", dag_id, "false", check=False)
    return result
