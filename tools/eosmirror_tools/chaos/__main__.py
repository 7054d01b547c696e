"""``python -m eosmirror_tools.chaos`` (``make chaos``): see harness.py."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from eosmirror_tools.chaos import harness, scenarios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="eosmirror_tools.chaos", description="exactly-once under faults")
    parser.add_argument("--rounds", type=int, default=int(os.environ.get("ROUNDS", "11")))
    parser.add_argument("--seed", type=int)
    parser.add_argument("--short", action="store_true", help="every fault kind exactly once (CI)")
    parser.add_argument("--only", help="comma-separated scenarios: " + ", ".join(scenarios.SCENARIOS))
    parser.add_argument("--calibrate", action="store_true", help="run a broken mirror the oracle must catch")
    parser.add_argument("--records", type=int, default=300, help="seed records per partition")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    for noisy in ("eosmirror.slot.copier", "eosmirror.slot.classify", "eosmirror.slot.recordloop",
                  "eosmirror.driver.topics", "eosmirror.kafka.state", "eosmirror.driver.observe", "eosmirror.librdkafka"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    only = [s.strip() for s in args.only.split(",")] if args.only else None
    report = harness.run(rounds=args.rounds, seed=args.seed, short=args.short, only=only, calibrate=args.calibrate,
                         records=args.records)
    print(harness.summary(report))
    if args.calibrate:
        return 0 if report["calibration"]["harness_caught_the_broken_mirror"] else 1
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
