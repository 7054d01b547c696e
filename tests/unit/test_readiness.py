"""The readiness report's verdicts (core/readiness.py): each check's ok / warn / not ready, and the report's."""

from __future__ import annotations

from eosmirror.core import lag
from eosmirror.core import readiness as r
from eosmirror.core.aclcopy import TopicAcl


def status(state: str = lag.OK, record_lag: int = 0, seconds: float = 0.0, slo: float | None = None,
           reason: str = "") -> lag.MirrorStatus:
    return lag.MirrorStatus(mirror="m", time_ms=0, status=state, reason=reason, record_lag=record_lag,
                            time_lag_seconds=seconds, last_run=None, last_success_ms=None, last_commit_ms=None,
                            max_lag_seconds=slo, samples_in_window=1)


def test_lag_alerting_or_over_the_slo_or_not_mirroring_is_not_ready_lagging_warns():
    assert r.lag_check(status()).verdict == r.OK
    assert r.lag_check(status(record_lag=5, seconds=2.0, slo=60)).verdict == r.OK   # the final run copies it
    over = r.lag_check(status(record_lag=5, seconds=90.0, slo=60))
    assert over.verdict == r.NOT_READY and "over the SLO of 60 s" in over.reason
    assert over.figures["record_lag"] == 5 and over.figures["time_lag_seconds"] == 90.0
    assert r.lag_check(status(lag.STOPPED, reason="no run")).verdict == r.NOT_READY
    assert r.lag_check(status(lag.LAGGING, record_lag=3, reason="grew")).verdict == r.WARN
    assert r.lag_check(status("SWITCHED-OVER", reason="switched over")).verdict == r.NOT_READY


def test_named_writers_are_not_ready_an_open_cluster_warns():
    assert r.writers_check([], [], "").verdict == r.OK
    named = r.writers_check(["User:app can write t (ALLOW WRITE LITERAL t)"], [], "")
    assert named.verdict == r.NOT_READY and "User:app" in named.reason
    assert r.writers_check([], ["the target has no authorizer"], "").verdict == r.WARN
    assert r.writers_check([], [], "lacks Describe").verdict == r.WARN


def test_drift_in_partitions_configs_or_acls_is_not_ready_staged_writes_are_listed():
    same = r.TopicDrift("a", "src.a", 3, 3)
    assert r.drift_check([same]).verdict == r.OK
    fewer = r.drift_check([r.TopicDrift("a", "src.a", 4, 3)])
    assert fewer.verdict == r.NOT_READY and fewer.figures["partitions"] == {"src.a": [4, 3]}
    assert r.drift_check([r.TopicDrift("a", "src.a", 3, 5)]).verdict == r.WARN
    assert r.drift_check([r.TopicDrift("a", "src.a", 3, None)]).verdict == r.NOT_READY
    configs = r.config_differences({"retention.ms": "1000", "min.insync.replicas": "2"},
                                   {"retention.ms": "604800000", "min.insync.replicas": "1"},
                                   ["retention.ms", "cleanup.policy"])
    assert configs == {"retention.ms": ("1000", "604800000")}
    drifted = r.drift_check([r.TopicDrift("a", "src.a", 3, 3, configs)])
    assert drifted.verdict == r.NOT_READY and "retention.ms 1000 on the source, 604800000 on the target" in drifted.reason
    read = TopicAcl("src.a", "LITERAL", "User:app", "*", "READ", "ALLOW")
    write = TopicAcl("src.a", "LITERAL", "User:app", "*", "WRITE", "ALLOW")
    missing = r.drift_check([same], missing_read_acls=[read])
    assert missing.verdict == r.NOT_READY and "principal User:app, host *, operation READ, permission ALLOW, resource TOPIC 'src.a', pattern LITERAL" \
        in missing.reason
    staged = r.drift_check([same], staged_writes=[write])
    assert staged.verdict == r.OK and "operation WRITE, permission ALLOW" in staged.figures["staged_write_acls"][0]


def test_groups_outside_the_sync_warn_and_the_mirrors_own_group_is_never_counted():
    assert r.groups_check(["eosmirror-m", "app"], ["app"], ["eosmirror-m"], True).verdict == r.OK
    left = r.groups_check(["eosmirror-m", "app", "other"], ["app"], ["eosmirror-m"], True)
    assert left.verdict == r.WARN and left.figures["uncovered"] == ["other"]
    assert r.groups_check(["app"], [], [], False).verdict == r.WARN
    assert r.groups_check([], [], [], False).verdict == r.OK


def test_verify_not_run_warns_a_difference_is_not_ready():
    assert r.verify_check(False).verdict == r.WARN
    assert r.verify_check(True, 2, 10).verdict == r.OK
    assert r.verify_check(True, 2, 10, bad=["a[0]"]).verdict == r.NOT_READY
    assert r.verify_check(True, 2, 10, incomplete=["a[1]"]).verdict == r.WARN


def test_the_dry_run_refused_is_not_ready_and_expects_quiet_plus_last_run_plus_steps():
    dry = r.DryRun(to_copy=10, step_seconds={"source ends": 0.5, "record lag": 0.5}, last_run_seconds=4.0,
                   quiet_seconds=10.0)
    check = r.dry_run_check(dry)
    assert check.verdict == r.OK and check.figures["expected_recovery_seconds"] == 15.0
    assert r.dry_run_check(r.DryRun(refused="promoted since ...")).verdict == r.NOT_READY
    assert r.dry_run_check(r.DryRun(group_problems=("g: 1 partition(s)",))).verdict == r.WARN
    held = r.dry_run_check(r.DryRun(open_transactions=("src.a[0]",)))
    assert held.verdict == r.WARN and "src.a[0]" in held.reason and held.figures["open_transactions"] == ["src.a[0]"]
    assert r.expected_recovery_seconds(r.DryRun(quiet_seconds=10.0)) == 10.0


def test_the_report_is_ready_unless_a_check_is_not_ready_and_round_trips():
    ok, warn = r.Check("lag", r.OK, "fine", {"record_lag": 0}), r.Check("verify", r.WARN, "not run")
    ready = r.Report("m", 1000, (ok, warn))
    assert ready.ready and ready.verdict == r.READY_VERDICT and ready.reasons() == []
    bad = r.Report("m", 2000, (ok, r.unreadable("drift", "no answer")))
    assert not bad.ready and bad.verdict == "NOT READY" and bad.reasons() == ["drift: could not be checked: no answer"]
    assert r.Report.decode(bad.encode()) == bad
    assert "mirror m: NOT READY" in bad.text()


def test_the_page_the_overview_column_the_chart_and_the_metrics_show_the_reports():
    from prometheus_client.parser import text_string_to_metric_families

    from eosmirror.airflow import lagrender

    t0 = 1_800_000_000_000
    switchover = r.Check("switchover", r.OK, "would pass", {"expected_recovery_seconds": 14.5})
    good = r.Report("m<1>", t0, (r.Check("lag", r.OK, "caught up"), switchover))
    bad = r.Report("m<1>", t0 + 86_400_000, (r.Check("drift", r.NOT_READY, "src.a has 3 partition(s), <a> 2"),
                                             switchover))
    page = lagrender.readiness_page("m<1>", [good, bad], t0 - 1000, t0 + 86_400_000)
    assert "m&lt;1&gt;" in page and "<m<1>" not in page and "&lt;a&gt; 2" in page
    assert "id='verdict'><span class='status' data-verdict='NOT READY'" in page
    assert "<tr data-check='drift'>" in page and "data-reports='2'" in page
    assert page.count("class='report' data-ready='true'") == 1 and page.count("data-ready='false'") == 1
    assert "no reports yet" in lagrender.readiness_chart([], t0, t0 + 1)
    assert "No readiness report recorded" in lagrender.readiness_page("m", [], t0, t0 + 1)

    status = lag.evaluate([], lag.MirrorSample("m<1>", t0, ()), lag.Policy(lag_interval_ms=300_000))
    overview = lagrender.overview([status], t0 + 86_400_000, {"m<1>": bad})
    assert "<th>readiness</th>" in overview and "class='readiness' data-verdict='NOT READY'" in overview
    assert "no report" in lagrender.overview([status], t0, {"m<1>": None})
    assert "<th>readiness</th>" not in lagrender.overview([status], t0)

    body, _ = lagrender.metrics([status], t0 + 86_400_000 + 30_000, {"m<1>": bad})
    values = {(s.name, tuple(s.labels.items())): s.value
              for f in text_string_to_metric_families(body.decode()) for s in f.samples}
    assert values[("eosmirror_readiness_ready", (("mirror", "m<1>"),))] == 0
    assert values[("eosmirror_readiness_age_seconds", (("mirror", "m<1>"),))] == 30.0
    # A switched-over mirror is not judged: no readiness series, so neither readiness alert fires.
    switched = lag.MirrorStatus(mirror="m<1>", time_ms=t0, status="SWITCHED-OVER", reason="", record_lag=0,
                                time_lag_seconds=0.0, last_run=None, last_success_ms=None, last_commit_ms=None,
                                max_lag_seconds=None, samples_in_window=0)
    body, _ = lagrender.metrics([switched], t0, {"m<1>": bad})
    assert "eosmirror_readiness_ready{" not in body.decode()


def test_foreign_records_make_the_target_not_ready_and_none_is_ok():
    from eosmirror.core import readiness as rules

    bad = rules.foreign_check(["orders[0]: 1 foreign record(s) at offset(s) 51"], "1 partition(s) hold foreign records")
    assert bad.verdict == rules.NOT_READY and bad.figures["partitions"] == ["orders[0]: 1 foreign record(s) at offset(s) 51"]
    good = rules.foreign_check([], "no foreign records (8 checked, 0 read, 0.01 s)")
    assert good.verdict == rules.OK and "no foreign records" in good.reason


def test_the_last_recorded_verify_is_judged_by_its_outcome_and_its_age():
    from eosmirror.core import readiness as rules

    now = 10 * 86_400_000
    assert rules.last_verify_check(None, now).verdict == rules.WARN
    fresh = rules.VerifyResult.decode(rules.VerifyResult(now - 3_600_000, 4, 400).encode())
    assert rules.last_verify_check(fresh, now).verdict == rules.OK and "1.0 h ago" in rules.last_verify_check(fresh, now).reason
    old = rules.VerifyResult(now - 8 * 86_400_000, 4, 400)
    assert rules.last_verify_check(old, now).verdict == rules.WARN
    bad = rules.VerifyResult(now - 60_000, 4, 400, bad=("orders[1]",))
    judged = rules.last_verify_check(bad, now)
    assert judged.verdict == rules.NOT_READY and "orders[1]" in judged.reason


def test_covered_groups_behind_their_translated_source_commit_warn_with_the_offsets_behind():
    def part(current, new, outcome="exact", decision="write"):
        return {"outcome": outcome, "decision": decision, "current": current, "new_offset": new}

    planned = [
        {"group": "billing", "partitions": [part(10, 14), part(3, 3, decision="unchanged"), part(None, 8)]},
        {"group": "idle", "partitions": [part(5, 5, decision="unchanged")]},
        {"group": "ahead", "partitions": [part(20, 12, decision="rewind_refused")]},
        {"group": "waiting", "partitions": [part(1, None, outcome="waiting", decision="")]},
        {"group": "active", "skipped": True, "partitions": [part(1, 9)]},
    ]
    behind = r.groups_behind(planned)
    assert behind == {"billing": {"partitions": 1, "offsets": 4, "no_target_commit": 1}}
    check = r.group_sync_check(behind, len(planned))
    assert check.verdict == r.WARN and check.name == "group sync"
    assert "billing (4 offset(s) behind on 1 partition(s), no target commit on 1)" in check.reason
    assert r.group_sync_check({}, 2).verdict == r.OK
