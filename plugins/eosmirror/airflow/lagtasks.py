"""Task callables of the ``eosmirror_lag`` DAG: sample and evaluate the mirrors, alert through Airflow.

A lag alert (SLO breach, STALLED, STOPPED, ERROR, FOREIGN) fails the task with AirflowFailException (an
AirflowException: email_on_failure, on_failure_callback and the UI's failed state all apply). It is
not retried: the alert is a finding, not a transient fault, and the next scheduled evaluation
checks again. Faults of the evaluation itself (a cluster unreachable) keep the task's retries.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any, Callable

from eosmirror.airflow.compat import fail_exception
from eosmirror.airflow.tasks import fail_without_retry
from eosmirror.core import config, lagview
from eosmirror.core.errors import ConfigError
from eosmirror.driver import lag
from eosmirror.kafka.lagstore import now_ms

log = logging.getLogger(__name__)


def load_hook(dotted: str) -> Callable[[dict[str, Any]], Any]:
    """The ``on_lag_alert`` callable (``package.module.function``)."""
    module_name, _, attribute = dotted.rpartition(".")
    try:
        hook: object = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise LookupError(f"on_lag_alert {dotted!r} cannot be imported: {exc}") from None
    if not callable(hook):
        raise LookupError(f"on_lag_alert {dotted!r} is not callable")
    return hook


def call_hooks(mirrors: Any, alerting: list[dict[str, Any]]) -> list[str]:
    """Call each alerting mirror's on_lag_alert with its figures; returns the problems met (never raises:
    a broken hook must not hide the alert itself)."""
    problems = []
    for alert in alerting:
        dotted = mirrors.get(alert["mirror"]).on_lag_alert
        if not dotted:
            continue
        try:
            load_hook(dotted)(alert)
        except Exception as exc:  # noqa: BLE001 - reported with the alert
            log.exception("on_lag_alert of mirror %s failed", alert["mirror"])
            problems.append(f"mirror {alert['mirror']}: on_lag_alert {dotted} failed: {type(exc).__name__}: {exc}")
    return problems


def evaluate(mirror: str, config_path: str | None = None) -> dict[str, Any]:
    """Sample every mirror (or ``mirror``), record the samples, evaluate; fail on an alert."""

    try:
        mirrors = config.load(config_path)
        if mirror:
            mirrors.get(mirror)
    except ConfigError as exc:
        log.error("%s", exc)
        raise fail_without_retry(exc) from None
    now = now_ms()
    statuses = lag.report_all(mirrors, mirror or None, now_ms=now, record=True)
    log.info("lag of %d mirror(s):\n%s", len(statuses), lagview.mirrors_table(statuses, now))
    document = lagview.document(statuses, now)
    alerting = [s.to_json() for s in statuses if s.alerting]
    if alerting:
        messages = [a for s in statuses for a in s.alerts()] + call_hooks(mirrors, alerting)
        for status in statuses:
            if status.alerting and status.partitions:
                log.error("partitions of %s:\n%s", status.mirror, lagview.partitions_table(status, now))
        raise fail_exception()("lag alert: " + "; ".join(messages))
    return document
