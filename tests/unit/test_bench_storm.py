"""The storm bench's figures (issue #52 item 4): percentiles of a window of probe samples, and its table."""

from eosmirror_tools.bench import markdown
from eosmirror_tools.kit import latency


def test_summary_takes_only_the_windows_samples_with_nearest_rank_percentiles():
    samples = [(100.0 + i / 100, (i + 1) / 1000) for i in range(100)]        # 1..100 ms, one per 10 ms
    samples += [(99.0, 9.0), (101.0, 9.0)]                                     # outside [100, 101)
    got = latency.summary(samples, 100.0, 101.0)
    assert got == {"samples": 100, "p50_ms": 50.0, "p99_ms": 99.0, "max_ms": 100.0}
    assert latency.summary(samples, 200.0, 201.0) == {"samples": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    assert latency.percentile([0.004], 99) == 0.004


def test_storm_table_shows_both_latencies_per_case():
    lat = {"baseline": {"samples": 10, "p50_ms": 2.0, "p99_ms": 5.5, "max_ms": 7.0},
           "storm": {"samples": 10, "p50_ms": 20.0, "p99_ms": 250.0, "max_ms": 300.0}}
    case = {"case": "no cap", "catch_up_seconds": 12.5, "catch_up_bytes_per_second": 24_000_000,
            "target_produce_latency": lat, "source_fetch_latency": lat, "target_read_committed": 300_000,
            "records": 300_000, "verified": True}
    doc = {"storm": {"partitions": 5_000, "records_per_partition": 60, "record_bytes": 1016, "slots": 4,
                     "cap_bytes_per_second": 4_000_000, "backlog_age_seconds": [360.0, 3600.0], "probe_rate": 200.0,
                     "baseline_seconds": 10.0, "cases": [case]}}
    text = markdown.storm_table(doc)
    assert "| no cap | 12.5 | 24.0 | 2/5.5/7 | 20/250/300 | 2/5.5/7 | 20/250/300 | 300,000 / 300,000 | yes |" in text
    assert "5,000 partitions x 60 records" in text and "60-6 min old" in text
    assert markdown.storm_table({}) == ""
