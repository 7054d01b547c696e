"""Task callables of the readiness DAG and of the switchover DAG's first task (`eosmirror readiness`).

A NOT READY report fails the task without retry (a finding, not a transient fault; the next scheduled report
checks again) naming each blocking check; the report is in XCom and on the mirror's history all the same.
Before a switchover only foreign records and other writers block (SWITCHOVER_BLOCKS: the rest the switchover's
final run copies and syncs, or the switchover refuses), and the Param ``ignore_readiness`` lets the run go on
with a NOT READY report (logged). A mirror
that does not copy (a stopped switchover that continues, a switched-over or promoted mirror) is not judged, nor is
a cancel.
"""

from __future__ import annotations

import logging
from typing import Any

from eosmirror.airflow.compat import fail_exception
from eosmirror.airflow.tasks import fail_without_retry
from eosmirror.core import config
from eosmirror.core import readiness as rules
from eosmirror.core.errors import ConfigError
from eosmirror.core.mirrorstate import Phase
from eosmirror.driver import readiness
from eosmirror.driver.lag import Clusters
from eosmirror.kafka import state

log = logging.getLogger(__name__)


# Before a switchover only what the switchover cannot repair or refuse by itself blocks: records on the target
# the mirror did not write, and principals other than the mirror that can write it. Lag, missing or drifted
# topics and configs are what its final run copies and syncs; open transactions it refuses itself.
SWITCHOVER_BLOCKS = ("foreign", "writers")


def assess(mirror_name: str, config_path: str | None = None, go_on: bool = False,
           blocks: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Make and record the report; fail (no retry) when NOT READY unless ``go_on``. A mirror that does not copy
    (switching over, switched over, promoted ...) is not judged: the task says so and succeeds. ``blocks``: the
    checks whose NOT READY fails the task (None: every check; the switchover's gate: SWITCHOVER_BLOCKS, the
    others are logged)."""
    try:
        mirror = config.load(config_path).get(mirror_name)
    except ConfigError as exc:
        log.error("%s", exc)
        raise fail_without_retry(exc) from None
    current = state.read_mirror_state(Clusters.of(mirror).target, mirror.name, mirror.progress_group)
    if current.phase is not Phase.MIRRORING:
        # Readiness asks whether the target could take over; after a switch it has (or the switch is under way).
        log.info("mirror %s is %s: no readiness to judge", mirror_name, current.describe())
        return {"skipped": f"the mirror is {current.describe()}"}
    found = readiness.report(mirror, record=True)
    log.info("readiness of %s:\n%s", mirror_name, found.text())
    document = found.as_dict()
    blocking = [c for c in found.checks if c.verdict == rules.NOT_READY and (blocks is None or c.name in blocks)]
    for c in found.checks:
        if c.verdict == rules.NOT_READY and c not in blocking:
            log.warning("readiness of %s: %s is NOT READY (%s): the switchover's own steps see to it", mirror_name,
                        c.name, c.reason)
    if blocking:
        said = f"mirror {mirror_name}: NOT READY: " + "; ".join(f"{c.name}: {c.reason}" for c in blocking)
        if not go_on:
            raise fail_exception()(said)
        log.warning("%s (ignore_readiness: going on)", said)
    return document


def before_switchover(mirror_name: str, config_path: str | None, params: dict[str, Any]) -> dict[str, Any]:
    """The switchover DAG's gate: the readiness report of a mirror still mirroring (not for a cancel, nor for a
    stopped switchover that continues)."""
    if params.get("cancel"):
        return {"skipped": "a cancel is not judged by readiness"}
    return assess(mirror_name, config_path, go_on=bool(params.get("ignore_readiness")), blocks=SWITCHOVER_BLOCKS)
