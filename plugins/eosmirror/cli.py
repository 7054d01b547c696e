"""The ``eosmirror`` command line.

  eosmirror setup                           fetch Kafka jars, migrate the Airflow SQLite home
  eosmirror local up|down|status            the embedded source and target clusters
  eosmirror plan <mirror>                   what a run would copy (writes nothing)
  eosmirror run <mirror> [--until TS] ...   one bounded run through spark-submit (local[*] by default)
  eosmirror verify <mirror>                 compare source and target record by record
  eosmirror translate <mirror> TOPIC P OFF  exact target offset of a source offset
  eosmirror fence <mirror>                  fence every transactional id the mirror may have used
  eosmirror groups plan|sync <mirror> ...   consumer-group failover/failback with exact offsets
  eosmirror lag [mirror] [--json]           how far behind each mirror is (status, record and time lag)
  eosmirror import-mm2 mm2.properties       a MirrorMaker 2 configuration as mirrors.yaml (stdout or -o)
  eosmirror migrate <mirror> --from mm2|group:<g>|target-end [--dry-run]   take over another copier's progress
  eosmirror reset <mirror> --to earliest|latest|T:P=O... [--dry-run]   move the progress (audited)
  eosmirror history <mirror>                migrations and resets of the mirror
  eosmirror airflow ARGS...                 the Airflow CLI with this project's home
  eosmirror demo                            the demo on the embedded clusters
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from eosmirror.core.errors import EXIT_CONFIG, EXIT_FAILED, EXIT_OK, EosMirrorError


def _tools(module: str):  # noqa: ANN202
    """A module of the development tools (local clusters, demo): in a checkout's dev environment only."""
    import importlib

    try:
        return importlib.import_module(f"eosmirror_tools.{module}")
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("eosmirror_tools"):
            raise
        from eosmirror.core.errors import ConfigError

        raise ConfigError("this command is a development tool (embedded clusters, demo): it needs a checkout of "
                          "eosmirror set up with `make setup` (the `eosmirror-tools` package of the dev group)") from None


def _local(args: argparse.Namespace) -> int:
    from eosmirror.airflow import listen

    listen.mode()   # `make airflow` runs `local up` first: a wrong EOSMIRROR_LISTEN must stop it before any broker
    cluster = _tools("local.cluster")

    if args.action == "up":
        clusters = cluster.up()
        for c in clusters:
            print(f"{c.name:<7} {c.bootstrap:<17} up   (data {c.data_dir}, log {c.log_file})")
        return EXIT_OK
    if args.action == "down":
        stopped = cluster.down(cluster.known_clusters() if args.all else None)
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
        return EXIT_OK
    states = [cluster.status(c) for c in cluster.default_clusters()]
    if args.json:
        print(json.dumps(states, indent=2))
    else:
        for s in states:
            state = "up" if s["reachable"] else ("starting/unresponsive" if s["running"] else "down")
            pid = f"pid {s['pid']}" if s["pid"] else ""
            print(f"{s['cluster']:<7} {s['bootstrap']:<17} {state:<6} {pid}")
    return EXIT_OK


def _setup(args: argparse.Namespace) -> int:
    from eosmirror.airflow import home

    runtime = _tools("local.runtime")
    lib = runtime.ensure_kafka_lib()
    print(f"kafka {runtime.kafka_version()} jars: {lib}")
    ran = home.migrate()
    print(f"airflow home: {home.airflow_home()} ({'migrated' if ran else 'up to date'})")
    return EXIT_OK


def _mirror(args: argparse.Namespace):  # noqa: ANN202
    from eosmirror.core import config

    return config.load(args.config).get(args.mirror)


def _plan(args: argparse.Namespace) -> int:
    from eosmirror import driver
    from eosmirror.core import report
    from eosmirror.spark import job

    mirror_run = driver.MirrorRun(_mirror(args), job.options_from(args))
    prepared = mirror_run.prepare(plan_only=True)
    result = driver.build_report(prepared, [], mirror_run.source_label, mirror_run.target_label)
    print(report.plan_table(result))
    pending = sum(p["pending"] for p in result["plan"])
    print(f"\n{len(result['plan'])} partitions in {prepared.mirror.slots} slots, {pending} offsets to read; "
          f"topics: {result['topic_sync']}; generation {result['generation']}"
          + (" (slot count changes: the old generation will be fenced)" if result["generation_changed"] else ""))
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    from eosmirror.spark import job, submit

    mirror = _mirror(args)  # validate the name and the file before starting Spark
    if args.inprocess or args.dry_run or _nothing_to_copy(mirror, args):
        from eosmirror.driver.run import run_in_process

        code, result = job.run(args.mirror, args, run_in_process)
        if result:
            from eosmirror.core import report

            print(report.summary(result))
            if args.result_json:
                report.write_json(result, args.result_json)
        return code
    job_args = submit.job_arguments(args.mirror, args.config, args.until, args.max_records_per_partition,
                                    args.max_bytes_per_slot, args.topics.split(",") if args.topics else None,
                                    args.dry_run, args.result_json)
    cmd = submit.command(args.master or submit.default_master(), job_args,
                         submit.spark_conf(dict(mirror.spark_conf), f"eosmirror-{args.mirror}"),
                         ship_package=args.ship_package)
    return submit.run(cmd)


def _nothing_to_copy(mirror: Any, args: argparse.Namespace) -> bool:
    """A plan (it writes nothing) that finds no record to copy: the run then needs no Spark, whose
    start alone (spark-submit's JVM, then the Python driver) costs about 3 s. The run that follows
    plans again; whatever arrived in between is copied by slots in this process, as --inprocess does."""
    from eosmirror.driver.run import MirrorRun
    from eosmirror.spark import job

    try:
        prepared = MirrorRun(mirror, job.options_from(args)).prepare(plan_only=True)
    except EosMirrorError:
        return True   # the run in this process meets the same error at once, and records it for the lag reports
    return not any(slot.pending for slot in prepared.slots)


def _verify(args: argparse.Namespace) -> int:
    from eosmirror.driver import verify

    checks = verify.verify(_mirror(args))
    print(verify.format_checks(checks))
    return verify.exit_code(checks)


def _translate(args: argparse.Namespace) -> int:
    from eosmirror.kafka import connections, syncstore
    from eosmirror.core import naming
    from eosmirror.driver.run import cluster_label
    from eosmirror.core.errors import ConfigError
    from eosmirror.core.offsetsync import BeforeFirstSync, TranslationError

    mirror = _mirror(args)
    conf = connections.resolve(mirror.target, "target")
    target_topic = naming.policy_of(mirror).target_topic(args.topic)
    from eosmirror.core.syncscan import Need

    # Only the syncs from the one holding the offset to the newest are read (see kafka.syncstore).
    needs = {(target_topic, args.partition): Need(source_offset=args.offset),
             (args.topic, args.partition): Need(source_offset=args.offset)}
    syncs = syncstore.load_needed(conf, mirror.name, cluster_label("target", mirror.target, conf),
                                  mirror.progress_group, needs)
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
    from eosmirror.core import migration
    from eosmirror.driver import migrate

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
    from eosmirror.driver import takeover

    outcome = takeover.take_over(_mirror(args), args.origin, dry_run=args.dry_run, mm2_stopped=args.mm2_stopped)
    print(json.dumps(outcome, indent=2) if args.json else takeover.format_outcome(outcome))
    return EXIT_OK


def _reset(args: argparse.Namespace) -> int:
    from eosmirror.driver import takeover

    outcome = takeover.reset(_mirror(args), args.to, dry_run=args.dry_run)
    print(json.dumps(outcome, indent=2) if args.json else takeover.format_outcome(outcome))
    return EXIT_OK


def _history(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from eosmirror.core import migration
    from eosmirror.driver import migrate

    records = migrate.history(_mirror(args))
    print(json.dumps([asdict(r) for r in records], indent=2) if args.json else migration.format_history(records))
    return EXIT_OK


def _import_mm2(args: argparse.Namespace) -> int:
    from pathlib import Path

    from eosmirror.core import config, mm2import, mm2props

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

    from eosmirror.core.errors import ConfigError

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


def _fence(args: argparse.Namespace) -> int:
    from eosmirror.driver import fencing

    outcome = fencing.fence_mirror(_mirror(args), all_generations=True)
    print(fencing.format_outcome(outcome))
    return EXIT_OK if outcome["unblocked"] else EXIT_FAILED


def _groups(args: argparse.Namespace) -> int:
    from eosmirror.core import report
    from eosmirror.driver import groups

    options = groups.GroupSyncOptions(direction=args.direction, dry_run=args.action == "plan" or args.dry_run,
                                      allow_rewind=True if args.allow_rewind else None,
                                      groups=tuple(args.groups or ()))
    result = groups.sync_groups(_mirror(args), options)
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
    from eosmirror.core import config, lagview
    from eosmirror.driver import lag
    from eosmirror.kafka.lagstore import now_ms

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


def _airflow(args: argparse.Namespace) -> int:
    from eosmirror.airflow import home

    home.migrate()
    home.exec_airflow(args.args)
    return EXIT_OK  # not reached


def _demo(args: argparse.Namespace) -> int:
    from eosmirror.airflow import listen

    listen.mode()   # refused before the demo starts its brokers
    return _tools("demo").main(records=args.records, master=args.master)


def _mirror_command(sub: Any, name: str, func: Any, text: str) -> argparse.ArgumentParser:
    """A subcommand about one mirror of the definitions file."""
    command = sub.add_parser(name, help=text)
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
    migrate = _mirror_command(sub, "migrate", _migrate, "take over progress from MirrorMaker 2 or a consumer group "
                                                        "(refused while the other copier still runs)")
    migrate.add_argument("--from", dest="origin", required=True,
                         help="mm2 (or mm2:<source alias>): MM2's committed offsets; group:<name>: a source group's; "
                              "target-end[:N]: after the target's last N records (default 100), checked one by one")
    migrate.add_argument("--dry-run", action="store_true", help="check and print, write nothing")
    migrate.add_argument("--mm2-stopped", action="store_true",
                         help="MM2 was killed (its status still says RUNNING) and no MM2 process is left: skip the "
                              "status check (the offsets must still stand still during the check)")
    migrate.add_argument("--json", action="store_true")
    reset = _mirror_command(sub, "reset", _reset, "move the mirror's progress by hand (audited)")
    reset.add_argument("--to", nargs="+", required=True, metavar="TARGET",
                       help="earliest, latest, or <source topic>:<partition>=<offset> ...")
    reset.add_argument("--dry-run", action="store_true", help="check and print, write nothing")
    reset.add_argument("--json", action="store_true")
    history = _mirror_command(sub, "history", _history, "the mirror's migrations and resets (audit records)")
    history.add_argument("--json", action="store_true")


def _lag_command(sub: Any) -> None:
    command = sub.add_parser("lag", help="how far behind each mirror is: status, record lag, time lag, SLO")
    command.add_argument("mirror", nargs="?", help="one mirror (default: all); shows its partitions too")
    command.add_argument("--json", action="store_true", help="the figures as JSON (what the page and metrics show)")
    command.add_argument("--record", action="store_true", help="also append the sample to the lag history")
    command.add_argument("--config", help="mirror definitions (default: $EOSMIRROR_CONFIG or dags/mirrors.yaml)")
    command.set_defaults(func=_lag)


def build_parser() -> argparse.ArgumentParser:
    from eosmirror.spark import job

    parser = argparse.ArgumentParser(prog="eosmirror", description="Exactly-once Kafka mirror")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    local = sub.add_parser("local", help="embedded single-node source and target clusters")
    local.add_argument("action", choices=["up", "down", "status"])
    local.add_argument("--json", action="store_true", help="status as JSON")
    local.add_argument("--all", action="store_true",
                       help="down: also every other cluster the project started under var/kafka (tests, benchmarks)")
    local.set_defaults(func=_local)

    setup = sub.add_parser("setup", help="fetch Kafka jars and prepare the Airflow home")
    setup.set_defaults(func=_setup)

    plan = sub.add_parser("plan", help="print what a run would copy, writing nothing")
    plan.add_argument("mirror")
    job.add_run_arguments(plan)
    plan.set_defaults(func=_plan, dry_run=True)

    run = sub.add_parser("run", help="one bounded mirror run on Spark")
    run.add_argument("mirror")
    job.add_run_arguments(run)
    run.add_argument("--master", help="Spark master (default $EOSMIRROR_SPARK_MASTER or local[*])")
    run.add_argument("--ship-package", action="store_true",
                     help="send the eosmirror package to executors with --py-files (cluster masters)")
    run.add_argument("--inprocess", action="store_true", help="run the slots in this process, without Spark")
    run.set_defaults(func=_run)

    _mirror_command(sub, "verify", _verify, "compare source and target over the mirrored ranges")
    translate = _mirror_command(sub, "translate", _translate, "exact target offset of a source offset")
    translate.add_argument("topic", help="source topic")
    translate.add_argument("partition", type=int)
    translate.add_argument("offset", type=int)
    _mirror_command(sub, "fence", _fence, "fence every transactional id of the mirror and check the target")

    _groups_command(sub)
    _lag_command(sub)
    _add_migration_commands(sub)
    _import_mm2_command(sub)

    airflow = sub.add_parser("airflow", help="the Airflow CLI with this project's home (e.g. `airflow standalone`)")
    airflow.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the airflow command")
    airflow.set_defaults(func=_airflow)

    demo = sub.add_parser("demo", help="run the demo on the embedded local clusters")
    demo.add_argument("--records", type=int, default=2000, help="records per demo topic")
    demo.add_argument("--master", default="local[2]")
    demo.set_defaults(func=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, as we do for config errors
        return int(exc.code or 0)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        return args.func(args)
    except EosMirrorError as exc:
        print(f"eosmirror: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return EXIT_FAILED
    except Exception as exc:  # noqa: BLE001 - last resort: one clear line, not a traceback wall
        if getattr(args, "verbose", False):
            raise
        print(f"eosmirror: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["main", "build_parser", "EXIT_CONFIG"]
