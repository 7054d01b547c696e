"""The body of the mirror DAG's ``copy`` task (``operators.MirrorCopyOperator``, a SparkSubmitOperator running
one bounded eosmirror run): its job arguments, the secrets file, the run report read off spark-submit's output,
the empty run without Spark, and on_kill (stop Spark, then fence). No Airflow import: the operator class holds it.

Secrets: cluster settings resolved from Airflow connections reach the Spark job in a 0600 file
named by ``EOSMIRROR_CLUSTERS_FILE`` (an environment variable of the spark-submit process, not an
argument), deleted when the job ends. Nothing with a secret goes to argv, logs, XCom or reports.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from eosmirror.airflow import sparkadapter
from eosmirror.airflow.tasks import fail_without_retry, resolve_follow_until, resolve_until, with_params
from eosmirror.core import config, report
from eosmirror.core.errors import EXIT_CONFIG, EXIT_FOREIGN, ConfigError, ForeignWriteError
from eosmirror.core.runreport import RunFailure, RunReport
from eosmirror.driver import fencing
from eosmirror.driver.run import run_in_process
from eosmirror.kafka import connections
from eosmirror.spark import job, launch, serverclient, submit


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
    process = sparkadapter.submit_process(operator)
    if _bounded(provider_on_kill, ON_KILL_STOP_SECONDS, "stop the Spark application", logger):
        logger.info("on_kill: mirror %s: Spark application stopped (spark-submit pid %s) in %.1f s", operator.mirror,
                    getattr(process, "pid", "not started"), time.monotonic() - started)

    def fence() -> None:
        mirror = getattr(operator, "mirror_config", None) or config.load(operator.config_path).get(operator.mirror)
        outcome = fencing.fence_mirror(
            mirror, all_generations=False, settle_seconds=ON_KILL_FENCE_SECONDS / 2, timeout=ON_KILL_FENCE_SECONDS / 2,
            on_fenced=lambda ids: logger.info("on_kill: mirror %s: fenced %s in %.1f s", operator.mirror,
                                              ", ".join(ids), time.monotonic() - started))
        logger.info("on_kill: %s", fencing.format_outcome(outcome))

    if not _bounded(fence, ON_KILL_FENCE_SECONDS, "fence the mirror's transactional ids", logger):
        logger.warning("on_kill: mirror %s: if read_committed consumers of the target stay stuck, run the "
                       "eosmirror_fence DAG for it", operator.mirror)


def capture_report(operator: Any, lines: Any) -> Any:
    """spark-submit's output lines, minus the run report line, which goes to ``operator.run_report``
    (not logged raw: the summary printed above it is the readable form)."""
    for line in lines:
        found = report.parse_result_line(line if isinstance(line, str) else line.decode(errors="replace"))
        if found is None:
            yield line
        else:
            operator.run_report = found


def _read_mirror(operator: Any) -> tuple[config.MirrorConfig, str]:
    """(the mirror, the absolute path of its file): the copy task's one read of the mirrors file.
    Always an absolute --config: with --py-files the job imports eosmirror from the zip, whose
    location says nothing about where the mirror definitions are."""
    config_file = str(Path(operator.config_path or config.default_config_path()).resolve())
    return config.load(config_file).get(operator.mirror), config_file


def _job_arguments(operator: Any, context: Any, mirror: config.MirrorConfig, config_file: str) -> list[str]:
    """The packaged job's arguments for this run: the copy bound and the manual Params (the operator's own
    ``until``, when given, in place of the Param)."""
    context = with_params(context, until=getattr(operator, "until", None))
    params = context.get("params") or {}
    until, why = resolve_until(context)
    operator.log.info("mirror %s: copying what lies below the source offsets of %s (%s)", operator.mirror, until, why)
    follow_until, why = resolve_follow_until(mirror, context)
    operator.log.info("mirror %s: %s", operator.mirror, why)
    return submit.job_arguments(operator.mirror, config_file, until=until, follow_until=follow_until,
                                max_records_per_partition=params.get("max_records_per_partition"),
                                topics=list(params.get("topics") or []) or None, dry_run=bool(params.get("dry_run")),
                                accept_foreign=bool(params.get("accept_foreign")))


def _submit_with_secrets_file(operator: Any, context: Any, submit_job: Any, mirror: config.MirrorConfig) -> None:
    """Run ``submit_job`` with the resolved cluster settings in a 0600 file named by an environment
    variable of spark-submit (never its argv); the file is deleted afterwards."""
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
        sparkadapter.rebuild_hook(operator)   # the hook reads application_args/env_vars when it is built
        submit_job(context)
    finally:
        if secrets_dir:
            for name in os.listdir(secrets_dir):
                os.unlink(os.path.join(secrets_dir, name))
            os.rmdir(secrets_dir)


def _decide(operator: Any, mirror: config.MirrorConfig) -> tuple[launch.Launch, argparse.Namespace]:
    """How this run executes (spark/launch.py): in this task's process when there is nothing to copy
    (or a dry run), in the run server with ``airflow.run_server`` and a server of this code answering
    on this worker, else spark-submit. A bad Param fails at once, without retries."""
    try:
        args = job.parser().parse_args(operator.application_args)
        how = launch.decide(mirror, args, job.options_from(args), run_server=mirror.airflow.run_server)
    except (ConfigError, ForeignWriteError) as exc:   # a data problem is not retried either: an operator decides
        operator.log.error("%s", exc)
        raise fail_without_retry(exc) from None
    (operator.log.warning if how.warning else operator.log.info)("mirror %s: %s", operator.mirror, how.why)
    return how, args


def _run_here(operator: Any, mirror: config.MirrorConfig, how: launch.Launch, args: argparse.Namespace) -> RunReport:
    """The run in this task's process (``how.planned``: the plan that found nothing to copy, which the
    run completes); its report is the copy task's XCom as always."""
    try:
        code, result = job.run(args.mirror, args, run_in_process, how.planned, mirror=mirror)
    except (ConfigError, ForeignWriteError) as exc:
        operator.log.error("%s", exc)
        raise fail_without_retry(exc) from None
    operator.log.info("%s", report.summary(result))
    if code == EXIT_FOREIGN:
        raise fail_without_retry(RuntimeError(f"mirror {operator.mirror}: the run refused: {'; '.join(result.errors)}"))
    if code:
        raise RuntimeError(f"mirror {operator.mirror}: the run failed: {'; '.join(result.errors)}")
    return result


def execute(operator: Any, context: Any, submit_job: Callable[[Any], Any]) -> dict[str, Any]:
    """The copy task: read the mirror (once), build the job's arguments, let the launcher decide how
    the run executes, run it; the run report's JSON is the task's XCom."""
    operator.run_report = None
    operator.mirror_config, config_file = _read_mirror(operator)
    mirror = operator.mirror_config
    operator.application_args = _job_arguments(operator, context, mirror, config_file)
    how, args = _decide(operator, mirror)
    if how.way is launch.Way.IN_PROCESS:
        return _run_here(operator, mirror, how, args).to_dict()
    # The run server: the hook runs `eosmirror run --server` instead of spark-submit (same output,
    # exit code, secrets file and on_kill: killing the client ends its slots, docs/run-server.md).
    operator.served_command = (serverclient.client_command(operator.application_args)
                               if how.way is launch.Way.RUN_SERVER else None)
    if operator.conf is None:   # an operator in a team's own DAG, given no conf: the mirror's
        operator.conf = submit.spark_conf(dict(mirror.spark_conf), f"eosmirror-{mirror.name}")
    operator.py_files = str(submit.package_zip())
    # This worker's Spark class archive (the driver runs here in client mode; in cluster mode the
    # path is absent on the driver's host and the JVM ignores it).
    operator.conf = submit.with_class_archive(submit.for_run(dict(operator.conf or {}), operator.application_args))
    try:
        _submit_with_secrets_file(operator, context, submit_job, mirror)
    except Exception:
        failure = operator.run_report if isinstance(operator.run_report, RunFailure) else None
        if failure is not None and failure.exit_code in (EXIT_CONFIG, EXIT_FOREIGN):   # exit 2, 8: never retried
            raise fail_without_retry(RuntimeError(failure.error)) from None
        printed_report = operator.run_report
        if isinstance(printed_report, RunReport) and job.exit_code_of(printed_report) == EXIT_FOREIGN:
            raise fail_without_retry(RuntimeError("; ".join(printed_report.errors))) from None
        raise
    printed: RunReport | RunFailure | None = operator.run_report
    if printed is None:
        raise RuntimeError(f"mirror {operator.mirror}: the Spark job ended without printing its run report")
    return printed.to_dict()
