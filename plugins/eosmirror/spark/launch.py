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

``decide_beside_submit`` is ``decide`` for `eosmirror run` and the switchover's final run: while the plan
runs, spark-submit is already starting behind the launch gate (spark/gate.py), and it is let through or
stopped by the plan's answer. The Airflow copy task calls ``decide``, then submits.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
from dataclasses import dataclass
from enum import Enum
from typing import Callable

from eosmirror.core import report
from eosmirror.core.config import MirrorConfig
from eosmirror.core.errors import EosMirrorError
from eosmirror.core.runreport import Report, RunFailure
from eosmirror.driver.run import MirrorRun, Planned, RunOptions, run_in_process
from eosmirror.spark import gate, job, server, serverclient, submit
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


@dataclass(frozen=True)
class SparkTarget:
    """Where a run started by a command (the switchover's final run) goes through spark-submit: the
    CLI's default master, or in a DAG the mirror's Spark connection (master and deploy mode)."""
    master: str
    deploy_mode: str | None = None
    env: dict[str, str] | None = None     # e.g. the secrets file's variable (never an argument)


def run_to_report(mirror: MirrorConfig, config_file: str, spark: SparkTarget, say: Callable[[str], None],
                  final_of_switchover: bool = False, inprocess: bool = False) -> Report:
    """One bounded run of ``mirror`` from this process, through the launcher every run takes (in this
    process when there is nothing to copy, the run server, or spark-submit), and its typed report.
    The job's output lines go to ``say``; its report line becomes the returned report. ``inprocess``: the
    slots run in this process whatever there is to copy (the command line's --inprocess)."""
    job_args = submit.job_arguments(mirror.name, config_file, final_of_switchover=final_of_switchover)
    args = job.parser().parse_args(job_args)
    options = job.options_from(args)
    def submit_cmd() -> list[str]:
        return submit.command(spark.master, job_args, submit.spark_conf(dict(mirror.spark_conf),
                                                                        f"eosmirror-{mirror.name}"),
                              ship_package=True, deploy_mode=spark.deploy_mode)

    how, submitted = decide_beside_submit(mirror, args, options, submit_cmd, say, spark.env, inprocess=inprocess,
                                          run_server=mirror.airflow.run_server,
                                          announce=lambda how: say(f"{mirror.name}: {how.why}"),
                                          gated=spark.deploy_mode != "cluster")
    if how.way is Way.IN_PROCESS:
        return job.run(mirror.name, args, run_in_process, how.planned, mirror=mirror)[1]
    code, found = submitted or stream(serverclient.client_command(job_args), say, spark.env)
    if found is None:
        return RunFailure(mirror=mirror.name, error=f"the run ended with exit code {code} without a run report "
                                                   f"(its output is above)", exit_code=code or 1)
    return found


def decide_beside_submit(mirror: MirrorConfig, args: argparse.Namespace, options: RunOptions,
                         submit_cmd: Callable[[], list[str]],
                         say: Callable[[str], None], extra_env: dict[str, str] | None = None, *,
                         inprocess: bool = False, served: bool = False, run_server: bool = False,
                         announce: Callable[[Launch], None] = lambda how: None, gated: bool = True,
                         ) -> tuple[Launch, tuple[int, Report | None] | None]:
    """``decide``, with spark-submit (``submit_cmd()``) started behind the launch gate while ``decide``
    plans, whenever its plan may send the run there (spark/gate.py: the plan and spark-submit's start
    overlap); without a plan to overlap, or without spark-submit on this host, ``decide`` first.
    Returns (how the run executes, (exit code, report) when it went through spark-submit); ``announce``
    hears the decision before the run's output starts. ``gated=False``: a driver in cluster deploy mode,
    which runs on another host, where neither the gate nor spark-submit's environment reaches it."""
    cmd = None
    if gated and _plans_first(args, inprocess, served) and not run_server:
        try:
            cmd = submit_cmd()
        except FileNotFoundError:   # no spark-submit here: a run with nothing to copy still needs none
            cmd = None
    if cmd is None:   # nothing to overlap (or a run server, or no Spark to start)
        how = decide(mirror, args, options, inprocess=inprocess, served=served, run_server=run_server)
        announce(how)
        return how, (stream(submit_cmd(), say, extra_env) if how.way is Way.SPARK_SUBMIT else None)
    launch_gate = gate.LaunchGate()
    job_process: _JobProcess | None = None
    try:
        job_process = _start(cmd, {**(extra_env or {}), **launch_gate.env()}, hold_stderr=True)
        how = decide(mirror, args, options, inprocess=inprocess, served=served, run_server=run_server)
        announce(how)
        if how.way is not Way.SPARK_SUBMIT:
            return how, None
        launch_gate.answer(gate.GO)
        job_process.release_stderr()
        return how, _follow(job_process, say)
    finally:
        if launch_gate.answered != gate.GO:   # step 3: the job has done nothing; it leaves
            launch_gate.answer(gate.STOP)
            if job_process is not None:
                job_process.end()
        launch_gate.remove()


def _plans_first(args: argparse.Namespace, inprocess: bool, served: bool) -> bool:
    """Whether ``decide`` plans before it chooses (the rule ``decide`` follows)."""
    return not (inprocess or args.dry_run or served) and follow_until(args) is None


class _JobProcess:
    """A job command started before the launcher chose it: its stderr (the JVM's first lines) is held
    until the launcher does, and dropped if it does not."""

    def __init__(self, proc: subprocess.Popen[str]):
        self.proc = proc
        self.held: list[str] = []
        self.released = threading.Event()
        self.lock = threading.Lock()
        self.forwarder = threading.Thread(target=self._forward, name="eosmirror-job-stderr", daemon=True)
        self.forwarder.start()

    def _forward(self) -> None:
        for line in self.proc.stderr or ():
            with self.lock:
                if not self.released.is_set():
                    self.held.append(line)
                    continue
            sys.stderr.write(line)

    def release_stderr(self) -> None:
        with self.lock:
            sys.stderr.write("".join(self.held))
            self.held.clear()
            self.released.set()

    def end(self) -> None:
        """Stop the process (it has not passed the gate, so it wrote nothing) and drop its held output,
        without waiting for it: a run with nothing to copy is not held up by a JVM's shutdown."""
        if self.proc.poll() is None:
            self.proc.terminate()
        threading.Thread(target=self._reap, name="eosmirror-job-end", daemon=True).start()

    def _reap(self) -> None:
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.close()

    def close(self) -> None:
        """After the process ended: its stderr read to the end (or 5 s), the pipes closed."""
        self.forwarder.join(timeout=5)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe:
                pipe.close()


def _start(cmd: list[str], extra_env: dict[str, str] | None, hold_stderr: bool = False) -> _JobProcess:
    env = submit.process_env()
    env.update(extra_env or {})
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE if hold_stderr else None, text=True, errors="replace")
    return _JobProcess(proc)


def _follow(job_process: _JobProcess, say: Callable[[str], None]) -> tuple[int, Report | None]:
    """Each output line of the job but the report line goes to ``say`` as it comes; (exit code, the
    report line's report or None)."""
    found: Report | None = None
    proc = job_process.proc
    try:
        for line in proc.stdout or ():
            parsed = report.parse_result_line(line)
            if parsed is None:
                say(line.rstrip("\n"))
            else:
                found = parsed
    finally:
        if proc.stdout:
            proc.stdout.close()
        proc.wait()
        job_process.close()
    return proc.returncode, found


def stream(cmd: list[str], say: Callable[[str], None], extra_env: dict[str, str] | None = None
           ) -> tuple[int, Report | None]:
    """Run a job command (spark-submit, or the run server's client): each output line but the report
    line goes to ``say`` as it comes; (exit code, the report line's report or None)."""
    return _follow(_start(cmd, extra_env), say)
