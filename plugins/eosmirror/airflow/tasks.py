"""What the Airflow tasks of eosmirror do. Airflow is imported inside functions only.

Mirror DAG, per run:
  preflight  config valid, both clusters reachable, target topics created/grown/in sync
  copy       the bounded Spark job (``MirrorCopyOperator``, a SparkSubmitOperator)
             It returns the job's run report (XCom), read off spark-submit's output: nothing
             travels through local files, so each task may run on a different host
  publish    summarise that report to XCom and the log, emit one Asset event per target topic
             that received records

The copy bound (``until``): the operator's ``until`` or the Param if given; else the data interval's end for scheduled and
backfill runs (so a run is deterministic and re-running an old interval copies nothing); else
(manual runs) now.

The operators are ``eosmirror.airflow.operators``; the copy task's body (its secrets file, on_kill) is
``eosmirror.airflow.copytask``.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from eosmirror.airflow.compat import fail_exception
from eosmirror.airflow.dagids import MIGRATE_DAG_ID
from eosmirror.core import config, report, runreport
from eosmirror.core.errors import ConfigError
from eosmirror.core.fieldkinds import schedule_interval_seconds
from eosmirror.core.runreport import RunReport
from eosmirror.driver import fencing, takeover
from eosmirror.driver.migrate import RefusedError
from eosmirror.driver.run import MirrorRun, RunOptions
from eosmirror.spark.job import parse_timestamp

log = logging.getLogger(__name__)

SCHEDULED_RUN_TYPES = ("scheduled", "backfill")


def _run_type(context: dict[str, Any]) -> str:
    dag_run = context.get("dag_run")
    value = getattr(dag_run, "run_type", "") or ""
    return str(getattr(value, "value", value)).lower()


def with_params(context: Any, **given: Any) -> Any:
    """``context`` with the values an operator was given (rendered templates, None when not given) in place of
    the run's Params of the same names; ``context`` itself when none was given."""
    given = {k: v for k, v in given.items() if v not in (None, "")}
    if not given:
        return context
    return {**context, "params": {**(context.get("params") or {}), **given}}


def resolve_until(context: dict[str, Any]) -> tuple[str, str]:
    """(until as ISO-8601, why) for this run."""
    params = context.get("params") or {}
    if params.get("until"):
        return parse_timestamp(str(params["until"])).isoformat(), "the run's `until` parameter"
    end = context.get("data_interval_end")
    if _run_type(context) in SCHEDULED_RUN_TYPES and end is not None:
        return end.isoformat(), f"the end of the data interval ({_run_type(context)} run)"
    return dt.datetime.now(dt.timezone.utc).isoformat(), "now (manual run)"


def resolve_follow_until(mirror: Any, context: dict[str, Any], now: dt.datetime | None = None,
                         ) -> tuple[str | None, str]:
    """(follow bound as ISO-8601 or None, why) for this run. Only a scheduled run of the LATEST
    interval of a ``follow: true`` mirror follows: its data interval ended less than one schedule
    interval ago (else it is a catch-up run of a past interval, and the next run is already due).
    Backfill and manual runs, and runs with an explicit `until` or a dry run, never follow. The bound
    is the interval's end plus ``follow_bound_seconds`` (2 schedule intervals by default), so that
    a missed next run cannot leave the run following for ever."""
    if not mirror.follow:
        return None, "the mirror does not follow"
    params = context.get("params") or {}
    run_type, end = _run_type(context), context.get("data_interval_end")
    if run_type != "scheduled" or end is None:
        return None, f"{run_type or 'manual'} runs never follow"
    if params.get("until") or params.get("dry_run"):
        return None, "a run with an explicit `until` or a dry run never follows"
    now = now or dt.datetime.now(dt.timezone.utc)
    interval = dt.timedelta(seconds=schedule_interval_seconds(str(mirror.airflow.schedule)))
    if now >= end + interval:
        return None, f"a catch-up run of a past interval (ended {end.isoformat()}) never follows"
    bound = end + dt.timedelta(seconds=mirror.follow_bound_seconds)
    return bound.isoformat(), f"the latest scheduled interval: follows until the next run takes over, at most until {bound.isoformat()}"


RUN_PARAMS = ("until", "max_records_per_partition", "topics", "dry_run", "accept_foreign")


def run_options(context: dict[str, Any]) -> Any:
    """The run's options from its Params, validated exactly as the Spark job will validate them.

    A key of the run's conf that is no Param is refused by name (a misspelt `max_records` must not
    silently mean "no limit").
    """

    dag_run = context.get("dag_run")
    unknown = sorted(set(getattr(dag_run, "conf", None) or {}) - set(RUN_PARAMS))
    if unknown:
        raise ConfigError(f"unknown key(s) in the run's conf: {', '.join(unknown)}; the mirror DAG takes "
                          f"{', '.join(RUN_PARAMS)}")
    params = context.get("params") or {}
    return RunOptions(until=parse_timestamp(str(params["until"])) if params.get("until") else None,
                      dry_run=bool(params.get("dry_run")), topics=tuple(params.get("topics") or ()),
                      max_records_per_partition=params.get("max_records_per_partition"),
                      accept_foreign=bool(params.get("accept_foreign")))


def fail_without_retry(exc: Exception) -> Exception:
    """A configuration or Param error is not transient: fail the task now, never retry it."""

    return fail_exception()(f"{type(exc).__name__}: {exc}")


def preflight(mirror_name: str, config_path: str | None = None, context: dict[str, Any] | None = None,
              ) -> dict[str, Any]:
    """Config and Params valid, both clusters reachable, the run's topics exist, target topics in sync.

    Bad configuration or Params fail here at once, without retries, with the message the CLI prints;
    unreachable clusters and other transient faults keep the task's retries.
    """

    try:
        mirror = config.load(config_path).get(mirror_name)
        outcome = MirrorRun(mirror, run_options(context or {})).preflight()
    except ConfigError as exc:
        log.error("%s", exc)
        raise fail_without_retry(exc) from None
    log.info("preflight of %s: %s", mirror_name, outcome["topic_sync"])
    return outcome


def written_per_topic(result: RunReport) -> dict[str, dict[str, Any]]:
    """Per target topic: records written and, per partition, the target offsets [from, to) this run's
    transactions occupy, so a downstream DAG reads exactly the new records (read_committed: the
    range also holds transaction markers, which consumers never see)."""
    out: dict[str, dict[str, Any]] = {}
    for slot in result.slots:
        for part in slot.partitions:
            topic = out.setdefault(part.target_topic, {"records": 0, "partitions": []})
            topic["records"] += part.records
            if part.records and part.target_from is not None:
                topic["partitions"].append({"partition": part.partition, "from": part.target_from,
                                            "to": part.target_to, "records": part.records})
    for topic in out.values():
        topic["partitions"].sort(key=lambda p: p["partition"])
    return out


def copy_report(mirror_name: str, context: dict[str, Any]) -> runreport.Report:
    """The run report that ``copy`` returned (XCom: its JSON, versioned or from an older release)."""
    value = context["ti"].xcom_pull(task_ids="copy")
    if not isinstance(value, dict):
        raise RuntimeError(f"mirror {mirror_name}: the copy task returned no run report (got "
                           f"{type(value).__name__}); see the copy task's log")
    return runreport.from_dict(value)


def publish(mirror_name: str, context: dict[str, Any]) -> dict[str, Any]:
    """Summarise the run report that ``copy`` returned (XCom) and emit one Asset event per target topic.
    The summary (XCom) keeps the keys it always had; a failure report (the run stopped before its
    slots) has no slots, plan or records."""
    from airflow.sdk import Asset, AssetAlias

    result = copy_report(mirror_name, context)
    full = result if isinstance(result, RunReport) else None
    per_topic = written_per_topic(full) if full else {}
    bootstrap = full.target_bootstrap if full else ""
    alias = AssetAlias(asset_alias(mirror_name))
    for topic, written in sorted(per_topic.items()):
        if written["records"] and bootstrap:
            context["outlet_events"][alias].add(Asset(uri=f"kafka://{bootstrap}/{topic}"),
                                                extra={**written, "run_id": result.run_id})
    records = {topic: written["records"] for topic, written in per_topic.items()}
    summary = {"mirror": mirror_name, "status": result.status.value, "records": full.records if full else 0,
               "bytes": full.bytes if full else 0, "until": full.until if full else None,
               "generation": full.generation if full else None, "records_per_topic": records,
               "errors": full.errors if full else [],
               "slots": [{"slot": s.slot, "status": s.status.value, "records": s.records}
                         for s in (full.slots if full else [])]}
    log.info("%s", report.summary(full) if full else summary)
    rows = report.partitions(full) if full else []
    left = sum(r["left"] for r in rows)
    summary["partitions"], summary["left"] = rows, left
    if rows:
        log.info("per partition:\n%s", report.partitions_table(rows))
    if left:
        log.warning("%d offsets are left below this run's bound (a record cap or a failed slot); the next "
                    "run continues from there: %s", left,
                    ", ".join(f"{r['source_topic']}[{r['partition']}] {r['left']}" for r in rows if r["left"]))
    if full and full.dry_run:   # a dry run's whole point is its plan: show it, in the log and in XCom
        summary["plan"] = [runreport.plan_dict(p) for p in full.plan]
        summary["pending"] = full.pending
        log.info("dry run: the plan (%d offsets to read; nothing was written)\n%s", summary["pending"],
                 report.plan_table(full.plan))
    return summary


def asset_alias(mirror_name: str) -> str:
    return f"eosmirror-{mirror_name}-targets"


def fence(mirror_name: str, all_generations: bool, config_path: str | None = None) -> dict[str, Any]:
    mirror = config.load(config_path).get(mirror_name)
    outcome = fencing.fence_mirror(mirror, all_generations=all_generations)
    log.info("%s", fencing.format_outcome(outcome))
    if not outcome["unblocked"]:
        raise RuntimeError(fencing.format_outcome(outcome))
    return outcome


def migrate(mirror_name: str, origin: str, dry_run: bool, config_path: str | None = None,
            context: dict[str, Any] | None = None) -> dict[str, Any]:
    """The eosmirror_migrate DAG's task: a refusal or a bad Param fails at once and is never retried
    (nothing was written; retrying would not change the answer)."""

    context = context or {}
    who = f"airflow:{MIGRATE_DAG_ID}/{context.get('run_id') or '?'}"
    try:
        mirror = config.load(config_path).get(mirror_name)
        outcome = takeover.take_over(mirror, origin, dry_run=dry_run, who=who)
    except (ConfigError, RefusedError) as exc:
        log.error("%s", exc)
        raise fail_without_retry(exc) from None
    log.info("%s", takeover.format_outcome(outcome))
    return outcome
