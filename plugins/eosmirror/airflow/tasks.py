"""What the Airflow tasks of eosmirror do. Airflow is imported inside functions only.

Mirror DAG, per run:
  preflight  config valid, both clusters reachable, target topics created/grown/in sync
  copy       the bounded Spark job (``MirrorSparkSubmitOperator``, a SparkSubmitOperator)
             It returns the job's run report (XCom), read off spark-submit's output: nothing
             travels through local files, so each task may run on a different host
  publish    summarise that report to XCom and the log, emit one Asset event per target topic
             that received records

The copy bound (``until``): the Param if given; else the data interval's end for scheduled and
backfill runs (so a run is deterministic and re-running an old interval copies nothing); else
(manual runs) now.

Secrets: cluster settings resolved from Airflow connections reach the Spark job in a 0600 file
named by ``EOSMIRROR_CLUSTERS_FILE`` (an environment variable of the spark-submit process, not an
argument), deleted when the job ends. Nothing with a secret goes to argv, logs, XCom or reports.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from eosmirror.core import config, report
from eosmirror.core.errors import EXIT_CONFIG
from eosmirror.kafka import connections
from eosmirror.spark import submit

MIGRATE_DAG_ID = "eosmirror_migrate"
log = logging.getLogger(__name__)

SCHEDULED_RUN_TYPES = ("scheduled", "backfill")


def _run_type(context: dict[str, Any]) -> str:
    dag_run = context.get("dag_run")
    value = getattr(dag_run, "run_type", "") or ""
    return str(getattr(value, "value", value)).lower()


def resolve_until(context: dict[str, Any]) -> tuple[str, str]:
    """(until as ISO-8601, why) for this run."""
    params = context.get("params") or {}
    if params.get("until"):
        from eosmirror.spark.job import parse_timestamp

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
    interval = dt.timedelta(seconds=config.schedule_interval_seconds(str(mirror.airflow.schedule)))
    if now >= end + interval:
        return None, f"a catch-up run of a past interval (ended {end.isoformat()}) never follows"
    bound = end + dt.timedelta(seconds=mirror.follow_bound_seconds)
    return bound.isoformat(), f"the latest scheduled interval: follows until the next run takes over, at most until {bound.isoformat()}"


RUN_PARAMS = ("until", "max_records_per_partition", "topics", "dry_run")


def run_options(context: dict[str, Any]) -> Any:
    """The run's options from its Params, validated exactly as the Spark job will validate them.

    A key of the run's conf that is no Param is refused by name (a misspelt `max_records` must not
    silently mean "no limit").
    """
    from eosmirror.core.errors import ConfigError
    from eosmirror.driver.run import RunOptions
    from eosmirror.spark.job import parse_timestamp

    dag_run = context.get("dag_run")
    unknown = sorted(set(getattr(dag_run, "conf", None) or {}) - set(RUN_PARAMS))
    if unknown:
        raise ConfigError(f"unknown key(s) in the run's conf: {', '.join(unknown)}; the mirror DAG takes "
                          f"{', '.join(RUN_PARAMS)}")
    params = context.get("params") or {}
    return RunOptions(until=parse_timestamp(str(params["until"])) if params.get("until") else None,
                      dry_run=bool(params.get("dry_run")), topics=tuple(params.get("topics") or ()),
                      max_records_per_partition=params.get("max_records_per_partition"))


def fail_without_retry(exc: Exception) -> Exception:
    """A configuration or Param error is not transient: fail the task now, never retry it."""
    from eosmirror.airflow.compat import fail_exception

    return fail_exception()(f"{type(exc).__name__}: {exc}")


def preflight(mirror_name: str, config_path: str | None = None, context: dict[str, Any] | None = None,
              ) -> dict[str, Any]:
    """Config and Params valid, both clusters reachable, the run's topics exist, target topics in sync.

    Bad configuration or Params fail here at once, without retries, with the message the CLI prints;
    unreachable clusters and other transient faults keep the task's retries.
    """
    from eosmirror.core.errors import ConfigError
    from eosmirror.driver.run import MirrorRun

    try:
        mirror = config.load(config_path).get(mirror_name)
        outcome = MirrorRun(mirror, run_options(context or {})).preflight()
    except ConfigError as exc:
        log.error("%s", exc)
        raise fail_without_retry(exc) from None
    log.info("preflight of %s: %s", mirror_name, outcome["topic_sync"])
    return outcome


def written_per_topic(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per target topic: records written and, per partition, the target offsets [from, to) this run's
    transactions occupy, so a downstream DAG reads exactly the new records (read_committed: the
    range also holds transaction markers, which consumers never see)."""
    out: dict[str, dict[str, Any]] = {}
    for slot in result.get("slots", []):
        for part in slot.get("partitions", []):
            topic = out.setdefault(part["target_topic"], {"records": 0, "partitions": []})
            topic["records"] += part["records"]
            if part["records"] and part.get("target_from") is not None:
                topic["partitions"].append({"partition": part["partition"], "from": part["target_from"],
                                            "to": part["target_to"], "records": part["records"]})
    for topic in out.values():
        topic["partitions"].sort(key=lambda p: p["partition"])
    return out


def publish(mirror_name: str, context: dict[str, Any]) -> dict[str, Any]:
    """Summarise the run report that ``copy`` returned (XCom) and emit one Asset event per target topic."""
    from airflow.sdk import Asset, AssetAlias

    result = context["ti"].xcom_pull(task_ids="copy")
    if not isinstance(result, dict):
        raise RuntimeError(f"mirror {mirror_name}: the copy task returned no run report (got "
                           f"{type(result).__name__}); see the copy task's log")
    per_topic = written_per_topic(result)
    bootstrap = result.get("target_bootstrap", "")
    alias = AssetAlias(asset_alias(mirror_name))
    for topic, written in sorted(per_topic.items()):
        if written["records"] and bootstrap:
            context["outlet_events"][alias].add(Asset(uri=f"kafka://{bootstrap}/{topic}"),
                                                extra={**written, "run_id": result.get("run_id")})
    per_topic = {topic: written["records"] for topic, written in per_topic.items()}
    summary = {"mirror": mirror_name, "status": result.get("status"), "records": result.get("records", 0),
               "bytes": result.get("bytes", 0), "until": result.get("until"), "generation": result.get("generation"),
               "records_per_topic": per_topic, "errors": result.get("errors", []),
               "slots": [{"slot": s["slot"], "status": s["status"], "records": s.get("records", 0)}
                         for s in result.get("slots", [])]}
    log.info("%s", report.summary(result) if "slots" in result else summary)
    rows = report.partitions(result)
    left = sum(r["left"] for r in rows)
    summary["partitions"], summary["left"] = rows, left
    if rows:
        log.info("per partition:\n%s", report.partitions_table(rows))
    if left:
        log.warning("%d offsets are left below this run's bound (a record cap or a failed slot); the next "
                    "run continues from there: %s", left,
                    ", ".join(f"{r['source_topic']}[{r['partition']}] {r['left']}" for r in rows if r["left"]))
    if result.get("dry_run"):   # a dry run's whole point is its plan: show it, in the log and in XCom
        summary["plan"] = result.get("plan", [])
        summary["pending"] = sum(p.get("pending", 0) for p in summary["plan"])
        log.info("dry run: the plan (%d offsets to read; nothing was written)\n%s", summary["pending"],
                 report.plan_table(result))
    return summary


def asset_alias(mirror_name: str) -> str:
    return f"eosmirror-{mirror_name}-targets"


def fence(mirror_name: str, all_generations: bool, config_path: str | None = None) -> dict[str, Any]:
    from eosmirror.driver import fencing

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
    from eosmirror.core.errors import ConfigError
    from eosmirror.driver import takeover
    from eosmirror.driver.migrate import RefusedError

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


def _resolved_clusters(mirror: config.MirrorConfig) -> dict[str, dict[str, Any]]:
    """Settings of the mirror's connection-based clusters (resolved through Airflow in the worker)."""
    out = {}
    for role, ref in (("source", mirror.source), ("target", mirror.target)):
        if ref.connection:
            out[ref.connection] = connections.resolve(ref, f"mirror {mirror.name!r}: {role}")
    return out


ON_KILL_STOP_SECONDS = 10.0    # bound of stopping the Spark application (a SIGKILL; a REST or yarn call on clusters)
ON_KILL_FENCE_SECONDS = 20.0   # bound of fencing the killed run's transactional ids and checking the target


def _bounded(fn: Callable[[], None], seconds: float, what: str, logger: Any) -> bool:
    """Run ``fn`` in a daemon thread for at most ``seconds``: on_kill must end in time (the task
    supervisor sends SIGKILL 5 s after SIGTERM). True if it finished without an error."""
    failed: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - logged below
            failed.append(exc)

    thread = threading.Thread(target=target, name=f"eosmirror-on-kill-{what}", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        logger.warning("on_kill: could not %s within %.0f s; it goes on in the background", what, seconds)
        return False
    if failed:
        logger.error("on_kill: could not %s: %s", what, failed[0])
        return False
    return True


def stop_copy(operator: Any, provider_on_kill: Callable[[], None]) -> None:
    """on_kill of the copy task (execution timeout, task marked failed or cleared, worker shutdown).

    1. Stop the Spark application: the provider's on_kill (SIGKILL of spark-submit, which is the
       driver JVM in client mode; the driver kill on a standalone cluster; the YARN kill). First,
       so that no slot starts after step 2.
    2. Fence the mirror's transactional ids (the planner and the current generation's slots): the
       broker aborts every open transaction of the killed run at once, so read_committed consumers
       of the target are unblocked (last stable offset = high watermark) without waiting for the
       transaction timeout. A run of the same mirror started elsewhere meanwhile fails cleanly (the
       next run continues from the committed progress); the DAG's max_active_runs=1 keeps Airflow's
       own runs apart.
    Each step is bounded. The slots' lifeline (eosmirror.slot.lifeline) aborts their transactions too
    when their JVM is gone, so the target is unblocked even if this process dies before step 2 ends.
    """
    logger = operator.log
    started = time.monotonic()
    process = getattr(getattr(operator, "_hook", None), "_submit_sp", None)
    if _bounded(provider_on_kill, ON_KILL_STOP_SECONDS, "stop the Spark application", logger):
        logger.info("on_kill: mirror %s: Spark application stopped (spark-submit pid %s) in %.1f s", operator.mirror,
                    getattr(process, "pid", "not started"), time.monotonic() - started)

    def fence() -> None:
        from eosmirror.driver import fencing

        mirror = config.load(operator.config_path).get(operator.mirror)
        outcome = fencing.fence_mirror(
            mirror, all_generations=False, settle_seconds=ON_KILL_FENCE_SECONDS / 2, timeout=ON_KILL_FENCE_SECONDS / 2,
            on_fenced=lambda ids: logger.info("on_kill: mirror %s: fenced %s in %.1f s", operator.mirror,
                                              ", ".join(ids), time.monotonic() - started))
        logger.info("on_kill: %s", fencing.format_outcome(outcome))

    if not _bounded(fence, ON_KILL_FENCE_SECONDS, "fence the mirror's transactional ids", logger):
        logger.warning("on_kill: mirror %s: if read_committed consumers of the target stay stuck, run the "
                       "eosmirror_fence DAG for it", operator.mirror)


class StopsAndFencesOnKill:
    """Mixin of the copy operator (kept outside ``operator_class`` so that no Airflow import is
    needed to define it): on_kill stops Spark, then fences (``stop_copy``)."""

    def on_kill(self) -> None:
        stop_copy(self, super().on_kill)  # type: ignore[misc]


def _capture_report(operator: Any, lines: Any) -> Any:
    """spark-submit's output lines, minus the run report line, which goes to ``operator.run_report``
    (not logged raw: the summary printed above it is the readable form)."""
    for line in lines:
        found = report.parse_result_line(line if isinstance(line, str) else line.decode(errors="replace"))
        if found is None:
            yield line
        else:
            operator.run_report = found


def _job_arguments(operator: Any, context: Any) -> list[str]:
    """The packaged job's arguments for this run: the copy bound and the manual Params."""
    params = context.get("params") or {}
    until, why = resolve_until(context)
    operator.log.info("mirror %s: copying what lies below the source offsets of %s (%s)", operator.mirror, until, why)
    # Always an absolute --config: with --py-files the job imports eosmirror from the zip,
    # whose location says nothing about where the mirror definitions are.
    config_file = str(Path(operator.config_path or config.default_config_path()).resolve())
    follow_until, why = resolve_follow_until(config.load(config_file).get(operator.mirror), context)
    operator.log.info("mirror %s: %s", operator.mirror, why)
    return submit.job_arguments(operator.mirror, config_file, until=until, follow_until=follow_until,
                                max_records_per_partition=params.get("max_records_per_partition"),
                                topics=list(params.get("topics") or []) or None, dry_run=bool(params.get("dry_run")))


def _submit_with_secrets_file(operator: Any, context: Any, submit_job: Any) -> None:
    """Run ``submit_job`` with the resolved cluster settings in a 0600 file named by an environment
    variable of spark-submit (never its argv); the file is deleted afterwards."""
    mirror = config.load(operator.config_path).get(operator.mirror)
    env = {k: v for k, v in submit.process_env({}).items()
           if k in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME", "SPARK_LOCAL_IP")}
    if operator.config_path:
        env["EOSMIRROR_CONFIG"] = str(operator.config_path)
    clusters = _resolved_clusters(mirror)
    secrets_dir = tempfile.mkdtemp(prefix="eosmirror-clusters-") if clusters else None
    try:
        if secrets_dir:
            env[connections.CLUSTERS_FILE_ENV] = str(connections.write_clusters_file(
                Path(secrets_dir) / "clusters.json", clusters))
        operator.env_vars = env
        operator._hook = None   # the hook reads application_args/env_vars when it is built
        submit_job(context)
    finally:
        if secrets_dir:
            for name in os.listdir(secrets_dir):
                os.unlink(os.path.join(secrets_dir, name))
            os.rmdir(secrets_dir)


def _run_here_when_nothing_to_copy(operator: Any) -> dict[str, Any] | None:
    """With no record pending and no follow, the run needs no Spark: its slots' keep-alive commits run
    in this task's process (as ``eosmirror run`` does), and the report is the copy task's XCom as
    always. None: there is work, so Spark runs it."""
    from eosmirror.core.errors import ConfigError
    from eosmirror.driver.run import run_in_process
    from eosmirror.spark import job

    args = job.parser().parse_args(operator.application_args)
    mirror = config.load(args.config).get(args.mirror)
    if not job.nothing_to_copy(mirror, args):
        return None
    operator.log.info("mirror %s: nothing to copy: the slots refresh their progress in this task, without Spark",
                      operator.mirror)
    try:
        code, result = job.run(args.mirror, args, run_in_process)
    except ConfigError as exc:
        operator.log.error("%s", exc)
        raise fail_without_retry(exc) from None
    operator.log.info("%s", report.summary(result))
    if code:
        raise RuntimeError(f"mirror {operator.mirror}: the run failed: {'; '.join(result.get('errors', []))}")
    return result


@functools.cache
def operator_class() -> type:
    """``MirrorSparkSubmitOperator``: built on first use so that importing eosmirror needs no Airflow."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    class MirrorSparkSubmitOperator(StopsAndFencesOnKill, SparkSubmitOperator):
        """SparkSubmitOperator running one bounded eosmirror run of ``mirror``.

        Builds the job arguments from the run (the copy bound, manual Params), ships the executor
        code with ``--py-files`` for executors on other hosts, hands connection secrets to the job
        in a 0600 file instead of the command line, and returns the job's run report (XCom).
        """

        ui_color = "#fde8c8"

        def __init__(self, *, mirror: str, config_path: str | None = None, **kwargs: Any):
            super().__init__(**kwargs)
            self.mirror = mirror
            self.config_path = config_path
            self.run_report: dict[str, Any] | None = None

        def _get_hook(self) -> Any:
            """The provider's hook, reading the run report off spark-submit's output as it streams by."""
            hook = super()._get_hook()
            process = hook._process_spark_submit_log
            hook._process_spark_submit_log = lambda itr: process(_capture_report(self, itr))
            return hook

        def execute(self, context: Any) -> dict[str, Any]:
            self.run_report = None
            self.application_args = _job_arguments(self, context)
            here = _run_here_when_nothing_to_copy(self)
            if here is not None:
                return here
            self.py_files = str(submit.package_zip())
            try:
                _submit_with_secrets_file(self, context, super().execute)
            except Exception as exc:
                if (self.run_report or {}).get("exit_code") == EXIT_CONFIG:   # exit 2: never retried
                    raise fail_without_retry(RuntimeError(self.run_report.get("error", str(exc)))) from None
                raise
            if self.run_report is None:
                raise RuntimeError(f"mirror {self.mirror}: the Spark job ended without printing its run report")
            return self.run_report

        def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
            """OpenLineage (with the provider installed): source topics in, target topics out, record counts."""
            from eosmirror.airflow import lineage

            report = self.run_report or {}
            return lineage.operator_lineage(report, lineage.source_bootstrap(self.mirror, self.config_path),
                                            report.get("target_bootstrap", ""))

    return MirrorSparkSubmitOperator
