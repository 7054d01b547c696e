"""The bench across distance: one row per (round trip, size) with every system's rate, the ratios the
issue's goals use (verdicts only at 100 ms, on a quiet machine, when every copy verified), eosmirror's
slot steps summed over its slots, and the command line that selects it."""

import pytest

from eosmirror_tools.bench import distance
from eosmirror_tools.bench.__main__ import parse


def row(system, rtt, e2e, others=0.01, verified=True, steps=None):
    return {"key": f"200B/rtt{rtt}/{system}", "kind": f"distance-{system}", "size_class": "200B",
            "end_to_end_records_per_second": e2e, "wall_seconds": 10.0, "verified": verified,
            "others_cpu_share": others,
            "details": {"rtt_ms": rtt, "measured_rtt_ms": rtt + 0.4, "system": system, "run_steps": {"plan": 0.1},
                        "slots_detail": [{"step_seconds": s} for s in steps or []]}}


def rows(others=0.01, verified=True):
    steps = [{"copy": 1.0, "commit": 0.25}, {"copy": 2.0, "commit": 0.5, "fence": 0.1}]
    return [row("eosmirror", 0, 100_000, steps=steps), row("mm2", 0, 50_000), row("jvmcopier", 0, 110_000),
            row("served", 0, 120_000),
            row("eosmirror", 100, 80_000, others, verified, steps), row("mm2", 100, 40_000, others),
            row("jvmcopier", 100, 100_000, others), row("served", 100, 90_000, others),
            {"key": "200B/eosmirror-exactly_once-2slots", "kind": "eosmirror"}]


def test_each_round_trip_and_size_gets_one_row_with_every_system_and_the_ratios():
    section = distance.section(rows())
    assert section["rtts_ms"] == [0, 100]
    far = section["rows"][1]
    assert far["rtt_ms"] == 100 and far["measured_rtt_ms"] == 100.4
    assert far["end_to_end_records_per_second"] == {"eosmirror": 80_000, "served": 90_000, "mm2": 40_000,
                                                    "jvmcopier": 100_000}
    assert far["ratios"]["eosmirror_vs_mm2_eos_tuned"] == 2.0 and far["ratios"]["eosmirror_vs_jvmcopier"] == 0.8
    assert far["eosmirror_slot_steps"]["eosmirror"] == {"copy": 3.0, "commit": 0.75, "fence": 0.1}
    found = {t["target"]: t for t in distance.targets(section)}
    assert found["eosmirror vs mm2 eos tuned (end to end, 200B, 100 ms to the source)"]["met"] is True
    assert found["eosmirror vs jvmcopier (end to end, 200B, 100 ms to the source)"]["met"] is False
    assert all("100 ms" in name for name in found)          # the goals are the 100 ms ones
    text = distance.table({"distance": section})
    assert "100 ms (100.4)" in text and "80,000" in text and "copy" in text


def test_no_verdict_on_a_busy_machine_or_when_a_copy_did_not_verify():
    for section in (distance.section(rows(others=0.2)), distance.section(rows(verified=False))):
        assert [t["met"] for t in distance.targets(section)] == [None] * len(distance.GOALS)
    assert distance.section([{"key": "x", "kind": "eosmirror"}]) is None and distance.targets(None) == []


def test_only_distance_runs_alone_with_its_round_trips():
    settings = parse(["--only", "distance", "--rtts", "0,100", "--sizes", "200B", "--records", "1000"])
    assert settings.kinds == ("distance",) and settings.rtts == (0, 100)
    steps = distance.plan(settings)
    assert len(steps) == 2 * len(distance.SYSTEMS)
    assert [title for title, _ in steps][-1] == "200B JVM exactly-once copier, source 100 ms away"
    assert parse(["--quick"]).rtts == (0, 25, 100)
    with pytest.raises(SystemExit):
        parse(["--rtts", "-5"])
