"""The mirror batch job: what spark-submit runs (this file, or the ``spark_jobs/mirror_batch.py`` shim).

Exit code 0 only if every slot committed or had nothing to do; 1 if the run failed; 2 if the
configuration or the arguments are wrong (nothing is written then); 7 if a mirrored target partition
holds records the mirror did not write (core/foreign.py: nothing is copied onto them).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from eosmirror.core import config
from eosmirror.core import report as reports
from eosmirror.core.errors import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_FOREIGN,
    EXIT_OK,
    ConfigError,
    EosMirrorError,
    ForeignWriteError,
)
from eosmirror.core.logformat import LOG_FORMAT
from eosmirror.core.runreport import Report, RunFailure, RunReport
from eosmirror.driver.lag import record_run
from eosmirror.driver.run import MirrorRun, Planned, RunOptions, SlotRunner, run_in_process
from eosmirror.spark import gate
from eosmirror.spark.runargs import add_run_arguments, follow_until, parse_timestamp
from eosmirror.spark.runner import run_on_spark, start_spark_early

log = logging.getLogger("eosmirror.spark.job")


def options_from(args: argparse.Namespace) -> Any:
    for name in ("max_records_per_partition", "max_bytes_per_slot"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ConfigError(f"--{name.replace('_', '-')} {value} must be a positive integer")
    return RunOptions(until=parse_timestamp(args.until) if args.until else None, dry_run=args.dry_run,
                      follow_until=follow_until(args),
                      topics=tuple(t.strip() for t in (args.topics or "").split(",") if t.strip()),
                      max_records_per_partition=args.max_records_per_partition,
                      max_bytes_per_slot=args.max_bytes_per_slot,
                      max_bytes_per_second=getattr(args, "max_bytes_per_second", None),
                      final_of_switchover=bool(getattr(args, "final_of_switchover", False)),
                      accept_foreign=bool(getattr(args, "accept_foreign", False)))


def check_follow(mirror: Any, options: Any) -> None:
    """A follow run needs transactional ids: the next run takes over by fencing them."""
    if options.follow_until is not None and mirror.delivery != "exactly_once":
        raise ConfigError(f"mirror {mirror.name!r}: --follow-seconds/--follow-until need delivery exactly_once "
                          f"(the next run takes over by fencing the slots' transactional ids; this mirror is "
                          f"{mirror.delivery})")
    if options.follow_until is not None and options.dry_run:
        raise ConfigError("--dry-run writes nothing, so it cannot follow; drop --follow-seconds/--follow-until")


def run(mirror_name: str, args: argparse.Namespace, runner: Any,
        planned: tuple[MirrorRun, Planned] | None = None, mirror: Any = None) -> tuple[int, RunReport]:
    """One run. ``planned``: the run and plan that ``launch.decide`` ran in this process on; the run
    completes that plan (target sync, generation, slots) instead of observing every partition a
    second time. ``mirror``: the mirror's definition when the caller read it already."""
    if planned is not None:
        mirror_run, plan = planned
        mirror, options = mirror_run.mirror, mirror_run.options
    else:
        mirror, options = mirror or config.load(args.config).get(mirror_name), options_from(args)
        check_follow(mirror, options)
        mirror_run, plan = MirrorRun(mirror, options), None
    try:
        prepared = mirror_run.complete(plan) if plan is not None else mirror_run.prepare()
        result = mirror_run.execute(prepared, runner)
    except EosMirrorError as exc:
        if not args.dry_run:   # the lag reports say ERROR until a run succeeds again
            record_run(mirror, RunFailure.of(mirror.name, exc, run_id=mirror_run.options.run_id))
        raise
    if not result.dry_run:
        with mirror_run.steps.step("lag record"):
            record_run(mirror, result)
        result.steps = mirror_run.steps.as_dict()
    return exit_code_of(result), result


def exit_code_of(result: RunReport) -> int:
    """0 ok; 7 when a slot refused foreign records on the target (a data problem: never retried); else 1."""
    if result.ok:
        return EXIT_OK
    return EXIT_FOREIGN if any(s.error_type == ForeignWriteError.__name__ for s in result.slots) else EXIT_FAILED


def parser() -> argparse.ArgumentParser:
    """The job's command line (spark-submit's application arguments)."""
    parser = argparse.ArgumentParser(prog="mirror_batch", description="eosmirror: one bounded mirror run")
    parser.add_argument("--mirror", required=True, help="mirror name in the definitions file")
    parser.add_argument("--runner", choices=["spark", "inprocess"], default="spark")
    add_run_arguments(parser)
    return parser


def execute(args: argparse.Namespace, runner: Any, out: Any = None, err: Any = None) -> int:
    """One run from the job's parsed arguments; the report goes to ``out`` (the copy task's log and
    XCom line), a failure's one line to ``err``. The exit code: 0 ok, 1 failed, 2 configuration."""
    out, err = out or sys.stdout, err or sys.stderr
    result: Report
    try:
        code, result = run(args.mirror, args, runner)
    except EosMirrorError as exc:
        log.error("%s", exc)
        print(f"eosmirror: {exc}", file=err)
        code = exc.exit_code
        result = RunFailure.of(args.mirror, exc)
    if isinstance(result, RunReport):   # per partition what was copied and what is left, then the summary
        rows = reports.partitions(result)
        if rows:
            print(reports.partitions_table(rows), file=out, flush=True)
        print(reports.summary(result), file=out, flush=True)
    print(reports.result_line(result), file=out, flush=True)   # read by the Airflow `copy` task (XCom)
    if args.result_json:
        reports.write_json(result.to_dict(), args.result_json)
    return code


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    # Started by `eosmirror run` while it still plans: nothing (Spark, a cluster) before its answer.
    try:
        go, waited = gate.wait()
    except EosMirrorError as exc:
        print(f"eosmirror: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if not go:
        return EXIT_OK   # the launcher runs it another way (spark/gate.py, step 3)
    if waited > 0.1:
        log.info("waited %.2f s at the launch gate for the launcher's plan", waited)
    return execute(args, job_runner(args))


def job_runner(args: argparse.Namespace) -> SlotRunner:
    """The slot runner of the job spark-submit runs: Spark (started early, while the driver plans,
    unless EOSMIRROR_SPARK_EARLY_START=0 or a dry run, whose slots never run), or this process for
    ``--runner inprocess``. Whether a run's slots then use executors is ``slots_need_spark``."""
    if args.runner != "spark":
        return run_in_process
    # EOSMIRROR_SPARK_EARLY_START=0: start Spark only when the slots need it (the A/B of the bench;
    # an escape hatch should a cluster manager dislike an application's warm-up job).
    if not args.dry_run and os.environ.get("EOSMIRROR_SPARK_EARLY_START", "1") != "0":
        start_spark_early(_warm_workers(args))
    return run_on_spark


def _warm_workers(args: argparse.Namespace) -> int:
    """How many Python workers to start ahead: one per slot (a bad name or file: none; the run
    itself reports it)."""
    try:
        return int(config.load(args.config).get(args.mirror).slots)
    except (ConfigError, OSError):
        return 0


__all__ = ["main", "execute", "run", "add_run_arguments", "follow_until", "parse_timestamp", "options_from",
           "EXIT_CONFIG", "EXIT_FAILED"]


if __name__ == "__main__":   # spark-submit <site-packages>/eosmirror/spark/job.py --mirror ...
    sys.exit(main(sys.argv[1:]))
