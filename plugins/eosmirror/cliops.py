"""The ``eosmirror`` operations commands: translate, groups, lag, readiness, import-mm2, migrate, reset, history
(``eosmirror.cli`` registers them with ``register``), and the mirror lookup every command shares."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from eosmirror.core import config, lagview, migration, mm2import, mm2props, naming, report
from eosmirror.core.config import MirrorConfig
from eosmirror.core.errors import EXIT_FAILED, EXIT_NOT_READY, EXIT_OK, ConfigError
from eosmirror.core.offsetsync import BeforeFirstSync, TranslationError
from eosmirror.core.syncscan import Need
from eosmirror.driver import groups, lag, migrate, readiness, takeover
from eosmirror.kafka import connections, syncstore
from eosmirror.kafka.cluster import Cluster, cluster_label
from eosmirror.kafka.lagstore import now_ms


def load_mirror(args: argparse.Namespace) -> MirrorConfig:
    return config.load(args.config).get(args.mirror)


def _translate(args: argparse.Namespace) -> int:
    mirror = load_mirror(args)
    conf = connections.resolve(mirror.target, "target")
    label = cluster_label("target", mirror.target, conf)
    target = Cluster(role="target", ref=mirror.target, settings=conf, label=label)
    target_topic = naming.policy_of(mirror).target_topic(args.topic)

    # Only the syncs from the one holding the offset to the newest are read (see kafka.syncstore).
    needs = {(target_topic, args.partition): Need(source_offset=args.offset),
             (args.topic, args.partition): Need(source_offset=args.offset)}
    syncs = syncstore.load_needed(target, mirror.name, mirror.progress_group, needs)
    history = syncs.get((target_topic, args.partition))
    if history is None:
        if target_topic != args.topic and any(t == args.topic for t, _ in syncs):
            raise ConfigError(f"{args.topic} is a target topic; translate takes the SOURCE topic (the mirror "
                              f"maps it to the target name itself)")
        raise ConfigError(f"mirror {mirror.name!r} has copied nothing of {args.topic}[{args.partition}]")
    try:
        print(f"{args.topic}[{args.partition}]@{args.offset} -> {target_topic}[{args.partition}]@"
              f"{history.translate(args.offset)}")
    except BeforeFirstSync as exc:
        raise ConfigError(f"{args.topic}[{args.partition}]@{args.offset}: "
                          f"{_before_take_over(mirror, target_topic, args.partition, exc.first) or exc}") from None
    except TranslationError as exc:
        raise ConfigError(f"{args.topic}[{args.partition}]@{args.offset}: {exc}") from None
    return EXIT_OK


def _before_take_over(mirror: Any, target_topic: str, partition: int, first: int) -> str | None:
    """When a migration or reset set this partition's start (the one its offset map restarts at,
    ``first``: the last that moved progress back): the records below it were copied by the copier
    eosmirror took over from, or by this mirror before the reset; never a guessed number."""

    found = migration.last_change(migrate.history(mirror), target_topic, partition, new=first)
    if found is None:
        return None
    record, change = found
    if record.action == "migrate":
        return (f"copied before eosmirror took over (migration from {record.origin}, by {record.who}: eosmirror "
                f"copies from source offset {change.new}, which it mapped to target offset {change.target_end}); "
                f"eosmirror has no exact offset map for earlier records, so it gives no number")
    old = "none" if change.old is None else change.old
    return (f"before the last reset that moved this partition's progress back (by {record.who}: progress {old} -> "
            f"{change.new}, mapped to target offset {change.target_end}); the offset map starts again there, and what "
            f"was copied below it before the reset has no exact translation, so eosmirror gives no number")


def _migrate(args: argparse.Namespace) -> int:
    outcome = takeover.take_over(load_mirror(args), args.origin, dry_run=args.dry_run, mm2_stopped=args.mm2_stopped)
    print(json.dumps(outcome, indent=2) if args.json else takeover.format_outcome(outcome))
    return EXIT_OK


def _reset(args: argparse.Namespace) -> int:
    outcome = takeover.reset(load_mirror(args), args.to, dry_run=args.dry_run)
    print(json.dumps(outcome, indent=2) if args.json else takeover.format_outcome(outcome))
    return EXIT_OK


def _history(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    records = migrate.history(load_mirror(args))
    print(json.dumps([asdict(r) for r in records], indent=2) if args.json else migration.format_history(records))
    return EXIT_OK


def _import_mm2(args: argparse.Namespace) -> int:
    from pathlib import Path

    # Bad input (unreadable, a flow MM2 itself could not run) raises ConfigError: exit 2, nothing written.
    imported = mm2import.translate(mm2props.read(args.properties), clusters=args.clusters)
    if imported.partial and not args.allow_partial:
        print("eosmirror: the imported mirrors would not select what MirrorMaker 2 selects:\n  "
              + "\n  ".join(imported.partial) + "\nNothing was written. Fix the file, or pass --allow-partial to "
              "write the mirrors anyway with these lines in the header", file=sys.stderr)
        return EXIT_FAILED
    rendered = mm2import.render(imported, Path(args.properties).name)
    # What is printed must load: check it with the loader the DAGs use.
    config.parse(_yaml_document(rendered), Path(f"<import of {args.properties}>"))
    if args.output:
        _write_whole(Path(args.output), rendered)
    else:
        print(rendered, end="")
    return EXIT_OK


def _write_whole(path: Any, text: str) -> None:
    """``text`` into ``path`` all at once: written beside it, then renamed (never half a file)."""
    import os
    import tempfile

    staging = None
    try:
        fd, staging = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(staging, 0o644)   # mkstemp's 0600 would hide it from a scheduler running as another user
        os.replace(staging, path)
    except OSError as exc:
        if staging and os.path.exists(staging):
            os.unlink(staging)
        raise ConfigError(f"cannot write {path}: {exc.strerror}") from None


def _yaml_document(text: str) -> Any:
    import yaml

    return yaml.safe_load(text)


def _groups(args: argparse.Namespace) -> int:
    options = groups.GroupMoveOptions(direction=args.direction, dry_run=args.action == "plan" or args.dry_run,
                                      allow_rewind=True if args.allow_rewind else None,
                                      groups=tuple(args.groups or ()))
    result = groups.move_groups(load_mirror(args), options)
    print(json.dumps(result, indent=2) if args.json else report.groups_table(result))
    return groups.exit_code(result)


def _groups_command(sub: Any) -> None:
    command = sub.add_parser("groups", help="consumer-group failover/failback with exact offsets")
    command.add_argument("action", choices=["plan", "sync"], help="plan: report only; sync: write")
    command.add_argument("mirror")
    command.add_argument("--config", help="mirror definitions (default: $EOSMIRROR_CONFIG or dags/mirrors.yaml)")
    command.add_argument("--direction", choices=["failover", "failback"], default="failover",
                         help="failover: source groups -> target groups (default); failback: target -> source")
    command.add_argument("--dry-run", action="store_true", help="sync: plan and report, write nothing")
    command.add_argument("--allow-rewind", action="store_true",
                         help="allow moving a group's offset backwards (default: the mirror's groups.allow_rewind)")
    command.add_argument("--groups", nargs="+", metavar="GROUP", help="only these groups")
    command.add_argument("--json", action="store_true", help="the report as JSON")
    command.set_defaults(func=_groups)


def _lag(args: argparse.Namespace) -> int:
    """Exit 0 when no mirror alerts, 1 when one does (SLO breach, STALLED, STOPPED, ERROR)."""

    mirrors = config.load(args.config)
    now = now_ms()
    statuses = lag.report_all(mirrors, args.mirror, now_ms=now, record=args.record)
    if args.json:
        print(json.dumps(lagview.document(statuses, now), indent=2, sort_keys=True))
    else:
        print(lagview.mirrors_table(statuses, now))
        if args.mirror and statuses and statuses[0].partitions:
            print()
            print(lagview.partitions_table(statuses[0], now))
            print(f"last run: {lagview.last_run_detail(statuses[0], now)}")
            if lagview.groups_table(statuses[0]):
                print()
                print(lagview.groups_table(statuses[0]))
    return EXIT_FAILED if any(s.alerting for s in statuses) else EXIT_OK


def mirror_command(sub: Any, name: str, func: Any, text: str) -> argparse.ArgumentParser:
    """A subcommand about one mirror of the definitions file."""
    command: argparse.ArgumentParser = sub.add_parser(name, help=text)
    command.add_argument("mirror")
    command.add_argument("--config", help="mirror definitions (default: $EOSMIRROR_CONFIG or dags/mirrors.yaml)")
    command.set_defaults(func=func)
    return command


def _import_mm2_command(sub: Any) -> None:
    import_mm2 = sub.add_parser("import-mm2", help="translate a MirrorMaker 2 mm2.properties into mirrors.yaml "
                                                   "(printed; settings without equivalent listed at the top)")
    import_mm2.add_argument("properties", help="the mm2.properties file")
    import_mm2.add_argument("--clusters", choices=["inline", "connection"], default="inline",
                            help="clusters as inline settings (secrets as ${ENV}) or as Airflow connection ids "
                                 "named after the MM2 aliases")
    import_mm2.add_argument("--allow-partial", action="store_true",
                            help="write the mirrors even where they cannot select what MM2 selects (a custom "
                                 "filter class, ...); the header lists those places. Otherwise exit 1")
    import_mm2.add_argument("-o", "--output", help="write the mirrors file here (whole or not at all) "
                                                   "instead of printing it")
    import_mm2.set_defaults(func=_import_mm2)


def _add_migration_commands(sub: Any) -> None:
    migrate = mirror_command(sub, "migrate", _migrate, "take over progress from MirrorMaker 2 or a consumer group "
                                                        "(refused while the other copier still runs)")
    migrate.add_argument("--from", dest="origin", required=True,
                         help="mm2 (or mm2:<source alias>): MM2's committed offsets; group:<name>: a source group's; "
                              "target-end[:N]: after the target's last N records (default 100), checked one by one")
    migrate.add_argument("--dry-run", action="store_true", help="check and print, write nothing")
    migrate.add_argument("--mm2-stopped", action="store_true",
                         help="MM2 was killed (its status still says RUNNING) and no MM2 process is left: skip the "
                              "status check (the offsets must still stand still during the check)")
    migrate.add_argument("--json", action="store_true")
    reset = mirror_command(sub, "reset", _reset, "move the mirror's progress by hand (audited)")
    reset.add_argument("--to", nargs="+", required=True, metavar="TARGET",
                       help="earliest, latest, or <source topic>:<partition>=<offset> ...")
    reset.add_argument("--dry-run", action="store_true", help="check and print, write nothing")
    reset.add_argument("--json", action="store_true")
    history = mirror_command(sub, "history", _history, "the mirror's migrations and resets (audit records)")
    history.add_argument("--json", action="store_true")


def _readiness(args: argparse.Namespace) -> int:
    """Exit 0 when READY, 9 (EXIT_NOT_READY) when the report says NOT READY: a verdict, not a failure."""
    found = readiness.report(load_mirror(args), run_verify=args.verify, record=args.record)
    print(json.dumps(found.as_dict(), indent=2, sort_keys=True) if args.json else found.text())
    return EXIT_OK if found.ready else EXIT_NOT_READY


def _readiness_command(sub: Any) -> None:
    command = mirror_command(sub, "readiness", _readiness, "could the target take over now: lag, writers, drift, "
                                                           "groups, verify, a switchover dry run (exit 9: NOT READY)")
    command.add_argument("--json", action="store_true", help="the report as JSON (what the history records)")
    command.add_argument("--verify", action="store_true", help="also verify record by record (reads every mirrored "
                                                               "record: long on a large mirror)")
    command.add_argument("--record", action="store_true", help="append the report to the mirror's history (its lag "
                                                               "topic on the target)")


def _lag_command(sub: Any) -> None:
    command = sub.add_parser("lag", help="how far behind each mirror is: status, record lag, time lag, SLO")
    command.add_argument("mirror", nargs="?", help="one mirror (default: all); shows its partitions too")
    command.add_argument("--json", action="store_true", help="the figures as JSON (what the page and metrics show)")
    command.add_argument("--record", action="store_true", help="also append the sample to the lag history")
    command.add_argument("--config", help="mirror definitions (default: $EOSMIRROR_CONFIG or dags/mirrors.yaml)")
    command.set_defaults(func=_lag)


def register(sub: Any) -> None:
    """Add the operations commands to the CLI's subparsers."""
    translate = mirror_command(sub, "translate", _translate, "exact target offset of a source offset")
    translate.add_argument("topic", help="source topic")
    translate.add_argument("partition", type=int)
    translate.add_argument("offset", type=int)
    _groups_command(sub)
    _lag_command(sub)
    _readiness_command(sub)
    _add_migration_commands(sub)
    _import_mm2_command(sub)
