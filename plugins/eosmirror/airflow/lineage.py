"""OpenLineage for the copy task (#24): each source topic an input, each target topic an output, named
as OpenLineage names Kafka datasets (namespace ``kafka://<host>:<port>`` of the first bootstrap server,
name = the topic), with the run's record counts as statistics facets. The group sync task likewise:
the topics whose group offsets it read, and the topics (and checkpoints topic) it wrote offsets for.

``datasets`` is pure (the run report in, plain dicts out) so it is tested without OpenLineage;
``operator_lineage`` imports the OpenLineage provider inside, guarded: a user without it loses nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from eosmirror.core import config
from eosmirror.core.runreport import RunReport
from eosmirror.core.sections import ClusterRef
from eosmirror.kafka import connections

log = logging.getLogger(__name__)


def kafka_namespace(bootstrap_servers: str) -> str:
    """``kafka://host:port`` of the first bootstrap server (OpenLineage's naming for Kafka)."""
    first = str(bootstrap_servers or "").split(",")[0].strip()
    for scheme in ("PLAINTEXT://", "SSL://", "SASL_SSL://", "SASL_PLAINTEXT://"):   # listener-style entries
        if first.upper().startswith(scheme):
            first = first[len(scheme):]
    if not first:
        raise ValueError("no bootstrap server to name the Kafka namespace with")
    return f"kafka://{first}"


def datasets(report: RunReport, source_bootstrap: str, target_bootstrap: str) -> dict[str, list[dict[str, Any]]]:
    """``{"inputs": [...], "outputs": [...]}``, each ``{"namespace", "name", "records"}``, sorted by name:
    one input per source topic and one output per target topic of the run's partitions (0 records
    included: the run still read and wrote there)."""
    read: dict[str, int] = {}
    written: dict[str, int] = {}
    for slot in report.slots:
        for part in slot.partitions:
            read[part.source_topic] = read.get(part.source_topic, 0) + part.records
            written[part.target_topic] = written.get(part.target_topic, 0) + part.records
    source, target = kafka_namespace(source_bootstrap), kafka_namespace(target_bootstrap)
    return {"inputs": [{"namespace": source, "name": t, "records": n} for t, n in sorted(read.items())],
            "outputs": [{"namespace": target, "name": t, "records": n} for t, n in sorted(written.items())]}


def group_datasets(report: dict[str, Any], read_bootstrap: str, written_bootstrap: str,
                   ) -> dict[str, list[dict[str, Any]]]:
    """A group sync report (driver.groups.move_groups) as datasets: inputs are the topics whose committed
    group offsets were read, outputs the topics offsets were written for plus the checkpoints topic
    (none in a dry run, or when nothing was written). ``records`` is absent: offsets, not records, move."""
    read = sorted({p["from_topic"] for g in report.get("groups") or [] for p in g.get("partitions") or []})
    wrote = sorted({p["to_topic"] for g in report.get("groups") or [] if g.get("written")
                    for p in g.get("partitions") or [] if p.get("decision") == "write"})
    if wrote and report.get("checkpoints_topic"):
        wrote.append(report["checkpoints_topic"])
    source, target = kafka_namespace(read_bootstrap), kafka_namespace(written_bootstrap)
    return {"inputs": [{"namespace": source, "name": t} for t in read],
            "outputs": [{"namespace": target, "name": t} for t in wrote]}


def bootstraps(mirror: str, config_path: str | None) -> tuple[str, str]:
    """The mirror's source and target ``bootstrap.servers``; only this key leaves the resolved settings,
    which hold secrets."""

    return bootstraps_of(config.load(config_path).get(mirror))


def bootstraps_of(m: config.MirrorConfig) -> tuple[str, str]:
    """``bootstraps`` of a mirror already read."""
    def bootstrap(ref: ClusterRef, side: str) -> str:
        return str(connections.resolve(ref, f"mirror {m.name}: {side}").get("bootstrap.servers", ""))

    return bootstrap(m.source, "source"), bootstrap(m.target, "target")


def source_bootstrap(mirror: str, config_path: str | None) -> str:
    """The mirror's source ``bootstrap.servers`` (the run report names only the target's)."""
    return bootstraps(mirror, config_path)[0]


def group_lineage(report: dict[str, Any] | None, mirror: str, config_path: str | None) -> Any:
    """``OperatorLineage`` of a group sync; None without the OpenLineage provider."""
    try:
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.event_v2 import InputDataset, OutputDataset
    except ImportError:
        return None
    if not report:
        return OperatorLineage()
    source, target = bootstraps(mirror, config_path)
    failback = report.get("direction") == "failback"
    found = group_datasets(report, *((target, source) if failback else (source, target)))
    return OperatorLineage(inputs=[InputDataset(namespace=d["namespace"], name=d["name"]) for d in found["inputs"]],
                           outputs=[OutputDataset(namespace=d["namespace"], name=d["name"]) for d in found["outputs"]])


def operator_lineage(report: RunReport | None, source_bootstrap: str, target_bootstrap: str) -> Any:
    """The provider's ``OperatorLineage`` for ``datasets``; None without the OpenLineage provider or a report."""
    try:
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.event_v2 import Dataset, InputDataset, OutputDataset
        from openlineage.client.facet_v2 import output_statistics_output_dataset as output_stats
    except ImportError:
        return None
    if not report:
        return OperatorLineage()
    found = datasets(report, source_bootstrap, target_bootstrap)
    inputs = [_input(InputDataset, Dataset, d) for d in found["inputs"]]
    outputs = [OutputDataset(namespace=d["namespace"], name=d["name"], outputFacets={
        "outputStatistics": output_stats.OutputStatisticsOutputDatasetFacet(rowCount=d["records"])})
        for d in found["outputs"]]
    return OperatorLineage(inputs=inputs, outputs=outputs)


def _input(input_cls: type, dataset_cls: type, d: dict[str, Any]) -> Any:
    """An input with its record count where the client has the input statistics facet (newer openlineage-python)."""
    try:
        from openlineage.client.facet_v2 import input_statistics_input_dataset as input_stats
    except ImportError:
        return dataset_cls(namespace=d["namespace"], name=d["name"])
    return input_cls(namespace=d["namespace"], name=d["name"], inputFacets={
        "inputStatistics": input_stats.InputStatisticsInputDatasetFacet(rowCount=d["records"])})
