"""The disaster-recovery commands' one entry, shared by the CLI (clidr.py) and the DAGs (airflow/drdags.py):
from a command's checked option values (core/commands.py) to its driver function, run by the one
transition runner. The switchover's final run goes through the launcher every run takes, in this
process (``spark``: where spark-submit sends it: the CLI's master, or the mirror's Spark connection in
a DAG), and comes back as a typed report.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Protocol

from eosmirror.core import commands, config
from eosmirror.core.config import MirrorConfig
from eosmirror.driver import minimums, promote, resume, reverse, switchover
from eosmirror.driver.transition import Transition
from eosmirror.spark import launch, submit


class Outcome(Protocol):
    """What every command returns: its exit code, its report (``kind``, ``steps``, ``verdict``...) and the
    runner that ran it (its steps)."""

    run: Transition

    @property
    def exit_code(self) -> int: ...

    def as_dict(self) -> dict[str, Any]: ...


def execute(spec: commands.CommandSpec, mirror: MirrorConfig, values: dict[str, Any], *, by: str | None,
            say: Callable[[str], None], started: float | None = None, spark: launch.SparkTarget | None = None,
            config_file: str | None = None, inprocess: bool = False) -> Outcome:
    """Run ``spec`` for ``mirror`` with ``values`` (already checked by ``spec.values``). ``started``: when
    the command was given (monotonic), for the recovery time. ``inprocess``: the switchover's final run copies
    in this process (the CLI's --inprocess), not through the run server or spark-submit."""
    started = time.monotonic() if started is None else started
    with minimums.scope():   # one ApiVersions read per cluster for the whole command, its steps included
        return _execute(spec, mirror, values, by=by, say=say, started=started, spark=spark, config_file=config_file,
                        inprocess=inprocess)


def _execute(spec: commands.CommandSpec, mirror: MirrorConfig, values: dict[str, Any], *, by: str | None,
             say: Callable[[str], None], started: float, spark: launch.SparkTarget | None,
             config_file: str | None, inprocess: bool) -> Outcome:
    if spec is commands.SWITCHOVER:
        if values["cancel"]:
            return switchover.cancel(mirror, by=by, say=say)
        quiet = switchover.SwitchoverOptions(wait_s=values["wait_seconds"], quiet_s=values["quiet_seconds"])
        where = spark or launch.SparkTarget(master=submit.default_master())
        config_path = str(Path(config_file or config.default_config_path()).resolve())
        return switchover.switchover(mirror, lambda: launch.run_to_report(mirror, config_path, where, say,
                                                                          final_of_switchover=True,
                                                                          inprocess=inprocess),
                                     quiet, by=by, say=say, started=started)
    if spec is commands.PROMOTE:
        return promote.promote(mirror, by=by, source_budget_s=values["source_seconds"], say=say, started=started)
    if spec is commands.REVERSE:
        options = reverse.ReverseOptions(mode=values["divergence"], source_budget_s=values["source_seconds"],
                                         settle_s=values["settle_seconds"])
        return reverse.reverse(mirror, options, by=by, say=say, started=started)
    if spec is commands.RESUME:
        return resume.resume(mirror, window=values["check_seconds"], by=by, say=say,
                             accept_stray=values["accept_records_after_switch_back"], started=started)
    raise ValueError(f"no disaster-recovery command {spec.name!r}")


def text_of(outcome: Outcome) -> list[str]:
    """The lines a person reads, ending with the verdict, then every step as ran / skipped / failed."""
    lines: list[str] = []
    if isinstance(outcome, promote.PromotionOutcome):
        lines = [*outcome.loss.lines(), *outcome.foreign_lines(), *_rights(outcome.rights.lines if outcome.rights else []),
                 outcome.verdict()]
    elif isinstance(outcome, switchover.SwitchoverOutcome):
        lines = [*_rights(outcome.rights.lines), outcome.verdict()
                 + (f" ({outcome.recovery_seconds:.1f} s from the command's start)" if outcome.recovery_seconds else "")]
    elif isinstance(outcome, switchover.CancelOutcome):
        lines = [outcome.verdict()]
    elif isinstance(outcome, (reverse.ReverseOutcome, resume.ResumeOutcome)):
        lines = outcome.lines()
    return lines + outcome.run.lines()


def _rights(lines: list[str]) -> list[str]:
    return [f"  write rights: {line}" for line in lines]
