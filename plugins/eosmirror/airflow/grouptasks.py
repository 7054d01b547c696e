"""The body of the ``eosmirror_groups__<mirror>`` DAGs' task (``operators.GroupSyncOperator``): consumer-group
failover/failback. No Airflow import: the operator class holds it.

Scheduled runs sync in the failover direction with the mirror's ``groups`` settings, so the target
groups follow the source groups (only while they are empty there: a group with consumers on the
target is skipped). Manual runs take Params: ``direction``, ``dry_run``, ``allow_rewind`` and a
``groups`` subset. A bad Param or mirror definition fails at once and is never retried; the report
goes to XCom and, as a table per group, to the task log.
"""

from __future__ import annotations

import logging
from typing import Any

from eosmirror.airflow.tasks import fail_without_retry
from eosmirror.core import config, groupfailover, report
from eosmirror.core.errors import EXIT_GROUPS_LEFT, ConfigError, EosMirrorError
from eosmirror.driver import groups
from eosmirror.driver.groups import GroupMoveOptions

log = logging.getLogger(__name__)

GROUP_PARAMS = ("direction", "dry_run", "allow_rewind", "groups")


def group_options(mirror: config.MirrorConfig, context: dict[str, Any]) -> Any:
    """The run's options from its Params; a conf key that is no Param is refused by name."""

    dag_run = context.get("dag_run")
    unknown = sorted(set(getattr(dag_run, "conf", None) or {}) - set(GROUP_PARAMS))
    if unknown:
        raise ConfigError(f"unknown key(s) in the run's conf: {', '.join(unknown)}; the group DAG takes "
                          f"{', '.join(GROUP_PARAMS)}")
    params = context.get("params") or {}
    direction = params.get("direction") or groupfailover.FAILOVER
    groups = params.get("groups") or []
    if not isinstance(groups, list) or not all(isinstance(g, str) and g for g in groups):
        raise ConfigError(f"mirror {mirror.name!r}: Param `groups` must be a list of group ids, got {groups!r}")
    options = GroupMoveOptions(direction=str(direction), dry_run=bool(params.get("dry_run")),
                               allow_rewind=True if params.get("allow_rewind") else None, groups=tuple(groups))
    options.check(mirror)
    return options


def move_groups(mirror_name: str, config_path: str | None, context: dict[str, Any]) -> dict[str, Any]:
    """Plan and (unless a dry run) write; the report is the return value (XCom)."""

    try:
        mirror = config.load(config_path).get(mirror_name)
        options = group_options(mirror, context)
    except ConfigError as exc:
        log.error("%s", exc)
        raise fail_without_retry(exc) from None
    result = groups.move_groups(mirror, options)
    table = report.groups_table(result)
    log.info("consumer groups of mirror %s:\n%s", mirror_name, table)
    code = groups.exit_code(result)
    if code == EXIT_GROUPS_LEFT:
        # A failback is an operator's one-time act: a retry would leave the same partitions again.
        left = [f"{g['group']} ({sum(g['left'].values())})" for g in result["groups"] if g["left"]]
        raise fail_without_retry(EosMirrorError(
            f"mirror {mirror_name}: the failback left partitions of {', '.join(left)} unmoved (what was writable was "
            f"written); the table says which and why:\n{table}"))
    if code:
        failed = [g["group"] for g in result["groups"] if g["error"]]
        raise RuntimeError(f"mirror {mirror_name}: writing the offsets of {', '.join(failed)} failed and was rolled "
                           f"back; the retry writes them again (every write is one transaction)")
    return result
