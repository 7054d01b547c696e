"""OpenLineage datasets of a copy run (#24): OpenLineage's Kafka naming and the run's record counts.

The builder the copy operator's get_openlineage_facets_on_complete hands to the OpenLineage provider
(a declared dev dependency), and what the operator reports where the provider is missing."""

import sys

import pytest

from eosmirror.airflow import lineage
from tests import run_reports


def _part(source: str, target: str, partition: int, records: int) -> dict:
    return {"source_topic": source, "target_topic": target, "partition": partition, "records": records,
            "start": 0, "end": records, "planned_end": records}


REPORT = run_reports.report(target_bootstrap="dst-1:9093", slots=[
    {"slot": 0, "transactional_id": "x.0", "partitions": [_part("orders", "src.orders", 0, 7),
                                                          _part("payments", "src.payments", 1, 0)]},
    {"slot": 1, "transactional_id": "x.1", "partitions": [_part("orders", "src.orders", 1, 5)]}])


def test_each_source_topic_is_an_input_and_each_target_topic_an_output_with_record_counts():
    found = lineage.datasets(REPORT, "src-1:9092,src-2:9092", "dst-1:9093")
    assert found == {
        "inputs": [{"namespace": "kafka://src-1:9092", "name": "orders", "records": 12},
                   {"namespace": "kafka://src-1:9092", "name": "payments", "records": 0}],
        "outputs": [{"namespace": "kafka://dst-1:9093", "name": "src.orders", "records": 12},
                    {"namespace": "kafka://dst-1:9093", "name": "src.payments", "records": 0}]}


def test_namespace_is_the_first_bootstrap_server_without_a_listener_prefix():
    assert lineage.kafka_namespace(" SASL_SSL://b1.example:9096 , b2:9096") == "kafka://b1.example:9096"
    with pytest.raises(ValueError, match="no bootstrap server"):
        lineage.kafka_namespace("")


def test_a_run_with_no_partitions_has_no_datasets():
    assert lineage.datasets(run_reports.report(slots=[]), "s:1", "t:2") == {"inputs": [], "outputs": []}


def test_the_operator_lineage_has_the_runs_datasets_with_their_record_counts():
    found = lineage.operator_lineage(REPORT, "s:1", "t:2")
    assert [(d.namespace, d.name) for d in found.inputs] == [("kafka://s:1", "orders"), ("kafka://s:1", "payments")]
    assert [(d.namespace, d.name, d.outputFacets["outputStatistics"].rowCount) for d in found.outputs] == [
        ("kafka://t:2", "src.orders", 12), ("kafka://t:2", "src.payments", 0)]


def test_without_the_openlineage_provider_the_operator_reports_nothing_and_does_not_fail(monkeypatch):
    monkeypatch.setitem(sys.modules, "airflow.providers.openlineage.extractors", None)   # its import fails
    assert lineage.operator_lineage(REPORT, "s:1", "t:2") is None


def test_the_copy_operator_offers_openlineage_facets_on_complete():
    from eosmirror.airflow.operators import MirrorCopyOperator

    assert callable(getattr(MirrorCopyOperator, "get_openlineage_facets_on_complete", None))


GROUPS = {"direction": "failover", "checkpoints_topic": "src.checkpoints.internal", "groups": [
    {"group": "g1", "written": True, "partitions": [
        {"from_topic": "orders", "to_topic": "src.orders", "partition": 0, "decision": "write"},
        {"from_topic": "payments", "to_topic": "src.payments", "partition": 0, "decision": "skip"}]},
    {"group": "g2", "written": False, "partitions": [
        {"from_topic": "refunds", "to_topic": "src.refunds", "partition": 0, "decision": "write"}]}]}


def test_a_group_sync_reads_the_groups_topics_and_outputs_what_it_wrote_with_the_checkpoints_topic():
    found = lineage.group_datasets(GROUPS, "src:9092", "dst:9093")
    assert found == {"inputs": [{"namespace": "kafka://src:9092", "name": t} for t in ("orders", "payments", "refunds")],
                     "outputs": [{"namespace": "kafka://dst:9093", "name": t}
                                 for t in ("src.orders", "src.checkpoints.internal")]}


def test_a_dry_run_group_sync_has_no_outputs():
    dry = {**GROUPS, "groups": [{**g, "written": False} for g in GROUPS["groups"]]}
    assert lineage.group_datasets(dry, "s:1", "t:2")["outputs"] == []


def test_the_group_sync_operator_offers_openlineage_facets_on_complete():
    from eosmirror.airflow.operators import GroupSyncOperator

    assert callable(getattr(GroupSyncOperator, "get_openlineage_facets_on_complete", None))
