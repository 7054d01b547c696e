"""The chaos suite's short runs (every fault kind once but the long-only ones) and its calibration (make
chaos runs long).

The hard broker restarts (scenarios.BROKER_FAULTS, 2 rounds) run in `make test`: no other test restarts a
broker under a running mirror. The clean restarts and the process faults (10 rounds) are the chaos suite's
smoke run, marked `lab` (`make lab-smoke`, CI runs it): each process fault also has a product test of its own
in `make test`. One round per kind is the least that still shows each kind keeps exactly once."""

import pytest

from eosmirror_tools.chaos import harness, scenarios
from eosmirror_tools.kit import oracle

pytestmark = pytest.mark.e2e
PROCESS_FAULTS = [k for k in scenarios.SCENARIOS if k not in scenarios.LONG_ONLY + scenarios.BROKER_FAULTS]


def assert_exactly_once(report: dict, kinds, min_records: int) -> None:
    assert report["faults"] == dict.fromkeys(kinds, 1), report["faults"]
    assert not [r["problems"] for r in report["round_results"] if r["problems"]]
    violations = {c: report[c] for c in oracle.COUNTERS if c != "records_checked" and report[c]}
    assert violations == {}, harness.summary(report) + "\n" + str([r["examples"] for r in report["round_results"]])
    assert report["records_checked"] > min_records, harness.summary(report)
    assert all(r["recovery_runs"] >= 1 for r in report["round_results"])


def test_broker_restarts_keep_exactly_once(clusters, tmp_path):
    report = harness.run(short=True, only=list(scenarios.BROKER_FAULTS), seed=20261128, out_dir=tmp_path)
    assert_exactly_once(report, scenarios.BROKER_FAULTS, min_records=1_500)
    assert (tmp_path / "report.json").exists() and (tmp_path / "summary.md").exists()


@pytest.mark.lab
def test_every_process_fault_and_clean_restart_keeps_exactly_once(clusters, tmp_path):
    report = harness.run(short=True, only=PROCESS_FAULTS, seed=20261121, out_dir=tmp_path)
    assert_exactly_once(report, PROCESS_FAULTS, min_records=8_000)
    zombie = next(r for r in report["round_results"] if r["scenario"] == "zombie_sigstop")
    assert any("fenced" in note for note in zombie["notes"]), zombie["notes"]
    handover = next(r for r in report["round_results"] if r["scenario"] == "follow_handover")
    assert any("ended as ['handed-over'" in note for note in handover["notes"]), handover["notes"]


def test_calibration_the_oracle_catches_a_broken_mirror(clusters, tmp_path):
    report = harness.run(calibrate=True, seed=7, out_dir=tmp_path)
    assert report["calibration"]["harness_caught_the_broken_mirror"]
    assert report["duplicates"] > 0 and not report["ok"]


def test_oracle_counts_each_kind_of_violation():
    from eosmirror.kafka.readers import Record

    def rec(offset, seq, txn=b"none", value=None):
        return Record(offset, b"k", value or f"v{seq}".encode(), (("seq", str(seq).encode()), ("txn", txn)), 1)

    source = [rec(0, 0), rec(1, 1), rec(3, 2)]
    verdict = oracle.Verdict()
    oracle.check_partition(verdict, source, [rec(0, 0), rec(1, 0), rec(2, 2), rec(3, 9, b"aborted")], "t[0]")
    assert verdict.counts["duplicates"] == 1 and verdict.counts["losses"] == 1
    assert verdict.counts["aborted_leaks"] == 1 and not verdict.ok
    swapped = oracle.Verdict()
    oracle.check_partition(swapped, source, [rec(0, 1), rec(1, 0), rec(2, 2, value=b"changed")], "t[0]")
    assert swapped.counts["order_violations"] == 1 and swapped.counts["content_mismatches"] == 1
    clean = oracle.Verdict()
    oracle.check_partition(clean, source, [rec(10, 0), rec(11, 1), rec(12, 2)], "t[0]")
    assert clean.ok and clean.counts["records_checked"] == 3
