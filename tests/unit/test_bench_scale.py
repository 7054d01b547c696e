"""The scale bench's targets and table (issue #44 item 3): visibility after a run and MirrorMaker 2 beside."""

from eosmirror_tools.bench import markdown, scale


def row(shape: str, partitions: int, **extra):
    base = {"shape": shape, "topics": 1, "partitions": partitions, "empty_run_s": 5.0, "first_run_s": 40.0,
            "first_run_target_topics_s": 12.0, "visible_after_first_run_s": 3.0, "verify_s": 9.0,
            "groups_sync_s": 8.0, "groups": 1000, "group_partitions": 20, "lag_s": 1.5, "peak_rss_mb": 300.0,
            "verified": True, "end_to_end_s": 43.0}
    return {**base, **extra}


def test_targets_hold_visibility_and_the_mm2_ratio_only_where_measured():
    mm2 = {"tasks": 2, "settings": "mm2.TUNED", "start_to_done_s": 86.0, "read_committed_count": 1_000_000,
           "eosmirror_end_to_end_s": 43.0, "eosmirror_speedup": 2.0, "verified": True, "error": None}
    section = {"quick": False, "rows": [row("1x500", 500), row("1x5000", 5000, visible_after_first_run_s=None,
                                                               mm2=mm2)], "growth": {}}
    got = {t["target"]: (t["measured"], t["met"]) for t in scale.targets(section)}
    assert got["scale 1x5000: visible after first run (s)"] == (None, False)   # never visible: not met
    assert got["scale 1x5000: eosmirror end to end (first run + visible) vs tuned MirrorMaker 2 exactly-once"] == (
        2.0, True)
    assert scale.targets({**section, "quick": True}) == []
    text = markdown.scale_table({"scale": section})
    assert "| visible after (s) |" in text and "of it target topics (s)" in text
    assert "MirrorMaker 2 exactly-once (2 tasks, mm2.TUNED) on the 5,000-partition data: 86.0 s" in text
    assert "eosmirror end to end 43.0 s (x2.0)" in text


def test_the_first_runs_copy_is_compared_with_the_same_records_over_8_partitions():
    few = {"partitions": 8, "records": 1_000_000, "first_run_s": 9.0, "target_topics_s": 0.5, "copy_s": 8.5,
           "exit_code": 0, "verified": True, "copy_ratio": 2.5}
    section = {"quick": False, "rows": [row("1x5000", 5000, first_run_copy_s=21.25, few_partitions=few)],
               "growth": {}}
    got = {t["target"]: (t["measured"], t["met"]) for t in scale.targets(section)}
    assert got["scale 1x5000: the first run's copy vs the same records over 8 partitions"] == (2.5, False)
    unverified = {**few, "verified": False, "copy_ratio": None}
    section["rows"][0]["few_partitions"] = unverified
    got = {t["target"]: (t["measured"], t["met"]) for t in scale.targets(section)}
    assert got["scale 1x5000: the first run's copy vs the same records over 8 partitions"] == (None, False)
    section["rows"][0]["few_partitions"] = few
    text = markdown.scale_table({"scale": section})
    assert "The same 1,000,000 records over 8 partitions: first run 9.0 s (target topics 0.5 s of it), copy 8.5 s" in text
    assert "the 5,000-partition copy 21.2 s (x2.5)" in text or "the 5,000-partition copy 21.3 s (x2.5)" in text
