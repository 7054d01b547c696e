"""The disaster-recovery commands: `eosmirror status`, `switchover`, `promote`, `reverse` and `resume`
(docs/disaster-recovery.md).

Each prints its steps as they pass and ends with one verdict line; `--json` prints the report
instead. Exit codes: 0 done (switchover: zero loss proven); 1 a step stopped it (the verdict names
the step and the partitions); 2 refused (the mirror's state or a bad option; nothing written);
5 promoted, with records known to exist on the source not copied (the loss report lists them).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from eosmirror import cliops
from eosmirror.airflow import runonce
from eosmirror.core import naming
from eosmirror.core.errors import EXIT_OK, EosMirrorError
from eosmirror.core.mirrorstate import LossReport, Phase, next_step
from eosmirror.driver import promote, resume, reverse, switchover
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
                          **({"reverse_mirror": {"mirror": back[0], "state": back[1].phase.value if back[1] else None,
                                                 "since_ms": back[1].since_ms if back[1] else None,
                                                 "note": back[1].note if back[1] else back[2]}} if back else {})},
                         indent=2))
        return EXIT_OK
    shown = (current.describe() if current.since_ms else
             "not prepared" if naming.forward_mirror_name(mirror.name) else "mirroring")
    print(f"mirror {mirror.name}: {shown}")
    if current.note:
        print(f"  {current.note}")
    if current.phase is Phase.PROMOTED:
        print("\n".join(LossReport(current.points, current.since_ms).lines()))
    if current.phase is Phase.RESUMING:
        print("\n".join(f"  {p.label}: continues at old-source offset {p.progress} (new primary from "
                        f"{p.target_end})" for p in current.points))
    if back:
        print(f"  reverse mirror {back[0]}: " + (
            (back[1].describe() if back[1].since_ms else "not prepared") + (f" ({back[1].note})" if back[1].note else "")
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


def _switchover(args: argparse.Namespace) -> int:
    mirror = cliops.load_mirror(args)
    options = switchover.SwitchoverOptions(wait_s=args.wait_seconds, quiet_s=args.quiet_seconds)
    options.check(mirror.name)
    if not args.no_pause:
        for line in runonce.pause_dags(mirror.name):
            say(f"switchover {mirror.name}: {line}")
    outcome = switchover.switchover(mirror, runonce.final_run_command(mirror.name, args.config), options, say=say)
    print(json.dumps(outcome.as_dict(), indent=2) if args.json else outcome.verdict())
    return outcome.exit_code


def _promote(args: argparse.Namespace) -> int:
    mirror = cliops.load_mirror(args)
    if not args.no_pause:
        for line in runonce.pause_dags(mirror.name):
            say(f"promote {mirror.name}: {line}")
    outcome = promote.promote(mirror, source_budget_s=args.source_seconds, say=say)
    if args.json:
        print(json.dumps(outcome.as_dict(), indent=2))
    else:
        print("\n".join(outcome.loss.lines()))
        print(f"mirror {mirror.name}: promoted" + (f", up to {outcome.loss.total} record(s) may be lost"
                                                  if outcome.exit_code else ", nothing known is lost"))
    return outcome.exit_code


def _reverse(args: argparse.Namespace) -> int:
    mirror = cliops.load_mirror(args)
    options = reverse.ReverseOptions(mode=args.divergence, source_budget_s=args.source_seconds,
                                     settle_s=args.settle_seconds)
    outcome = reverse.reverse(mirror, options, say=say)
    if not args.no_unpause:
        for line in runonce.unpause_reverse_dag(mirror.name):
            say(f"reverse {mirror.name}: {line}")
    print(json.dumps(outcome.as_dict(), indent=2) if args.json else "\n".join(outcome.lines()))
    return outcome.exit_code


def _resume(args: argparse.Namespace) -> int:
    mirror = cliops.load_mirror(args)
    outcome = resume.resume(mirror, window=args.check_seconds, say=say,
                            accept_stray=args.accept_records_after_switch_back)
    if not args.no_unpause:
        for line in runonce.resume_dags(mirror.name, mirror.groups is not None):
            say(f"resume {mirror.name}: {line}")
    print(json.dumps(outcome.as_dict(), indent=2) if args.json else "\n".join(outcome.lines()))
    return outcome.exit_code


def register(sub: Any) -> None:
    status = cliops.mirror_command(sub, "status", _status, "the mirror's state: mirroring, switched over or promoted")
    status.add_argument("--json", action="store_true")
    switching = cliops.mirror_command(sub, "switchover", _switchover,
                                      "planned switchover: wait until the source is quiet, final run, fence, group "
                                      "sync, verify; ends with 'zero loss: safe to switch' only when every step held")
    switching.add_argument("--wait-seconds", type=float, default=300.0,
                           help="how long to wait for the source to be quiet (default 300)")
    switching.add_argument("--quiet-seconds", type=float, default=10.0,
                           help="how long no new committed record may arrive on the source (default 10)")
    switching.add_argument("--no-pause", action="store_true", help="do not pause the mirror's DAGs")
    switching.add_argument("--json", action="store_true")
    promoting = cliops.mirror_command(sub, "promote", _promote,
                                      "unplanned promotion: fence, record what the target holds, report what may "
                                      "be lost (works while the source is unreachable)")
    promoting.add_argument("--source-seconds", type=float, default=10.0,
                           help="the longest any step waits on the source (default 10)")
    promoting.add_argument("--no-pause", action="store_true", help="do not pause the mirror's DAGs")
    promoting.add_argument("--json", action="store_true")
    reversing = cliops.mirror_command(sub, "reverse", _reverse,
                                      "after a promotion, once the old source answers: report the divergence and "
                                      "prepare the reverse mirror <mirror>__reverse from the promotion point")
    reversing.add_argument("--divergence", choices=("report", "copy"), default="report",
                           help="report (default): only report the old source's records that never reached the "
                                "target; copy: also copy them once to side topics <topic>.diverged.<mirror>")
    reversing.add_argument("--source-seconds", type=float, default=10.0,
                           help="how long to wait for the old source to answer (default 10)")
    reversing.add_argument("--settle-seconds", type=float, default=120.0,
                           help="how long to wait for open transactions on the old source to end (default 120)")
    reversing.add_argument("--no-unpause", action="store_true",
                           help="do not unpause the reverse mirror's DAG")
    reversing.add_argument("--json", action="store_true")
    resuming = cliops.mirror_command(sub, "resume", _resume,
                                     "after the switch back (`eosmirror switchover <mirror>__reverse`): the forward "
                                     "mirror continues after the reverse mirror's last copy; the reverse mirror is "
                                     "retired")
    resuming.add_argument("--check-seconds", type=float, default=3.0,
                          help="how long the new primary's ends must stay still before the progress moves (default 3)")
    resuming.add_argument("--accept-records-after-switch-back", action="store_true",
                          help="resume although the new primary received records after the switch back (they stay "
                               "there, not on the old source, and are named in the report)")
    resuming.add_argument("--no-unpause", action="store_true",
                          help="do not unpause the mirror's DAG (nor pause the reverse mirror's)")
    resuming.add_argument("--json", action="store_true")
