"""``python -m eosmirror_tools.soak`` (``make soak``): the recovery point under a sustained load.

    make soak                          # 30 min, 20,000 records/s of 200 B on 8 partitions; scheduled */1,
                                       # follow */5 and MirrorMaker 2 exactly-once side by side
    make soak SOAK_ARGS="--minutes 5 --rate 5000"

Its own home (``var/soak``: brokers on 15092/25092, its own Airflow database and logs), so a soak
never touches the demo's Airflow. Output: build/soak/report.json, summary.md, time-lag.png.
Exit code 0 when the comparison is exact and no run failed (the lag goals are reported, not enforced).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

SOAK_PORTS = {"EOSMIRROR_SOURCE_PORT": "15092", "EOSMIRROR_TARGET_PORT": "25092"}


def main(argv: list[str] | None = None) -> int:
    from eosmirror_tools.soak.harness import CONFIGS, SoakSettings

    defaults = SoakSettings()
    parser = argparse.ArgumentParser(prog="eosmirror_tools.soak", description="time lag under sustained load")
    parser.add_argument("--minutes", type=float, default=defaults.minutes)
    parser.add_argument("--rate", type=float, default=defaults.rate, help="records/s produced")
    parser.add_argument("--size", type=int, default=defaults.size, help="bytes per record")
    parser.add_argument("--partitions", type=int, default=defaults.partitions)
    parser.add_argument("--configs", default=",".join(CONFIGS), help="any of: " + ", ".join(CONFIGS))
    parser.add_argument("--follow-cron", default=defaults.follow_cron)
    parser.add_argument("--scheduled-cron", default=defaults.scheduled_cron)
    parser.add_argument("--follow-transaction-seconds", type=float, default=defaults.follow_transaction_seconds,
                        help="max_transaction_seconds of the follow mirror")
    parser.add_argument("--keep-topics", action="store_true",
                        help="keep the load and its copies on the brokers (deleted at the end by default)")
    parser.add_argument("--warmup", type=float, default=defaults.warmup_s, help="seconds of load before lag counts")
    parser.add_argument("--out", type=Path, help="default build/soak")
    args = parser.parse_args(argv)
    configs = tuple(c.strip() for c in args.configs.split(",") if c.strip())
    unknown = sorted(set(configs) - set(CONFIGS))
    if unknown:
        parser.error(f"unknown configuration(s) {unknown}: choose from {', '.join(CONFIGS)}")
    if not configs:
        parser.error(f"--configs names none: choose from {', '.join(CONFIGS)}")
    for name, value in (("--minutes", args.minutes), ("--rate", args.rate), ("--size", args.size),
                        ("--partitions", args.partitions)):
        if value <= 0:
            parser.error(f"{name} must be above 0 (got {value:g})")
    if args.size < 20:
        parser.error(f"--size {args.size} is too small: a record's value starts with its id (give 20 bytes or more)")
    settings = SoakSettings(minutes=args.minutes, rate=args.rate, size=args.size, partitions=args.partitions,
                            configs=configs, follow_cron=args.follow_cron, scheduled_cron=args.scheduled_cron,
                            warmup_s=args.warmup, follow_transaction_seconds=args.follow_transaction_seconds,
                            keep_topics=args.keep_topics)

    from eosmirror import paths

    checkout = paths.checkout_root()
    os.environ.setdefault("EOSMIRROR_HOME", str((checkout or paths.home()) / "var" / "soak"))
    for key, value in SOAK_PORTS.items():
        os.environ.setdefault(key, value)
    from eosmirror.airflow import home
    from eosmirror.core.logformat import LOG_FORMAT

    home.apply()      # before anything imports airflow
    logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT)
    home.migrate()
    from eosmirror_tools.kit import cluster
    from eosmirror_tools.soak import harness, report

    # The soak's own brokers (its ports, var/soak) stop at the end: left running they held 1.3 GB and
    # kept the next soak from starting ("port 15092 is already used"). Brokers it found running stay.
    started = [c for c in cluster.default_clusters() if cluster.running_pid(c) is None]
    source, target = cluster.up()
    out = args.out or paths.build_dir("soak")
    try:
        doc = harness.run(source.bootstrap, target.bootstrap, home.airflow_home(), out / "work", settings,
                          target_data_dir=target.data_dir, say=lambda line: print(line, flush=True))
    finally:
        print("stopped the soak's brokers: " + (", ".join(cluster.down(started)) or "none"), flush=True)
    written = report.write(doc, out)
    print(report.summary(doc))
    print("written: " + ", ".join(str(p) for p in written))
    return 0 if doc["goals"]["exact"] and doc["goals"]["no_failed_runs"] else 1


if __name__ == "__main__":
    sys.exit(main())
