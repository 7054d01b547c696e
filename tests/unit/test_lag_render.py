"""The page's HTML/SVG and the metrics text, from statuses and samples (no brokers, no Airflow)."""

from prometheus_client.parser import text_string_to_metric_families

from eosmirror.airflow import lagrender
from eosmirror.core import lag
from eosmirror.core.lag import MirrorSample, PartitionSample, Policy

T0 = 1_800_000_000_000


def status_and_samples(count=3):
    samples = [MirrorSample("m<1>", T0 + i * 300_000, (PartitionSample("t", 0, 10 * i + 5, 10 * i + 5, 10 * i,
                                                                       oldest_pending_ms=T0 + i * 300_000 - 2000),))
               for i in range(count)]
    status = lag.evaluate(samples[:-1], samples[-1], Policy(lag_interval_ms=300_000, max_lag_seconds=1))
    return status, samples


def test_overview_escapes_names_and_colours_the_status():
    status, _ = status_and_samples()
    html = lagrender.overview([status], T0 + 900_000)
    assert "m&lt;1&gt;" in html and "<m<1>" not in html
    assert "data-status='OK'" in html and "<td class='record-lag'>5</td>" in html and "BREACHED" in html


def test_chart_keeps_at_most_max_points_and_every_peak():
    status, samples = status_and_samples(2016)   # 7 days at 5-minute samples
    svg = lagrender.chart(samples, T0, T0 + 2016 * 300_000)
    points = svg.split("class='record-lag' fill='none' stroke='#1565c0' stroke-width='1.5' points='")[1].split("'")[0]
    assert len(points.split()) <= lagrender.MAX_POINTS and "data-samples='2016'" in svg
    page = lagrender.mirror_page(status, samples, "7d", T0 + 2016 * 300_000)
    assert page.count("<tr data-partition='t[0]'>") == 1


def test_metrics_parse_and_carry_the_figures():
    status, _ = status_and_samples()
    body, content_type = lagrender.metrics([status], T0 + 900_000)
    assert content_type.startswith("text/plain")
    values = {(s.name, tuple(sorted(s.labels.items()))): s.value
              for f in text_string_to_metric_families(body.decode()) for s in f.samples}
    key = (("mirror", "m<1>"), ("partition", "0"), ("topic", "t"))
    assert values[("eosmirror_lag_records", key)] == 5 and values[("eosmirror_lag_seconds", key)] == 2.0
    assert values[("eosmirror_mirror_slo_breached", (("mirror", "m<1>"),))] == 1


def test_group_lags_sum_each_groups_committed_partitions_and_ignore_other_topics():
    ends = {("t.x", 0): 20, ("t.x", 1): 20, ("t.x", 2): 7}
    committed = {"b": {("t.x", 0): 5, ("t.x", 2): 9}, "a": {("t.x", 1): 20}, "c": {("other", 0): 3}}
    lags = lag.group_lags(committed, ends, {"a": "EMPTY", "b": "STABLE"})
    # b: 20-5 + max(0, 7-9); a: caught up; c commits nothing mirrored: absent
    assert lags == (lag.GroupLag("a", "EMPTY", 1, 0), lag.GroupLag("b", "STABLE", 2, 15))


def test_groups_and_the_last_runs_transactions_on_the_page_in_the_table_and_in_metrics():
    import dataclasses

    from eosmirror.core import lagview

    status, samples = status_and_samples()
    from tests.run_reports import report

    run = lag.RunOutcome.of_result(report(run_id="r1", records=30, seconds=4.0, slots=[
        {"slot": 0, "transactional_id": "x.0", "transactions": 2, "transaction_seconds": 1.0,
         "max_transaction_seconds": 0.75},
        {"slot": 1, "transactional_id": "x.1", "transactions": 2, "transaction_seconds": 0.2,
         "max_transaction_seconds": 0.125}]), T0 + 800_000)
    assert (run.transactions, run.mean_transaction_seconds, run.max_transaction_seconds) == (4, 0.3, 0.75)
    assert lag.RunOutcome.decode(run.encode()) == run
    status = dataclasses.replace(status, last_run=run, groups=(lag.GroupLag("app<1>", "EMPTY", 3, 30),))
    page = lagrender.mirror_page(status, samples, "24h", T0 + 900_000)
    assert "<tr data-group='app&lt;1&gt;'>" in page and "<td class='record-lag'>30</td></tr></table>" in page
    assert "30 records in 4.0 s, 4 transaction(s): mean 0.30 s, max 0.75 s" in page
    assert "app<1>  EMPTY           3          30" in lagview.groups_table(status)
    body, _ = lagrender.metrics([status], T0 + 900_000)
    values = {(s.name, tuple(sorted(s.labels.items()))): s.value
              for f in text_string_to_metric_families(body.decode()) for s in f.samples}
    assert values[("eosmirror_group_lag_records", (("group", "app<1>"), ("mirror", "m<1>")))] == 30
    broken = dataclasses.replace(status, groups=(), groups_error="no Describe on the groups")
    assert "no Describe on the groups" in lagrender.mirror_page(broken, samples, "24h", T0 + 900_000)
