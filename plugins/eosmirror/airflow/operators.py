"""eosmirror's Airflow operators, importable by name as the providers' are:

    from eosmirror.airflow.operators import GroupSyncOperator, MirrorCopyOperator, TransitionOperator

``MirrorCopyOperator`` runs one bounded run of a mirror (the mirror DAG's ``copy`` task), ``GroupSyncOperator``
moves a mirror's consumer groups (the group DAG's task), ``TransitionOperator`` runs one disaster-recovery
command (switchover, promote, reverse, resume: the DR DAGs' task). Their bodies are ``copytask`` and ``grouptasks``; the
classes only hold the arguments, the templated fields and the hooks Airflow calls.

This module imports Airflow (and the Spark provider) at its top, as a provider's operator module does, so only
Airflow-side code imports it: the DAG factory (``dags``) and a team's own DAG files, never core, kafka, slot,
driver, spark or the CLI (tests/unit/test_code_shape.py holds both rules).
"""

from __future__ import annotations

from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Asset, BaseOperator

from eosmirror.airflow import copytask, drdags, grouptasks, lineage, sparkadapter
from eosmirror.airflow.tasks import with_params
from eosmirror.core import commands, config, runreport
from eosmirror.core.runreport import RunReport
from eosmirror.spark import submit


class MirrorCopyOperator(SparkSubmitOperator):
    """One bounded eosmirror run of ``mirror``: a SparkSubmitOperator whose job is eosmirror's.

    Builds the job arguments from the run (the copy bound, manual Params; ``until`` given here wins over the
    Param), lets the launcher decide how the run executes (in this process when there is nothing to copy,
    the run server, or spark-submit), ships the executor code with ``--py-files``, hands connection secrets
    to the job in a 0600 file instead of the command line, and returns the job's run report (XCom).
    on_kill stops Spark, then fences the mirror's transactional ids. ``application``, ``spark_binary``, ``name``
    and ``conf`` default to the packaged job, this venv's spark-submit, ``eosmirror-<mirror>`` and the mirror's
    ``spark_conf``.
    """

    template_fields = (*SparkSubmitOperator.template_fields, "mirror", "config_path", "until")
    ui_color = "#fde8c8"

    def __init__(self, *, mirror: str, config_path: str | None = None, until: str | None = None, **kwargs: Any):
        # The packaged job and this venv's spark-submit unless told otherwise; without `conf`, the mirror's
        # spark_conf is read when the task runs (copytask.execute).
        kwargs.setdefault("application", str(submit.JOB))
        kwargs.setdefault("spark_binary", submit.spark_submit_binary())
        kwargs.setdefault("name", f"eosmirror-{mirror}")
        super().__init__(**kwargs)
        self.mirror = mirror
        self.config_path = config_path
        self.until = until
        self.run_report: runreport.Report | None = None
        self.served_command: list[str] | None = None
        self.mirror_config: config.MirrorConfig | None = None   # read once per execute

    def _get_hook(self) -> Any:
        """The provider's hook, reading the run report off spark-submit's output as it streams by
        (a run for the run server: off the `eosmirror run --server` client's, which it runs instead)."""
        hook = sparkadapter.tap_output(super()._get_hook(), lambda lines: copytask.capture_report(self, lines))
        if self.served_command:
            sparkadapter.replace_command(hook, self.served_command)
        return hook

    def execute(self, context: Any) -> dict[str, Any]:  # type: ignore[override]  # the run report is its XCom
        return copytask.execute(self, context, super().execute)

    def on_kill(self) -> None:
        copytask.stop_copy(self, super().on_kill)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage (with the provider installed): source topics in, target topics out, record counts."""
        found = self.run_report if isinstance(self.run_report, RunReport) else None
        source = (lineage.bootstraps_of(self.mirror_config)[0] if self.mirror_config
                  else lineage.source_bootstrap(self.mirror, self.config_path))
        return lineage.operator_lineage(found, source, found.target_bootstrap if found else "")


class GroupSyncOperator(BaseOperator):
    """Consumer-group failover/failback of ``mirror``; the report is the return value (XCom). An operator,
    not @task, so that it can offer OpenLineage facets. ``direction`` given here wins over the Param."""

    template_fields = ("mirror", "config_path", "direction")
    ui_color = "#e8f0fd"

    def __init__(self, *, mirror: str, config_path: str | None = None, direction: str | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.mirror = mirror
        self.config_path = config_path
        self.direction = direction
        self.report: dict[str, Any] | None = None

    def execute(self, context: Any) -> dict[str, Any]:
        self.report = grouptasks.move_groups(self.mirror, self.config_path,
                                             with_params(context, direction=self.direction))
        return self.report

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage (with the provider installed): topics whose offsets were read in, written out."""
        return lineage.group_lineage(self.report, self.mirror, self.config_path)


class TransitionOperator(BaseOperator):
    """One disaster-recovery command (``switchover``, ``promote``, ``reverse`` or ``resume``; core/commands.py)
    of ``mirror``, with the run's Params as its options; the report is the return value (XCom). A completed
    switchover or promotion emits the Asset event ``eosmirror://<mirror>/switched-over`` / ``.../promoted``
    (its ``extra`` carries the verdict), which a team's DAG scheduled on it uses to repoint clients."""

    template_fields = ("mirror", "config_path", "command")
    ui_color = "#f6d8d8"

    def __init__(self, *, command: str, mirror: str, config_path: str | None = None, **kwargs: Any):
        if command not in commands.COMMANDS:
            raise ValueError(f"TransitionOperator: command {command!r} is not one of {', '.join(commands.COMMANDS)}")
        uri = drdags.asset_uri(command, mirror)
        if uri and "outlets" not in kwargs:
            kwargs["outlets"] = [Asset(uri)]
        super().__init__(**kwargs)
        self.command = command
        self.mirror = mirror
        self.config_path = config_path

    def execute(self, context: Any) -> dict[str, Any]:
        return drdags.run_transition(self.command, self.mirror, self.config_path, context)
