"""The arguments of one mirror run, shared by the spark-submit job, the full command line and the
run server's lean client (``eosmirror run --server`` imports this, not the driver: its process start
is part of every served run)."""

from __future__ import annotations

import argparse
import datetime as dt

from eosmirror.core.errors import ConfigError


def parse_timestamp(value: str, flag: str = "--until") -> dt.datetime:
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{flag} {value!r} is not an ISO-8601 timestamp (e.g. 2026-11-21T10:00:00Z)") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="mirror definitions (default: $EOSMIRROR_CONFIG or dags/mirrors.yaml)")
    parser.add_argument("--until", help="copy only records below the source offsets of this time (ISO-8601)")
    parser.add_argument("--max-records-per-partition", type=int, help="override the mirror's bound")
    parser.add_argument("--max-bytes-per-slot", type=int, help="override the mirror's bound")
    parser.add_argument("--max-bytes-per-second", type=int,
                        help="override the mirror's bandwidth cap (bytes of records per second, split over the slots)")
    parser.add_argument("--topics", help="comma-separated subset of the mirror's source topics")
    parser.add_argument("--dry-run", action="store_true", help="plan and report; write nothing")
    parser.add_argument("--follow-seconds", type=float,
                        help="after the bound, keep copying what arrives (a transaction every "
                             "max_transaction_seconds) for up to this long, or until the next run takes over")
    parser.add_argument("--follow-until", help="as --follow-seconds, up to this time (ISO-8601; set by Airflow)")
    parser.add_argument("--result-json", help="write the run report (JSON) to this path")
    parser.add_argument("--final-of-switchover", action="store_true",
                        help="the final run of `eosmirror switchover`: it copies while the mirror is switching-over "
                             "(every other run is refused then); set by the switchover, not by hand")
    parser.add_argument("--accept-foreign", action="store_true",
                        help="the records another producer wrote to the mirrored target topics (which stopped the "
                             "last run: exit 8) are accepted as they are; the run logs them and copies on after "
                             "them (docs/failing-loudly.md)")


def follow_until(args: argparse.Namespace) -> dt.datetime | None:
    """The follow bound of --follow-until or --follow-seconds (from now); None: a bounded run."""
    seconds, until = getattr(args, "follow_seconds", None), getattr(args, "follow_until", None)
    if seconds is not None and until:
        raise ConfigError("--follow-seconds and --follow-until both bound the follow; give one of them")
    if seconds is not None:
        if not 0 < seconds <= 7 * 86400:
            raise ConfigError(f"--follow-seconds {seconds:g} must be a number of seconds from 0 to 604800 (a week)")
        return dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=seconds)
    return parse_timestamp(until, "--follow-until") if until else None


def served_command_line(argv: list[str]) -> bool:
    """`eosmirror run ... --server` that ``launch.decide`` sends to the run server (its first rules,
    read off the command line): ``eosmirror.cli`` then takes its lean path, without the full CLI."""
    return argv[:1] == ["run"] and "--server" in argv and "--dry-run" not in argv and "--inprocess" not in argv


def add_run_command(run: argparse.ArgumentParser) -> None:
    """Everything `eosmirror run` takes (the CLI's `run` subcommand and the lean `run --server` path)."""
    run.add_argument("mirror")
    add_run_arguments(run)
    run.add_argument("--master", help="Spark master (default $EOSMIRROR_SPARK_MASTER or local[*])")
    run.add_argument("--ship-package", action="store_true",
                     help="send the eosmirror package to executors with --py-files (cluster masters)")
    run.add_argument("--inprocess", action="store_true", help="run the slots in this process, without Spark")
    run.add_argument("--server", action="store_true",
                     help="run in the run server (`eosmirror server start`): no Spark start to pay")
