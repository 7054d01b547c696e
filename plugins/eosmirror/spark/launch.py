"""How one run executes, decided in one place for `eosmirror run`, the Airflow copy task, the
spark-submit job and the run server.

``decide`` picks, in this order (the first that applies):

  in-process    asked (``--inprocess``), or a dry run (its slots never run: nothing needs Spark);
  run-server    asked (``eosmirror run --server``): the server plans, and its driver runs the slots
                of a run with nothing to copy itself (``slots_need_spark``);
  in-process    a plan (it writes nothing) found nothing to copy, and the run does not follow: the
                slots only refresh their progress, a few milliseconds each, while starting Spark
                costs about 3 s. The run completes THAT plan (``Launch.planned``) instead of
                observing every partition again (a quarter of an empty run at 5,000 partitions);
  run-server    the mirror's ``airflow.run_server`` and a run server of this code answering here;
  spark-submit  otherwise (also when ``airflow.run_server`` is set but no such server answers).

Inside Spark (the job spark-submit runs, ``job_runner``, or a run in the run server),
``runner.slots_need_spark`` is the same rule for where the slots run: on executors, or on the
driver. A follow run always needs executors: its slots copy for minutes, each with its lifeline
(tests/e2e/test_kill.py). The lean `eosmirror run --server` path reads the first rules off its
command line (``runargs.served_command_line``) so that it imports none of this.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from enum import Enum

from eosmirror.core.config import MirrorConfig
from eosmirror.core.errors import EosMirrorError
from eosmirror.driver.run import MirrorRun, Planned, RunOptions
from eosmirror.spark import server, serverclient
from eosmirror.spark.runargs import follow_until
from eosmirror.spark.runner import slots_need_spark


class Way(str, Enum):
    IN_PROCESS = "in-process"
    RUN_SERVER = "run-server"
    SPARK_SUBMIT = "spark-submit"


@dataclass
class Launch:
    way: Way
    why: str                      # for the log: the rule that decided
    planned: tuple[MirrorRun, Planned] | None = None   # in-process after a plan: the run completes it
    warning: bool = False         # the mirror asked for the run server and does not get it


def decide(mirror: MirrorConfig, args: argparse.Namespace, options: RunOptions, *, inprocess: bool = False,
           served: bool = False, run_server: bool = False) -> Launch:
    """How the run of ``mirror`` with the job's ``args`` (parsed as ``options``) executes (module
    docstring). ``inprocess``, ``served``: the command line's --inprocess and --server;
    ``run_server``: the mirror's airflow.run_server."""
    if inprocess:
        return Launch(Way.IN_PROCESS, "the slots run in this process (--inprocess)")
    if args.dry_run:
        return Launch(Way.IN_PROCESS, "a dry run: it plans and writes nothing, without Spark")
    if served:
        return Launch(Way.RUN_SERVER, "the run goes to the run server (--server)")
    if follow_until(args) is None:
        empty, planned = _plan(mirror, options)
        if empty:
            return Launch(Way.IN_PROCESS, "nothing to copy: the slots refresh their progress in this process, "
                                          "without Spark", planned)
    if run_server:
        return _served()
    return Launch(Way.SPARK_SUBMIT, "the run goes through spark-submit")


def _plan(mirror: MirrorConfig, options: RunOptions) -> tuple[bool, tuple[MirrorRun, Planned] | None]:
    """(whether there is nothing to copy, the run and its plan). A plan that fails says (True, None):
    the run in this process plans again, meets the same error at once and records it for the lag
    reports, as a run in Spark would."""
    mirror_run = MirrorRun(mirror, options)
    try:
        plan = mirror_run.plan()
    except EosMirrorError:
        return True, None
    if slots_need_spark(any(slot.pending for slot in plan.slots), follows=False):
        return False, None
    return True, (mirror_run, plan)


def _served() -> Launch:
    """The run server of this code on this host, if one answers; else spark-submit, with a warning."""
    answer = serverclient.status()
    if answer is None or answer["fingerprint"] != server.fingerprint():
        why = ("no run server answers on this worker (`eosmirror server start`)" if answer is None
               else "the run server runs other eosmirror code (restart it)")
        return Launch(Way.SPARK_SUBMIT, f"airflow.run_server is set, but {why}; this run goes through spark-submit",
                      warning=True)
    return Launch(Way.RUN_SERVER, f"the run goes to the run server (pid {answer['pid']}, master {answer['master']})")
