"""The ``eosmirror`` command line (``eosmirror.cli`` dispatches here; ``run --server`` takes a lean path).

  eosmirror setup                           fetch Kafka jars, build toxiproxy and the class archives, migrate the Airflow SQLite home
  eosmirror local up|down|status|versions   the embedded clusters (up --source-version 2.8, --source-rtt MS: a region away)
  eosmirror plan <mirror>                   what a run would copy (writes nothing)
  eosmirror run <mirror> [--until TS] ...   one bounded run through spark-submit (local[*] by default)
  eosmirror server start|stop|status        the run server: a long-lived Spark for `run --server`
  eosmirror verify <mirror>                 compare source and target record by record
  eosmirror translate <mirror> TOPIC P OFF  exact target offset of a source offset
  eosmirror fence <mirror>                  fence every transactional id the mirror may have used
  eosmirror groups plan|sync <mirror> ...   consumer-group failover/failback with exact offsets
  eosmirror lag [mirror] [--json]           how far behind each mirror is (status, record and time lag)
  eosmirror readiness <mirror> [--json]     could the target take over now (exit 9: NOT READY)
  eosmirror import-mm2 mm2.properties       a MirrorMaker 2 configuration as mirrors.yaml (stdout or -o)
  eosmirror migrate <mirror> --from mm2|group:<g>|target-end [--dry-run]   take over another copier's progress
  eosmirror reset <mirror> --to earliest|latest|T:P=O... [--dry-run]   move the progress (audited)
  eosmirror history <mirror>                migrations and resets of the mirror
  eosmirror status <mirror>                 mirroring, switched over or promoted (and the loss report)
  eosmirror switchover <mirror>             planned: quiet source, final run, fence, groups, verify: zero loss
  eosmirror promote <mirror>                unplanned: fence, promotion record, what may be lost (source may be gone)
  eosmirror reverse <mirror>                after a promotion: divergence report, the reverse mirror <mirror>__reverse
  eosmirror resume <mirror>                 after the switch back (switchover <mirror>__reverse): forward again
  eosmirror airflow ARGS...                 the Airflow CLI with this project's home
  eosmirror demo                            the demo on the embedded clusters
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import subprocess
import sys
import time
import zipfile
from types import ModuleType
from typing import Any

from eosmirror import clidr, cliops, driver
from eosmirror.airflow import home, listen
from eosmirror.core import report
from eosmirror.core.errors import EXIT_CONFIG, EXIT_FAILED, EXIT_OK, ConfigError, EosMirrorError
from eosmirror.core.logformat import LOG_FORMAT
from eosmirror.driver import fencing, verify
from eosmirror.driver.run import run_in_process
from eosmirror.spark import bytecode, classarchive, job, launch, runargs, server, serverclient, submit


def _tools(module: str) -> ModuleType:
    """A module of the development tools (local clusters, demo): in a checkout's dev environment only."""
    try:
        return importlib.import_module(f"eosmirror_tools.{module}")
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("eosmirror_tools"):
            raise
        raise ConfigError("this command is a development tool (embedded clusters, demo): it needs a checkout of "
                          "eosmirror set up with `make setup` (the `eosmirror-tools` package of the dev group)") from None


def _local(args: argparse.Namespace) -> int:
    listen.mode()   # `make airflow` runs `local up` first: a wrong EOSMIRROR_LISTEN must stop it before any broker
    cluster = _tools("local.cluster")

    if args.action == "versions":
        print(_tools("local.runtime").available().replace("; ", "\n"))
        return EXIT_OK
    if args.action == "up":
        far = _source_link(args)
        try:   # an unknown version or one Maven does not serve, a port in use: refused, nothing left half up
            wanted = [cluster.local_cluster("source", args.source_version or args.kafka_version, far),
                      cluster.local_cluster("target", args.target_version or args.kafka_version)]
            clusters = cluster.up(wanted)
        except (cluster.LocalClusterError, _tools("local.runtime").KafkaRuntimeError, _tools("kit.link").LinkError) as exc:
            raise ConfigError(str(exc)) from None
        for c in clusters:
            mode = "ZooKeeper" if c.zookeeper else "KRaft"
            print(f"{c.name:<7} {c.bootstrap:<17} up   (Kafka {c.release} {mode}; data {c.data_dir}, log {c.log_file})")
            if c.link is not None:
                print(f"        {c.far_config()['bootstrap.servers']:<17} behind a proxy: {c.link.describe()} "
                      f"(`local: {c.name}` resolves here; {c.bootstrap} stays direct)")
        return EXIT_OK
    if args.action == "down":
        stopped = cluster.down(cluster.known_clusters() if args.all else None)
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
        return EXIT_OK
    running = {c.name: c for c in cluster.known_clusters()}   # with the version each was started with
    states = [cluster.status(running.get(c.name, c)) for c in cluster.default_clusters()]
    if args.json:
        print(json.dumps(states, indent=2))
    else:
        for s in states:
            state = "up" if s["reachable"] else ("starting/unresponsive" if s["running"] else "down")
            pid = f"pid {s['pid']}" if s["pid"] else ""
            far = f"  behind {s['proxy']['bootstrap']}: {s['proxy']['link']}" if s.get("proxy") else ""
            print(f"{s['cluster']:<7} {s['bootstrap']:<17} {state:<6} Kafka {s['kafka']:<6} {pid}{far}")
    return EXIT_OK


def _source_link(args: argparse.Namespace) -> Any:
    """The link (kit/link.py) to put between the clients and the source, or None (``--source-rtt``)."""
    if args.source_rtt is None:
        if args.source_jitter or args.source_kbps:
            raise ConfigError("local up: --source-jitter and --source-kbps need --source-rtt (0 for none)")
        return None
    links = _tools("kit.link")
    try:
        return links.Link.round_trip(args.source_rtt, args.source_jitter or 0.0, args.source_kbps or 0)
    except links.LinkError as exc:
        raise ConfigError(f"local up: {exc}") from None


def _setup(args: argparse.Namespace) -> int:
    runtime = _tools("local.runtime")
    lib = runtime.ensure_kafka_lib()
    print(f"kafka {runtime.kafka_version()} jars: {lib}")
    links = _tools("kit.link")
    try:
        proxy = links.ensure_toxiproxy()
    except links.LinkError as exc:
        print(f"eosmirror setup: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"toxiproxy {links.TOXIPROXY_VERSION} (latency between the local clusters): {proxy}")
    try:
        archive, seconds = _tools("kit.cluster").ensure_class_archive()
        print(f"kafka class archive: {archive} " + (f"(built in {seconds:.1f} s)" if seconds else "(up to date)"))
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:   # LocalClusterError is a RuntimeError
        # Only start-up time depends on it: say so, and let the brokers and tools go without it.
        print(f"kafka class archive: NOT built, each broker and Kafka tool starts about 1 s slower: {exc}",
              file=sys.stderr)
    ran = home.migrate()
    print(f"airflow home: {home.airflow_home()} ({'migrated' if ran else 'up to date'})")
    return _spark_archive(args, missing_only=True)


def _spark_archive(args: argparse.Namespace, missing_only: bool = False) -> int:
    """What shortens every run's Spark start: the bytecode of Spark's Python zips (spark/bytecode.py,
    about 0.4 s in the driver and as much before the first slot) and the Spark class archive
    (spark/classarchive.py: about 1 s off the JVM's start)."""
    _spark_bytecode()
    current = classarchive.archive_path(submit.process_env()["SPARK_HOME"])
    if missing_only and current is not None and current.exists():
        print(f"spark class archive: {current} (up to date)")
        return EXIT_OK
    try:
        path, seconds = submit.build_class_archive()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        # Only start-up time depends on it: say so, and let the runs go without it.
        print(f"spark class archive: NOT built, runs start about 1 s slower: {exc}", file=sys.stderr)
        return EXIT_OK if missing_only else EXIT_FAILED
    print(f"spark class archive: {path} ({path.stat().st_size // 2**20} MB, built in {seconds:.1f} s)")
    return EXIT_OK




def _spark_bytecode() -> None:
    spark_home = submit.process_env()["SPARK_HOME"]
    try:
        compiled = bytecode.compile_spark_zips(spark_home)
    except (OSError, zipfile.BadZipFile) as exc:
        # Only start-up time depends on it (invariant 3): say so, and let the runs go without it.
        print(f"spark python zips: NOT compiled, each run's driver and first slot start about 0.4 s slower "
              f"each: {exc}", file=sys.stderr)
        return
    for zipped in compiled:
        print(f"spark python zip: {zipped.path} ({zipped.modules} modules, "
              + (f"compiled in {zipped.seconds:.1f} s)" if zipped.seconds else "bytecode up to date)"))


def _plan(args: argparse.Namespace) -> int:
    mirror_run = driver.MirrorRun(cliops.load_mirror(args), job.options_from(args))
    prepared = mirror_run.prepare(plan_only=True)
    result = driver.build_report(prepared, [], mirror_run.source.label, mirror_run.target.label)
    print(report.plan_table(result.plan))
    print(f"\n{len(result.plan)} partitions in {prepared.mirror.slots} slots, {result.pending} offsets to read; "
          f"topics: {result.topic_sync}; generation {result.generation}"
          + (" (slot count changes: the old generation will be fenced)" if result.generation_changed else ""))
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    mirror = cliops.load_mirror(args)  # validate the name and the file before starting Spark
    options = job.options_from(args)
    job.check_follow(mirror, options)
    def cmd() -> list[str]:
        return submit.command(args.master or submit.default_master(), serverclient.job_arguments(args),
                              submit.spark_conf(dict(mirror.spark_conf), f"eosmirror-{args.mirror}"),
                              ship_package=args.ship_package)

    # The job's report line is for machines (the copy task); a person reads its summary, printed last.
    how, submitted = launch.decide_beside_submit(mirror, args, options, cmd, lambda line: print(line, flush=True),
                                                 inprocess=args.inprocess, served=args.server)
    if submitted is not None:
        return submitted[0]
    if how.way is launch.Way.RUN_SERVER:
        return serverclient.run_command(args)
    code, result = job.run(args.mirror, args, run_in_process, how.planned, mirror=mirror)
    print(report.summary(result))
    if args.result_json:
        report.write_json(result.to_dict(), args.result_json)
    return code


def _spark_settings(items: list[str]) -> dict[str, str]:
    settings = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--conf {item!r}: expected KEY=VALUE, e.g. --conf spark.driver.host=10.0.0.5")
        settings[key.strip()] = value
    return settings


def _server(args: argparse.Namespace) -> int:
    answer: dict[str, Any] | None
    if args.action == "start":
        answer = serverclient.start(args.master, args.workers, _spark_settings(args.conf),
                                    lease_port=args.lease_port, ship_package=args.ship_package)
        print(f"run server ready in {answer['seconds']} s: pid {answer['pid']}, master {answer['master']}, "
              f"leases on {answer['lease']}, socket {server.socket_path()}, log {answer['log']}")
    elif args.action == "stop":
        answer = serverclient.stop()
        print(f"run server (pid {answer['pid']}) stopped" if answer else "no run server was running")
    else:
        answer = serverclient.status()
        if not answer:
            print(f"no run server answers on {server.socket_path()}")
            return EXIT_FAILED
        print(f"run server pid {answer['pid']} (its JVM {answer['jvm_pid']}), master {answer['master']}, leases on "
              f"{answer['lease']}, runs served {answer['served']}, in progress: {', '.join(answer['runs']) or 'none'}, "
              f"code {answer['fingerprint']}"
              + ("" if answer["fingerprint"] == server.fingerprint() else
                 " (differs from this eosmirror: restart it)"))
    return EXIT_OK


def _verify(args: argparse.Namespace) -> int:
    mirror = cliops.load_mirror(args)
    checks = verify.verify(mirror)
    print(verify.format_checks(checks))
    print(verify.record(mirror, checks, int(time.time() * 1000)))
    return verify.exit_code(checks)


















def _fence(args: argparse.Namespace) -> int:
    outcome = fencing.fence_mirror(cliops.load_mirror(args), all_generations=True)
    print(fencing.format_outcome(outcome))
    return EXIT_OK if outcome["unblocked"] else EXIT_FAILED








def _airflow(args: argparse.Namespace) -> int:
    home.migrate()
    home.exec_airflow(args.args)
    return EXIT_OK  # not reached


def _demo(args: argparse.Namespace) -> int:
    listen.mode()   # refused before the demo starts its brokers
    code: int = _tools("demo").main(records=args.records, master=args.master)
    return code


def _local_parser(sub: Any) -> None:
    """`eosmirror local`: the embedded clusters, of the default Kafka version or of those asked for."""
    local = sub.add_parser("local", help="embedded single-node source and target clusters")
    local.add_argument("action", choices=["up", "down", "status", "versions"],
                       help="versions: the Kafka versions a local cluster can run, and those fetched here")
    local.add_argument("--kafka-version", metavar="VERSION",
                       help="up: the Kafka version of both clusters, a line (3.9) or a release (3.9.1); default: "
                            "the one make setup fetches. Lines before 3.3 run with a ZooKeeper, 3.3 and newer KRaft")
    local.add_argument("--source-version", metavar="VERSION", help="up: the source cluster's Kafka version")
    local.add_argument("--target-version", metavar="VERSION", help="up: the target cluster's Kafka version")
    local.add_argument("--json", action="store_true", help="status as JSON")
    local.add_argument("--all", action="store_true",
                       help="down: also every other cluster the project started under var/kafka (tests, benchmarks)")
    local.add_argument("--source-rtt", type=float, metavar="MS",
                       help="up: put the source behind a proxy (toxiproxy) with this round trip in ms, as if it "
                            "were a region away; `local: source` resolves through it, port+4 (direct stays on port)")
    local.add_argument("--source-jitter", type=float, metavar="MS", help="up: jitter of that round trip (ms)")
    local.add_argument("--source-kbps", type=int, metavar="KB/s", help="up: bandwidth cap each way (KB/s)")
    local.set_defaults(func=_local)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="eosmirror", description="Exactly-once Kafka mirror")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    _local_parser(sub)

    setup = sub.add_parser("setup", help="fetch Kafka jars and prepare the Airflow home")
    setup.set_defaults(func=_setup)
    archive = sub.add_parser("spark-archive", help="(re)build what shortens every run's Spark start: the Spark class "
                                                   "archive, and bytecode in Spark's Python zips (setup does both when "
                                                   "missing; an image build can call this)")
    archive.set_defaults(func=_spark_archive)

    plan = sub.add_parser("plan", help="print what a run would copy, writing nothing")
    plan.add_argument("mirror")
    job.add_run_arguments(plan)
    plan.set_defaults(func=_plan, dry_run=True)

    run = sub.add_parser("run", help="one bounded mirror run on Spark")
    runargs.add_run_command(run)
    run.set_defaults(func=_run)

    serve = sub.add_parser("server", help="the run server: one long-lived Spark application that `run --server` uses")
    serve.add_argument("action", choices=["start", "stop", "status"])
    serve.add_argument("--master", help=f"Spark master of the server (default {server.DEFAULT_MASTER}; a cluster's "
                                        f"master runs the slots there, the driver here)")
    serve.add_argument("--workers", type=int, default=server.DEFAULT_WORKERS,
                       help="Python workers to warm at start (one per slot that runs at once)")
    serve.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                       help="a Spark setting of the server (repeatable), e.g. spark.driver.host=<this host>")
    serve.add_argument("--lease-port", type=int, default=0,
                       help="port of the runs' leases, which executors must reach on this host (default: any free)")
    serve.add_argument("--ship-package", action="store_true",
                       help="executors import eosmirror from a zip, not from an installed package")
    serve.set_defaults(func=_server)

    cliops.mirror_command(sub, "verify", _verify, "compare source and target over the mirrored ranges")
    cliops.mirror_command(sub, "fence", _fence, "fence every transactional id of the mirror and check the target")

    cliops.register(sub)
    clidr.register(sub)

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
                        format=LOG_FORMAT, stream=sys.stderr)
    try:
        code: int = args.func(args)   # the subcommand's function (set_defaults)
        return code
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
