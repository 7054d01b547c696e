"""The shipped Prometheus rules (#24) use only metrics, labels and statuses that /eosmirror/metrics exports.

The exported names come from the real renderer (lagrender.metrics on a mirror with a partition and a
group), parsed with prometheus_client's own text parser, not from a list kept here."""

import re

import yaml
from prometheus_client.parser import text_string_to_metric_families

from eosmirror.airflow import lagrender
from eosmirror.core import lag, readiness
from eosmirror.monitoring import rules_path

IDENT = re.compile(r"\b(eosmirror_[a-z_]+)\b")
MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!=|!~|=)\s*\"([^\"]*)\"")
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")


def exported() -> dict[str, set[str]]:
    partition = lag.PartitionStatus(source_topic="t", partition=0, status=lag.OK, reason="", record_lag=1,
                                    time_lag_seconds=2.0, high_watermark=5, last_stable=5, progress=4,
                                    last_commit_ms=1_000, breach=False)
    status = lag.MirrorStatus(mirror="m", time_ms=2_000, status=lag.OK, reason="", record_lag=1, time_lag_seconds=2.0,
                              last_run=None, last_success_ms=None, last_commit_ms=1_000, max_lag_seconds=60.0,
                              samples_in_window=3, partitions=(partition,),
                              groups=(lag.GroupLag(group="g", state="EMPTY", partitions=1, record_lag=3),))
    report = readiness.Report("m", 1_000, (readiness.Check("lag", readiness.OK, "caught up"),))
    text, _ = lagrender.metrics([status], now_ms=2_000, readiness={"m": report})
    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
    return names


def rules() -> list[dict]:
    document = yaml.safe_load(rules_path().read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def test_every_rule_uses_exported_metrics_labels_and_statuses():
    names = exported()
    assert "eosmirror_mirror_status" in names and "eosmirror_group_lag_records" in names, sorted(names)
    problems = []
    for rule in rules():
        expr = rule["expr"]
        used = IDENT.findall(expr)
        if not used:
            problems.append(f"{rule['alert']}: no eosmirror metric in {expr!r}")
        labels = set().union(*(names.get(n, set()) for n in used))
        problems += [f"{rule['alert']}: metric {n} is not exported" for n in used if n not in names]
        for label, _, value in MATCHER.findall(expr):
            if label not in labels:
                problems.append(f"{rule['alert']}: label {label} is not on {used}")
            if label == "status" and value not in lag.SEVERITY:
                problems.append(f"{rule['alert']}: status {value!r} is none of {lag.SEVERITY}")
        for grouping in GROUPING.findall(expr):
            problems += [f"{rule['alert']}: grouping label {g.strip()} is not on {used}"
                         for g in grouping.split(",") if g.strip() not in labels]
        templated = re.findall(r"\$labels\.([a-zA-Z_]+)", str(rule.get("annotations", {})))
        problems += [f"{rule['alert']}: annotation label {t} is not on {used}" for t in templated if t not in labels]
    assert problems == []


def test_the_rules_cover_stalled_stopped_failed_runs_slo_and_group_lag():
    exprs = " ".join(r["expr"] for r in rules())
    for needed in ('status="STALLED"', 'status="STOPPED"', 'status="ERROR"', "eosmirror_mirror_slo_breached",
                   "eosmirror_group_lag_records", "eosmirror_readiness_ready == 0"):
        assert needed in exprs, needed
    assert all(r["alert"].startswith("EosMirror") and r["labels"]["severity"] in ("warning", "critical")
               for r in rules())
