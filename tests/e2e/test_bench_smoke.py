"""`make bench` at smoke size: every configuration kind runs and verifies, and the report has its shape.

Runs ``python -m eosmirror_tools.bench --quick`` (20,000 records of 200 B, every configuration kind, no slot
sweep; the scale kind on its own, ``--quick --only scale``, beside it; then the distance kind alone at 100 ms,
``--quick --only distance --rtts 100``) as subprocesses, into temporary
folders so that the real build/bench report is never overwritten.
Timings are reported by the bench, never asserted here: only shapes and exact counts are.

Slow (145 s on 2 cores at load 5-11, set-up included; 221 s with the scale bench after the other kinds
instead of beside them): it starts MirrorMaker 2 and the JVM copier and runs every configuration kind
once; the bench is what it tests, and a smaller one would leave a kind out.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from eosmirror_tools.bench.settings import KINDS
from eosmirror_tools.kit import waits

pytestmark = [pytest.mark.e2e, pytest.mark.lab]   # the bench suite's smoke: `make lab-smoke`

KINDS_PER_SIZE = {"ceiling": 2, "raw": 1, "jvmcopier": 1, "eosmirror": 2, "eosmirror-served": 2,   # eos, alo
                  "mm2": 2}   # --quick: MM2 tuned only
RATE_FIELDS = ("records_per_second", "mb_per_second", "end_to_end_records_per_second", "end_to_end_mb_per_second",
               "wall_seconds", "peak_rss_mb", "peak_rss_by_role_mb", "cpu_seconds", "cpu_seconds_per_million_records",
               "others_cpu_share", "verified", "target_count", "expected_count")


class BenchRun:
    """``python -m eosmirror_tools.bench --quick --only <kinds> --out <folder>`` started in the background,
    its output in files (two at once through pipes could block on a full one)."""

    def __init__(self, out: Path, kinds: str, *extra: str):
        self.out = out
        self.stdout, self.stderr = out / "stdout.txt", out / "stderr.txt"
        self.proc = subprocess.Popen([sys.executable, "-m", "eosmirror_tools.bench", "--quick", "--only", kinds,
                                      "--out", str(out), *extra], stdout=self.stdout.open("w"),
                                     stderr=self.stderr.open("w"), text=True)

    def result(self, timeout: float) -> subprocess.CompletedProcess:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
            raise AssertionError(f"the bench ({self.out.name}) did not end within {timeout:.0f} s; {waits.machine_now()}"
                                 f"\n{self.stdout.read_text()[-3000:]}") from None
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, self.stdout.read_text(),
                                           self.stderr.read_text())


@pytest.fixture(scope="module")
def benches(clusters, tmp_path_factory):
    """Both bench subprocesses, started together: every kind but scale and cap, and scale on its own (its
    own smoke test below; cap, a rate held for a while, is tests/integration/test_bandwidth_cap.py's; storm has
    tests/e2e/test_bench_storm_smoke.py). They share the brokers, never a topic, mirror or folder (each has its run id);
    side by side they take about the longer one (each waits on JVM and Spark starts much of its time).
    Their timings are reported, never asserted, so running beside each other changes no outcome."""
    runs = {"kinds": BenchRun(tmp_path_factory.mktemp("bench"),
                              ",".join(k for k in KINDS if k not in ("scale", "cap", "storm", "distance"))),
            "scale": BenchRun(tmp_path_factory.mktemp("scale"), "scale")}
    yield runs
    for run in runs.values():
        if run.proc.poll() is None:      # a test failed or timed out before waiting for it
            run.proc.kill()
            run.proc.wait(30)


@pytest.fixture(scope="module")
def bench(benches):
    return benches["kinds"].result(timeout=480), benches["kinds"].out


@pytest.mark.timeout(540)
def test_quick_bench_writes_three_files_and_exits_zero(bench):
    done, out = bench
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    assert (out / "report.json").is_file() and (out / "report.md").is_file()
    assert (out / "throughput.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "[1/" in done.stdout and "verified:" in done.stdout          # progress was shown while it ran


@pytest.mark.timeout(540)
def test_every_configuration_ran_and_verified_with_an_exact_count(bench):
    done, out = bench
    report = json.loads((out / "report.json").read_text())
    rows = report["configurations"]
    sizes = [s["name"] for s in report["data_set"]["size_classes"]]
    assert sizes == ["200B"] and report["records"] == 20_000
    for size in sizes:
        kinds = [r["kind"] for r in rows if r["size_class"] == size]
        assert {k: kinds.count(k) for k in KINDS_PER_SIZE} == KINDS_PER_SIZE, (size, kinds)
    assert [r["kind"] for r in rows].count("eosmirror-empty") == 1
    assert [r["kind"] for r in rows].count("eosmirror-served-empty") == 1
    for r in rows:
        assert r["verified"] is True, (r["key"], r["error"])
        assert r["target_count"] == r["expected_count"], r["key"]
        assert r["error"] is None, r["key"]
        assert all(field in r for field in RATE_FIELDS), r["key"]
    by_key = {r["key"]: r for r in rows}
    assert by_key["200B/eosmirror-exactly_once-2slots"]["expected_count"] == 20_000
    assert by_key["200B/mm2-exactly_once-tuned"]["expected_count"] == 20_000
    assert by_key["200B/jvmcopier-2slots"]["expected_count"] == 20_000
    assert by_key["200B/eosmirror-empty-run"]["records"] == 0                    # nothing copied ...
    assert by_key["200B/eosmirror-empty-run"]["expected_count"] == 20_000        # ... and nothing lost
    assert report["all_verified"] is True


@pytest.mark.timeout(540)
def test_report_holds_ratios_targets_memory_and_mm2_exactly_once_evidence(bench):
    done, out = bench
    report = json.loads((out / "report.json").read_text())
    assert {"eos_vs_mm2_eos_tuned", "eos_vs_ceiling_txn", "eos_vs_jvmcopier", "served_vs_jvmcopier",
            "served_alo_vs_mm2_alo_tuned"} <= set(report["ratios"]["200B"])
    for pair in report["ratios"]["200B"].values():
        assert set(pair) == {"ours", "theirs", "steady", "end_to_end", "both_verified", "brokers_restarted",
                             "others_cpu_share"}
    assert {t["target"].split(" (")[0] for t in report["targets"]} >= {
        "eos vs ceiling txn", "eos vs jvmcopier", "eos vs mm2 eos tuned", "alo vs mm2 alo tuned",
        "CPU s per million records, eosmirror exactly_once", "empty eosmirror run, process start to exit"}
    # a target is never "met" against MirrorMaker 2 at its defaults, and none without others' CPU shown
    assert not any("defaults" in t["target"] for t in report["targets"])
    assert all("others_cpu_share" in t for t in report["targets"]) and isinstance(report["quiet"], bool)
    assert report["mm2_tuned_settings"]["{source}.consumer.max.poll.records"] == "20000"
    assert report["empty_run"]["verified"] is True
    # Peak RSS and CPU time are measured for every process tree (values, whatever they are).
    assert all(r["peak_rss_mb"] is not None and r["peak_rss_by_role_mb"] for r in report["configurations"])
    assert all(r["cpu_seconds"] is not None for r in report["configurations"])
    # MirrorMaker 2 "exactly-once" really ran exactly-once source tasks with transactional ids.
    assert [m["size_class"] for m in report["mm2_exactly_once"]] == ["200B"]
    tuned = [r for r in report["configurations"] if r["kind"] == "mm2"]
    assert all(r["details"]["tuned"] and "tuned" in r["label"] for r in tuned)
    for item in report["mm2_exactly_once"]:
        assert item["confirmed"] is True, item
        assert item["evidence"]["exactly_once_source_tasks"] and item["evidence"]["transactional_ids"]
    markdown = (out / "report.md").read_text()
    assert "| size | configuration |" in markdown and "All configurations verified" in markdown


@pytest.mark.timeout(540)
def test_translation_cost_vs_history_ran_exactly_at_two_sizes(bench):
    done, out = bench
    report = json.loads((out / "report.json").read_text())
    sizes = report["translation"]["sizes"]
    assert [row["records"] for row in sizes] == [20_000, 200_000]
    for row in sizes:
        assert row["plan"]["wrong_translations"] == 0 and row["plan"]["partitions"] == 20_000, row
        assert row["recover"]["exact"] is True and row["recover"]["peak_rss_mb"], row
        # the recovery read the snapshot and one run's syncs, not the history
        assert row["recover"]["sync_records_read"] < 2_000, row
    assert "full_read" in sizes[0] and "## Translation cost vs offset-sync history" in (out / "report.md").read_text()
    assert {t["target"] for t in report["targets"]} >= {"plan at 200,000 syncs (s)", "recover: peak RSS (MB)"}


@pytest.mark.timeout(540)
def test_rereads_after_failover_eosmirror_zero_and_mm2_counted(bench):
    done, out = bench
    section = json.loads((out / "report.json").read_text())["rereads"]
    assert section["groups"] == 6 and section["partitions"] == 4 and section["records_per_partition"] == 1_000
    ours = section["systems"]["eosmirror"]["result"]
    assert (ours["groups_synced"], ours["rereads"], ours["skips"], ours["not_synced"]) == (6, 0, 0, []), ours
    theirs = section["systems"]["mm2"]
    assert "result" in theirs, theirs.get("note")       # MM2 ran and its group offsets were read
    result = theirs["result"]
    assert all(isinstance(result[k], int) for k in ("groups_synced", "rereads", "skips", "max_rereads_per_partition"))
    assert result["groups_synced"] + len(result["not_synced"]) == 6
    assert "## Re-reads after failover" in (out / "report.md").read_text()
    assert "re-reads total" in done.stdout


@pytest.mark.timeout(300)
def test_quick_scale_bench_verifies_every_shape_and_writes_its_rows(benches):
    """`--only scale --quick` (issue #23): 1 x 50, 1 x 500 and 20 x 5 partitions of 200 records; every step
    of every shape ran and verified, the rows are in scale.json with the issue's columns."""
    done, tmp_path = benches["scale"].result(timeout=240), benches["scale"].out
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    section = json.loads((tmp_path / "scale.json").read_text())
    rows = section["rows"]
    assert [(r["topics"], r["partitions"]) for r in rows] == [(1, 50), (1, 500), (20, 100)]
    for r in rows:
        assert r["verified"] is True and all(r["checks"].values()), (r["shape"], r["checks"], r["failed_logs"])
        assert r["records"] == r["partitions"] * 200
        assert {"topics", "partitions", "empty_run_s", "first_run_s", "verify_s", "groups_sync_s", "lag_s",
                "peak_rss_mb"} <= set(r) and all(r[k] > 0 for k in ("empty_run_s", "verify_s", "peak_rss_mb")), r
    assert section["growth"]["from_partitions"] == 50 and section["growth"]["to_partitions"] == 500
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["scale"]["rows"] == rows and report["all_verified"] is True
    assert "## Scale: many partitions of few records" in (tmp_path / "report.md").read_text()
    assert "| topics | partitions | empty run (s) |" in done.stdout


@pytest.fixture(scope="module")
def distance_bench(benches, tmp_path_factory):
    """`--quick --only distance --rtts 100`, after the other two (it starts a broker of its own and a proxy)."""
    for run in benches.values():
        run.result(timeout=480)
    run = BenchRun(tmp_path_factory.mktemp("distance"), "distance", "--rtts", "100")
    yield run
    if run.proc.poll() is None:
        run.proc.kill()
        run.proc.wait(30)


@pytest.mark.timeout(900)
def test_quick_distance_bench_runs_every_system_through_the_proxy_and_verifies(distance_bench):
    """Issue #52: eosmirror (spark-submit, run server), tuned MM2 exactly-once and the JVM copier, the source
    100 ms away behind the kit's link; every copy verified, the measured round trip at least the link's, the
    section and its table in the report, eosmirror's slot steps in it, and the far broker stopped after."""
    from eosmirror_tools.bench import distance
    from eosmirror_tools.kit import cluster, link

    done, out = distance_bench.result(timeout=840), distance_bench.out
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    rows = report["configurations"]
    assert sorted(r["kind"] for r in rows) == sorted(f"distance-{s}" for s in distance.SYSTEMS)
    for r in rows:
        assert r["verified"] is True and r["target_count"] == r["expected_count"] == 20_000, (r["key"], r["error"])
        assert r["details"]["rtt_ms"] == 100 and r["details"]["measured_rtt_ms"] >= 100, r["details"]
    (section_row,) = report["distance"]["rows"]
    assert set(section_row["end_to_end_records_per_second"]) == set(distance.SYSTEMS)
    assert section_row["eosmirror_slot_steps"]["eosmirror"]["copy"] > 0
    assert "## Across distance" in (out / "report.md").read_text()
    far = cluster.LocalCluster(distance.FAR_NAME, cluster.local_cluster("source").port + distance.FAR_PORT_OFFSET)
    assert cluster.running_pid(far) is None and link.running_pid(far) is None
