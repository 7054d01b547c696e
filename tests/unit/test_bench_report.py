"""The benchmark's goals: ratios from one run, verdicts only on a quiet machine, never against an untuned MM2."""

from eosmirror_tools.bench import report
from eosmirror_tools.bench.settings import BenchSettings


def row(key, rate, e2e, others=0.01, cpu_per_million=None, kind="x"):
    return {"key": key, "kind": kind, "records_per_second": rate, "end_to_end_records_per_second": e2e,
            "others_cpu_share": others, "brokers_restarted": False, "verified": True,
            "cpu_seconds_per_million_records": cpu_per_million}


def rows(others_eos=0.01):
    return {r["key"]: r for r in [
        row("200B/eosmirror-exactly_once-2slots", 400_000, 300_000, others_eos, cpu_per_million=3.5),
        row("200B/eosmirror-at_least_once-2slots", 450_000, 320_000),
        row("200B/ceiling-txn", 450_000, 400_000),
        row("200B/jvmcopier-2slots", 350_000, 310_000),
        row("200B/mm2-exactly_once-tuned", 200_000, 150_000, cpu_per_million=10.0),
        row("200B/mm2-exactly_once", 60_000, 50_000),
        row("200B/mm2-at_least_once-tuned", 300_000, 200_000),
    ]}


def test_goals_are_judged_against_the_tuned_peer_and_the_ceilings_of_the_same_run():
    settings = BenchSettings(sizes=("200B",))
    by_key = rows()
    table = report.ratios(settings, by_key)["200B"]
    assert table["eos_vs_mm2_eos_defaults"]["end_to_end"] == 6.0      # shown ...
    found = {t["target"]: t for t in report.targets(settings, report.ratios(settings, by_key), None, by_key)}
    assert not any("defaults" in name for name in found)                # ... never a goal
    assert found["eos vs mm2 eos tuned (end to end, 200B)"]["measured"] == 2.0
    assert found["eos vs mm2 eos tuned (end to end, 200B)"]["met"] is True
    assert found["eos vs ceiling txn (steady, 200B)"]["measured"] == 0.889
    assert found["eos vs ceiling txn (end to end, 200B)"]["met"] is True
    assert found["eos vs jvmcopier (end to end, 200B)"]["measured"] == 0.968
    assert found["alo vs mm2 alo tuned (end to end, 200B)"]["met"] is True
    assert found["CPU s per million records, eosmirror exactly_once (200B)"]["met"] is True
    assert found["CPU per record, eosmirror / tuned MM2 exactly-once (200B)"]["measured"] == 0.35


def test_no_verdict_when_others_used_more_than_five_percent_of_the_machine():
    settings = BenchSettings(sizes=("200B",))
    by_key = rows(others_eos=0.12)
    targets = report.targets(settings, report.ratios(settings, by_key), None, by_key)
    eos_rows = [t for t in targets if t["target"].startswith("eos vs")]
    assert eos_rows and all(t["met"] is None and t["others_cpu_share"] == 0.12 for t in eos_rows)
    assert report.quiet(list(by_key.values())) is False
    assert report.quiet(list(rows().values())) is True
    from eosmirror_tools.bench import markdown

    text = markdown.targets_table({"targets": targets, "quiet": False})
    assert "no verdict: not quiet" in text and "NOT A QUIET RUN" in text


def test_the_empty_run_goal_is_two_seconds():
    settings = BenchSettings(sizes=("200B",))
    found = report.targets(settings, {}, {"wall_seconds": 1.8, "others_cpu_share": 0.0})
    assert found == [{"target": "empty eosmirror run, process start to exit (s)", "goal": "<= 2.0",
                      "measured": 1.8, "met": True, "others_cpu_share": 0.0}]
