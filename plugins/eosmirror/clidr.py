"""The disaster-recovery commands: `eosmirror status`, `switchover`, `promote`, `reverse` and `resume`
(docs/disaster-recovery.md).

Each is declared once (core/commands.py: its flags here, its DAG Params), runs through the one
transition runner, prints its steps as they pass, and ends with its verdict and every step as ran /
skipped / failed; `--json` prints the report instead. Exit codes: 0 done (switchover: zero loss
proven); 1 a step stopped it (the verdict names the step and every partition); 2 refused (the
mirror's state or a bad option; nothing written); 5 promoted, with records known to exist on the
source not copied (the loss report lists them); 6 done, but a step optional by design did not run.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from typing import Any, Callable

from eosmirror import cliops, drcommands
from eosmirror.airflow import runonce
from eosmirror.core import commands
from eosmirror.core.errors import EXIT_OK, EosMirrorError
from eosmirror.core.mirrorstate import LossReport, Phase
from eosmirror.core.steptimes import process_age
from eosmirror.core.transitions import next_step
from eosmirror.kafka import state
from eosmirror.kafka.cluster import Cluster

log = logging.getLogger(__name__)


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _status(args: argparse.Namespace) -> int:
    mirror = cliops.load_mirror(args)
    target = Cluster.resolve("target", mirror.target, mirror.name)
    current = state.read_mirror_state(target, mirror.name, mirror.progress_group)
    back = _reverse_state(mirror, current)
    following = next_step(back[1], back[0]) if back and back[1] and back[1].phase is Phase.SWITCHED_OVER else (
        next_step(current, mirror.name))
    if args.json:
        print(json.dumps({"mirror": mirror.name, "state": current.phase.value, "since_ms": current.since_ms,
                          "by": current.by, "note": current.note, "next": following,
                          "write_rights": [c.as_dict() for c in current.rights],
                          **({"reverse_mirror": {"mirror": back[0], "state": back[1].phase.value if back[1] else None,
                                                 "since_ms": back[1].since_ms if back[1] else None,
                                                 "note": back[1].note if back[1] else back[2]}} if back else {})},
                         indent=2))
        return EXIT_OK
    print(f"mirror {mirror.name}: {current.describe()}")
    if current.note:
        print(f"  {current.note}")
    if current.phase is Phase.PROMOTED:
        print("\n".join(LossReport(current.points, current.since_ms).lines()))
    if current.phase is Phase.RESUMING:
        print("\n".join(f"  {p.label}: continues at old-source offset {p.progress} (new primary from "
                        f"{p.target_end})" for p in current.points))
    for change in current.rights:
        print(f"  write rights: {change.line()}")
    if back:
        print(f"  reverse mirror {back[0]}: " + (
            back[1].describe() + (f" ({back[1].note})" if back[1].note else "")
            if back[1] else back[2]))
    print(f"  next: {following}")
    return EXIT_OK


def _reverse_state(mirror: Any, current: Any) -> tuple[str, Any, str] | None:
    """(name, state or None, why not read) of the reverse mirror of a reversed or resuming mirror (its
    state topic is on the old source, which may not answer)."""
    if current.phase not in (Phase.REVERSED, Phase.RESUMING):
        return None
    back = mirror.reverse()
    try:
        old = Cluster.resolve("target", back.target, back.name)
        return back.name, state.read_mirror_state(old, back.name, back.progress_group), ""
    except EosMirrorError as exc:
        return back.name, None, f"its state could not be read ({exc})"


def _transition(spec: commands.CommandSpec) -> Callable[[argparse.Namespace], int]:
    """The CLI of one disaster-recovery command: its checked options (core/commands.py), the command,
    its steps as they pass (stderr), its verdict and every step (stdout; --json: the report), then the
    DAGs paused or unpaused: after the verdict, off the path to "safe" (the state refuses their runs)."""

    def handler(args: argparse.Namespace) -> int:
        started = time.monotonic() - (process_age() or 0.0)      # the command's start: its process's start
        mirror = cliops.load_mirror(args)
        values = spec.values(vars(args), mirror.name)
        outcome = drcommands.execute(spec, mirror, values, by=None, say=say, started=started, config_file=args.config,
                                     inprocess=getattr(args, "inprocess", False))
        print(json.dumps(outcome.as_dict(), indent=2) if args.json else "\n".join(drcommands.text_of(outcome)))
        for line in _dags_after(spec, mirror, outcome, args):
            say(f"{spec.name} {mirror.name}: {line}")
        return int(outcome.exit_code)
    return handler


def _dags_after(spec: commands.CommandSpec, mirror: Any, outcome: Any, args: argparse.Namespace) -> list[str]:
    """Best effort, after the verdict: the Airflow DAGs follow the state (which refuses their runs anyway)."""
    if args.no_dags:
        return []
    if spec is commands.RESUME:
        return runonce.resume_dags(mirror.name, mirror.groups is not None)
    if spec is commands.REVERSE:
        return runonce.unpause_reverse_dag(mirror.name)
    if spec is commands.SWITCHOVER and getattr(outcome, "safe", False) or spec is commands.PROMOTE:
        return runonce.pause_dags(mirror.name)
    return []


def register(sub: Any) -> None:
    status = cliops.mirror_command(sub, "status", _status, "the mirror's state: mirroring, switched over or promoted")
    status.add_argument("--json", action="store_true")
    for spec in (commands.SWITCHOVER, commands.PROMOTE, commands.REVERSE, commands.RESUME):
        parser = cliops.mirror_command(sub, spec.name, _transition(spec), spec.help)
        for option in spec.options:
            if option.kind is bool:
                parser.add_argument(option.flag, action="store_true", help=option.help)
            else:
                parser.add_argument(option.flag, type=option.kind, default=option.default, choices=option.choices or None,
                                    help=f"{option.help} (default {option.default}"
                                         + (f"; {option.minimum:g} to {option.maximum:g}" if option.minimum is not None
                                            else "") + ")")
        if spec is commands.SWITCHOVER:
            parser.add_argument("--inprocess", action="store_true",
                                help="the final run's slots run in this process, without Spark (as `eosmirror run "
                                     "--inprocess`): for a mirror one host can copy, or when the Spark cluster is gone")
        parser.add_argument("--no-dags", "--no-pause", "--no-unpause", dest="no_dags", action="store_true",
                            help="leave the mirror's Airflow DAGs as they are (by default they are paused or unpaused "
                                 "after the verdict, as the new state wants)")
        parser.add_argument("--json", action="store_true", help="print the report (JSON) instead of the text")
