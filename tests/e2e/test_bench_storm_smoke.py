"""``python -m eosmirror_tools.bench --quick --only storm`` (issue #52 item 4) at a tiny shape: 50 partitions of
an hour-old backlog caught up three times (no cap, max_bytes_per_second, catch_up_bytes_per_second) while a
producer on the target and a consumer on the source measure their latencies from processes of their own.

Only shapes and exact counts are asserted: every case verified by a read_committed count equal to the source's,
both latencies measured before and during each catch-up, the caps engaged where set and not elsewhere (the
run's own report), and the report (json and markdown) carries the section. The figures are the bench's to
report, never this test's to judge (about 50 s on 2 busy cores with the clusters up).
"""

import json
import subprocess
import sys

import pytest

from eosmirror_tools.bench import storm

pytestmark = [pytest.mark.e2e, pytest.mark.lab]   # a bench smoke: `make lab-smoke`


@pytest.mark.timeout(300)
def test_quick_storm_measures_both_latencies_per_case_and_every_copy_verifies(clusters, tmp_path):
    done = subprocess.run([sys.executable, "-m", "eosmirror_tools.bench", "--quick", "--only", "storm", "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    section = json.loads((tmp_path / "storm.json").read_text())
    assert section["partitions"] == storm.QUICK_PARTITIONS and section["probe_failures"] == {}
    cases = {c["case"]: c for c in section["cases"]}
    assert list(cases) == ["no cap", "max_bytes_per_second", "catch_up_bytes_per_second"]
    expected = storm.QUICK_PARTITIONS * storm.RECORDS_PER_PARTITION
    for name, case in cases.items():
        assert case["verified"] is True and case["run_status"] == "ok", (name, case)
        assert case["records"] == case["target_read_committed"] == case["run_records"] == expected, (name, case)
        assert case["catch_up_seconds"] > 0, (name, case)
        for probe in ("target_produce_latency", "source_fetch_latency"):
            for window in ("baseline", "storm"):
                lat = case[probe][window]
                assert lat["samples"] > 0, (name, probe, window, lat)
                assert 0 <= lat["p50_ms"] <= lat["p99_ms"] <= lat["max_ms"], (name, probe, window, lat)
    # The caps were in force where set, and only there (the run's report: seconds its slots waited on the cap).
    assert cases["no cap"]["throttled_seconds"] == 0 and cases["no cap"]["catch_up_rate_seconds"] == 0
    assert cases["max_bytes_per_second"]["throttled_seconds"] > 0
    assert cases["max_bytes_per_second"]["catch_up_rate_seconds"] == 0
    # Every record is older than catch_up_lag_seconds: the catch-up rate held throughout.
    assert cases["catch_up_bytes_per_second"]["throttled_seconds"] > 0
    assert cases["catch_up_bytes_per_second"]["catch_up_rate_seconds"] > 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["storm"] == section and report["all_verified"] is True
    markdown = (tmp_path / "report.md").read_text()
    assert "## Catch-up storm" in markdown and "| catch_up_bytes_per_second |" in markdown
    assert "target produce p99" in done.stdout
