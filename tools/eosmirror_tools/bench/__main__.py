"""``python -m eosmirror_tools.bench`` (what ``make bench`` runs).

  --records N      records of the 200 B class (default $BENCH_RECORDS or 2,000,000; 2 KB class: N/10)
  --quick          smoke size: 20,000 records, 200 B class only, no slot sweep (every configuration
                   kind still runs and verifies; the 2 KB class differs only in the value size)
  --only KINDS     comma-separated subset of ceiling,raw,jvmcopier,eosmirror,served,mm2,translation,rereads,scale,cap,storm,distance;
                   jvmcopier: a lean JVM exactly-once copier (bench/java/TxCopier.java), the ceiling of
                   consume + produce + commit on these brokers; served: eosmirror through the run
                   server (`eosmirror run --server`; the server is started first and not timed);
                   translation: group-offset translation and progress recovery vs offset-sync history
                   (1 M and 10 M sync records; --quick: 20 k and 200 k); rereads: re-reads and skips
                   of consumer groups after failover, eosmirror vs MirrorMaker 2's group offset sync
                   (20 groups on 4 x 5,000 records; --quick: 6 groups on 4 x 1,000);
                   scale: run, empty run, verify, groups sync and lag of mirrors of many partitions
                   (1 x 500, 1 x 5,000 and 1,000 x 5 partitions of 200 records, 1,000 groups, 4 slots;
                   --quick: 1 x 50 and 10 x 5, 20 groups), rows also in build/bench/scale.json;
                   cap: a 2-slot mirror at max_bytes_per_second 1,000,000 for 60 s (--quick: 15 s), the
                   rate measured on the target from outside, in build/bench/cap.json;
                   storm: 5,000 partitions (--storm-partitions; --quick: 50) of an hour-old backlog caught up by
                   one 4-slot run, no cap / max_bytes_per_second / catch_up_bytes_per_second: a target
                   producer's and a source consumer's latency (baseline -> storm), in build/bench/storm.json
                   distance: eosmirror (spark-submit and run server), tuned MM2 exactly-once and the JVM copier
                   with the source --rtts ms away behind a proxy (toxiproxy), the mirror beside the target
  --rtts LIST      the distance section's round trips to the source in ms (default 0,25,100)
  --sizes S        comma-separated subset of 200B,2KB
  --slots LIST     slot sweep of eosmirror exactly_once (default 1,2,4)
  --mm2-defaults   MirrorMaker 2 also at its defaults (always, except with --quick); its rows
                   otherwise run with mm2.TUNED, the settings its users tune for throughput
  --mm2-tuned-only MirrorMaker 2 only with mm2.TUNED (the rows the ratios use; its defaults' exactly-once
                   run once held a transaction open for minutes, waiting out the copy timeout)
  --mm2-property K=V   extra or overriding MirrorMaker 2 setting (repeatable, over mm2.TUNED);
                   {source} and {target} stand for the cluster aliases, which are fresh per configuration:
                   --mm2-property '{source}->{target}.transaction.boundary=interval'
  --keep-topics    leave every configuration's topics on the clusters
  --profile        also profile eosmirror with pyinstrument (build/bench/profile-*.txt)
  --profile-only   only the profiles, no configuration
  --out DIR        where report.json, report.md and throughput.png go (default build/bench)
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from eosmirror.core.logformat import LOG_FORMAT
from eosmirror_tools.bench.settings import DEFAULT_RECORDS, KINDS, QUICK_RECORDS, BenchSettings, records_from_env


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def parse(argv: list[str] | None) -> BenchSettings:
    parser = argparse.ArgumentParser(prog="python -m eosmirror_tools.bench",
                                     description="eosmirror vs MirrorMaker 2, a raw copy loop and the broker ceiling")
    parser.add_argument("--records", type=int, help="records of the 200 B class (default $BENCH_RECORDS or 2,000,000)")
    parser.add_argument("--mm2-defaults", action="store_true", help="MirrorMaker 2 at its defaults too (quick)")
    parser.add_argument("--mm2-tuned-only", action="store_true",
                        help="MirrorMaker 2 only with its tuned settings (the rows the ratios use)")
    parser.add_argument("--quick", action="store_true", help="smoke size: 20,000 records, 200B only, no slot sweep")
    parser.add_argument("--only", type=_csv, default=KINDS, help="subset of " + ",".join(KINDS))
    parser.add_argument("--sizes", type=_csv, default=None, help="subset of 200B,2KB (default both; quick: 200B)")
    parser.add_argument("--slots", type=lambda s: tuple(int(x) for x in _csv(s)), default=None,
                        help="slot sweep (default 1,2,4; quick: none)")
    parser.add_argument("--mm2-property", action="append", default=[], metavar="KEY=VALUE",
                        help="extra MirrorMaker 2 setting; {source}/{target} stand for the aliases")
    parser.add_argument("--rtts", type=lambda s: tuple(int(x) for x in _csv(s)), default=None,
                        help="distance: round trips to the source in ms (default 0,25,100)")
    parser.add_argument("--keep-topics", action="store_true", help="leave the topics for inspection")
    parser.add_argument("--profile", action="store_true", help="also write pyinstrument profiles")
    parser.add_argument("--profile-only", action="store_true", help="only the profiles")
    parser.add_argument("--out", type=Path, help="output folder (default build/bench)")
    parser.add_argument("--storm-partitions", type=int, help="storm: the partitions that catch up (default 5,000)")
    args = parser.parse_args(argv)
    unknown = [k for k in args.only if k not in KINDS]
    if unknown:
        parser.error(f"--only: unknown kind {unknown[0]!r}; known: {', '.join(KINDS)}")
    if args.storm_partitions is not None and args.storm_partitions < 1:
        parser.error("--storm-partitions: use at least 1 partition")
    if args.rtts is not None and any(rtt < 0 for rtt in args.rtts):
        parser.error("--rtts: a round trip cannot be negative")
    if args.records is not None and args.records < 100:
        parser.error("--records: use at least 100 records")
    records = args.records or records_from_env(QUICK_RECORDS if args.quick else DEFAULT_RECORDS)
    extra = {}
    for item in args.mm2_property:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            parser.error(f"--mm2-property {item!r}: expected KEY=VALUE")
        extra[key.strip()] = value.strip()
    kinds = () if args.profile_only else tuple(k for k in KINDS if k in args.only)
    sizes = args.sizes if args.sizes is not None else (("200B",) if args.quick else ("200B", "2KB"))
    settings = BenchSettings(records=records, sizes=sizes, kinds=kinds,
                             quick=args.quick, keep_topics=args.keep_topics, profile=args.profile or args.profile_only,
                             mm2_properties=extra, mm2_defaults_too=(not args.quick or args.mm2_defaults) and not args.mm2_tuned_only,
                             slot_sweep=args.slots if args.slots is not None else (() if args.quick else (1, 2, 4)),
                             storm_partitions=args.storm_partitions,
                             rtts=args.rtts if args.rtts is not None else BenchSettings.rtts)
    if args.out:
        settings.out_dir = args.out.resolve()
    try:
        settings.size_classes  # noqa: B018 - validates --sizes
    except ValueError as exc:
        parser.error(str(exc))
    return settings


def _stop_on_sigterm(signum: int, frame: object) -> None:
    # Turn SIGTERM into an exception so that every `finally` runs: it stops MM2, Spark and the
    # other children (they live in sessions of their own and would not get the signal).
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    import logging

    settings = parse(argv)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    # librdkafka and the clients log through Python logging; keep the progress lines readable.
    logging.basicConfig(level=logging.ERROR, format=LOG_FORMAT)
    from eosmirror_tools.bench import suite

    try:
        document = suite.run(settings)
    except KeyboardInterrupt:   # the children were stopped on the way out (ChildProcess)
        print("interrupted; no report written", file=sys.stderr)
        return 130
    # Exit 0 even when a target is missed (targets are reported, not enforced); 1 when a
    # configuration did not verify: then the report holds a wrong answer, not a result.
    return 0 if document["all_verified"] else 1


if __name__ == "__main__":
    sys.exit(main())
