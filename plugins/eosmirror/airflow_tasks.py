"""What the Airflow tasks of eosmirror do. Airflow is imported inside functions only.

Mirror DAG, per run:
  preflight  config valid, both clusters reachable, target topics created/grown/in sync
  copy       the bounded Spark job (``MirrorSparkSubmitOperator``, a SparkSubmitOperator)
  publish    read the job's result JSON, push a compact summary to XCom, emit one Asset event
             per target topic that received records

The copy bound (``until``): the Param if given; else the data interval's end for scheduled and
backfill runs (so a run is deterministic and re-running an old interval copies nothing); else
(manual runs) now.

Secrets: cluster settings resolved from Airflow connections reach the Spark job in a 0600 file
named by ``EOSMIRROR_CLUSTERS_FILE`` (an environment variable of the spark-submit process, not an
argument), deleted when the job ends. Nothing with a secret goes to argv, logs, XCom or reports.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from eosmirror import airflow_env, config, connections, report, spark_env, submit

log = logging.getLogger(__name__)

SCHEDULED_RUN_TYPES = ("scheduled", "backfill")


def result_path(dag_id: str, run_id: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", run_id)
    folder = airflow_env.airflow_home() / "eosmirror" / "results" / dag_id
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{safe}.json"


def _run_type(context: dict[str, Any]) -> str:
    dag_run = context.get("dag_run")
    value = getattr(dag_run, "run_type", "") or ""
    return str(getattr(value, "value", value)).lower()


def resolve_until(context: dict[str, Any]) -> tuple[str, str]:
    """(until as ISO-8601, why) for this run."""
    params = context.get("params") or {}
    if params.get("until"):
        from eosmirror.batch import parse_timestamp

        return parse_timestamp(str(params["until"])).isoformat(), "the run's `until` parameter"
    end = context.get("data_interval_end")
    if _run_type(context) in SCHEDULED_RUN_TYPES and end is not None:
        return end.isoformat(), f"the end of the data interval ({_run_type(context)} run)"
    return dt.datetime.now(dt.timezone.utc).isoformat(), "now (manual run)"


def preflight(mirror_name: str, config_path: str | None = None) -> dict[str, Any]:
    from eosmirror.driver import MirrorRun

    mirror = config.load(config_path).get(mirror_name)
    outcome = MirrorRun(mirror).preflight()
    log.info("preflight of %s: %s", mirror_name, outcome["topic_sync"])
    return outcome


def publish(mirror_name: str, context: dict[str, Any]) -> dict[str, Any]:
    import json

    from airflow.sdk import Asset, AssetAlias

    path = result_path(context["dag"].dag_id, context["run_id"])
    result = json.loads(path.read_text())
    per_topic: dict[str, int] = {}
    for slot in result.get("slots", []):
        for part in slot.get("partitions", []):
            per_topic[part["target_topic"]] = per_topic.get(part["target_topic"], 0) + part["records"]
    bootstrap = result.get("target_bootstrap", "")
    alias = AssetAlias(asset_alias(mirror_name))
    for topic, records in sorted(per_topic.items()):
        if records and bootstrap:
            context["outlet_events"][alias].add(Asset(uri=f"kafka://{bootstrap}/{topic}"),
                                                extra={"records": records, "run_id": result.get("run_id")})
    summary = {"mirror": mirror_name, "status": result.get("status"), "records": result.get("records", 0),
               "bytes": result.get("bytes", 0), "until": result.get("until"), "generation": result.get("generation"),
               "records_per_topic": per_topic, "errors": result.get("errors", []),
               "slots": [{"slot": s["slot"], "status": s["status"], "records": s.get("records", 0)}
                         for s in result.get("slots", [])], "result_file": str(path)}
    log.info("%s", report.summary(result) if "slots" in result else summary)
    return summary


def asset_alias(mirror_name: str) -> str:
    return f"eosmirror-{mirror_name}-targets"


def fence(mirror_name: str, all_generations: bool, config_path: str | None = None) -> dict[str, Any]:
    from eosmirror import fencing

    mirror = config.load(config_path).get(mirror_name)
    outcome = fencing.fence_mirror(mirror, all_generations=all_generations)
    log.info("%s", fencing.format_outcome(outcome))
    if not outcome["unblocked"]:
        raise RuntimeError(fencing.format_outcome(outcome))
    return outcome


def _resolved_clusters(mirror: config.MirrorConfig) -> dict[str, dict[str, Any]]:
    """Settings of the mirror's connection-based clusters (resolved through Airflow in the worker)."""
    out = {}
    for role, ref in (("source", mirror.source), ("target", mirror.target)):
        if ref.connection:
            out[ref.connection] = connections.resolve(ref, f"mirror {mirror.name!r}: {role}")
    return out


@functools.cache
def operator_class() -> type:
    """``MirrorSparkSubmitOperator``: built on first use so that importing eosmirror needs no Airflow."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    class MirrorSparkSubmitOperator(SparkSubmitOperator):
        """SparkSubmitOperator running one bounded eosmirror run of ``mirror``.

        Builds the job arguments from the run (the copy bound, manual Params), ships the core
        package with ``--py-files`` for executors on other hosts, and hands connection secrets to
        the job in a 0600 file instead of the command line.
        """

        ui_color = "#fde8c8"

        def __init__(self, *, mirror: str, config_path: str | None = None, **kwargs: Any):
            super().__init__(**kwargs)
            self.mirror = mirror
            self.config_path = config_path

        def execute(self, context: Any) -> None:
            mirror = config.load(self.config_path).get(self.mirror)
            params = context.get("params") or {}
            until, why = resolve_until(context)
            self.log.info("mirror %s: copying what lies below the source offsets of %s (%s)", self.mirror, until, why)
            out = result_path(context["dag"].dag_id, context["run_id"])
            out.unlink(missing_ok=True)
            # Always an absolute --config: with --py-files the job imports eosmirror from the zip,
            # whose location says nothing about where the mirror definitions are.
            config_file = str(Path(self.config_path or config.default_config_path()).resolve())
            self.application_args = submit.job_arguments(
                self.mirror, config_file, until=until,
                max_records_per_partition=params.get("max_records_per_partition"),
                topics=list(params.get("topics") or []) or None, dry_run=bool(params.get("dry_run")),
                result_json=str(out))
            self.py_files = str(submit.package_zip())
            env = {k: v for k, v in spark_env.process_env({}).items()
                   if k in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME", "SPARK_LOCAL_IP")}
            if self.config_path:
                env["EOSMIRROR_CONFIG"] = str(self.config_path)
            clusters = _resolved_clusters(mirror)
            secrets_dir = None
            try:
                if clusters:
                    secrets_dir = tempfile.mkdtemp(prefix="eosmirror-clusters-")
                    env[connections.CLUSTERS_FILE_ENV] = str(connections.write_clusters_file(
                        Path(secrets_dir) / "clusters.json", clusters))
                self.env_vars = env
                self._hook = None   # the hook reads application_args/env_vars when it is built
                super().execute(context)
            finally:
                if secrets_dir:
                    for name in os.listdir(secrets_dir):
                        os.unlink(os.path.join(secrets_dir, name))
                    os.rmdir(secrets_dir)

    return MirrorSparkSubmitOperator
