"""The body of the disaster-recovery DAGs' task (``operators.TransitionOperator``): each mirror's
``eosmirror_switchover__<mirror>``, ``eosmirror_promote__<mirror>`` and, for identity mirrors,
``eosmirror_reverse__<mirror>``, ``eosmirror_switchover__<mirror>__reverse`` (the switch back) and
``eosmirror_resume__<mirror>`` (manual only; docs/disaster-recovery.md). No Airflow import at the top:
the operator class holds it; the DAGs are made by one factory (``dags.build_transition_dag``).

The task runs the same command as the CLI (``drcommands.execute``), with the Params checked by the
command's one declaration (core/commands.py). Retries are decided by exit code, as the copy task's:
a refusal or a bad Param (exit 2), a switchover that is not proven safe (exit 1, its verdict), never
retried; a transient fault (a broker restarting: an exception from a step) keeps the task's retry,
and every step is idempotent, so the retry continues where the transition stopped. The report goes
to XCom either way. A promotion that may have lost records (5), or whose final group sync could not
run (6), did promote: the task succeeds (its Asset event tells the team's DAGs to repoint clients) and
the DAG's ``verdict`` task fails, so the run is no success to hide.
"""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from eosmirror import drcommands
from eosmirror.airflow import runonce
from eosmirror.airflow.tasks import fail_without_retry
from eosmirror.core import commands, config
from eosmirror.core.errors import EXIT_MAY_HAVE_LOST, EXIT_OK, EXIT_STEP_NOT_RUN, ConfigError, EosMirrorError
from eosmirror.driver.migrate import RefusedError
from eosmirror.kafka import connections
from eosmirror.spark import launch

log = logging.getLogger(__name__)

# The exit codes after which the transition's task succeeds (the DAG's verdict task still fails on them).
DONE_CODES = {commands.PROMOTE.name: {EXIT_OK, EXIT_MAY_HAVE_LOST, EXIT_STEP_NOT_RUN}}
# The Asset event a completed transition emits, for a team's DAG that repoints clients (docs/disaster-recovery.md).
ASSET_OF = {commands.SWITCHOVER.name: "switched-over", commands.PROMOTE.name: "promoted"}


def asset_uri(command: str, mirror: str) -> str | None:
    """``eosmirror://<mirror>/switched-over`` or ``.../promoted``; None for the commands that emit none."""
    return f"eosmirror://{mirror}/{ASSET_OF[command]}" if command in ASSET_OF else None


def _who(context: Any) -> str:
    dag_run = context.get("dag_run")
    return f"airflow:{getattr(dag_run, 'dag_id', '?')}/{getattr(dag_run, 'run_id', '?')}"


def spark_target(mirror: config.MirrorConfig, folder: str) -> launch.SparkTarget:
    """Where the switchover's final run goes: the mirror's Spark connection (its master and deploy mode,
    as SparkSubmitOperator reads them), with connection-based clusters' settings in a 0600 file named by
    an environment variable of spark-submit (never its argv)."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    # The provider's own reading of a Spark connection (SparkSubmitOperator's hook reads it the same way),
    # so the final run goes where the mirror's copy task goes; a missing connection defaults as it does there.
    resolved = SparkSubmitHook(conn_id=mirror.airflow.spark_conn_id)._resolve_connection()
    clusters = {ref.connection: connections.resolve(ref, f"mirror {mirror.name!r}")
                for ref in (mirror.source, mirror.target) if ref.connection}
    env = {}
    if clusters:
        env[connections.CLUSTERS_FILE_ENV] = str(connections.write_clusters_file(Path(folder) / "clusters.json",
                                                                                 clusters))
    return launch.SparkTarget(master=str(resolved["master"]), deploy_mode=resolved.get("deploy_mode"), env=env)


def run_transition(command: str, mirror_name: str, config_path: str | None, context: Any) -> dict[str, Any]:
    """The transition task: the command's report (XCom). Fails without retry on a refusal, a bad Param
    or a verdict that is not done; raises (retried) on a transient fault."""
    spec = commands.COMMANDS[command]
    started = time.monotonic()
    try:
        mirror = config.load(config_path).get(mirror_name)
        values = spec.values(context.get("params") or {}, mirror.name)
        with tempfile.TemporaryDirectory(prefix="eosmirror-clusters-") as folder:   # deleted when the run ends
            spark = spark_target(mirror, folder) if spec is commands.SWITCHOVER and not values["cancel"] else None
            outcome = drcommands.execute(spec, mirror, values, by=_who(context), say=log.info, started=started,
                                         spark=spark, config_file=config_path)
    except (ConfigError, RefusedError) as exc:    # refused: the state, a Param, a prefix mirror, the old source
        log.error("%s", exc)
        raise fail_without_retry(exc) from None
    report = outcome.as_dict()
    report["exit_code"] = int(outcome.exit_code)
    ti = context.get("ti")
    if ti is not None:      # before the task may fail: a stopped transition still shows what it did
        ti.xcom_push(key="report", value=report)
    log.info("%s %s:\n%s", command, mirror_name, "\n".join(drcommands.text_of(outcome)))
    for line in _dags_after(spec, mirror, outcome):
        log.info("%s %s: %s", command, mirror_name, line)
    if outcome.exit_code not in DONE_CODES.get(command, {EXIT_OK}):
        raise fail_without_retry(EosMirrorError(f"{command} {mirror_name}: {report.get('verdict') or 'failed'} "
                                                f"(exit {outcome.exit_code}; the report is in XCom)"))
    uri = asset_uri(command, mirror_name)
    events = context.get("outlet_events")
    if uri and events is not None:
        from airflow.sdk import Asset

        events[Asset(uri)].extra = {k: report.get(k) for k in ("mirror", "kind", "state", "verdict", "exit_code",
                                                                "recovery_seconds", "may_be_lost")}
    return dict(report)


def check_verdict(command: str, mirror_name: str, report: dict[str, Any] | None) -> dict[str, Any]:
    """The DAG's last task: fails (no retry) when the transition did not end with exit 0, so a promotion
    that may have lost records, or one whose group sync did not run, is no successful DAG run."""
    code = int((report or {}).get("exit_code", 1))
    if code != EXIT_OK:
        raise fail_without_retry(EosMirrorError(f"{command} {mirror_name}: exit {code}: "
                                                f"{(report or {}).get('verdict') or 'see the report in XCom'}"))
    return {"exit_code": code}


def _dags_after(spec: commands.CommandSpec, mirror: config.MirrorConfig, outcome: Any) -> list[str]:
    """After the verdict, best effort: Airflow 3 gives a task no metadata-database access, so a DAG can pause
    no other DAG; the lines say so and the state refuses those runs meanwhile."""
    if spec is commands.REVERSE:
        return runonce.unpause_reverse_dag(mirror.name, in_task=True)
    if spec is commands.RESUME:
        return runonce.resume_dags(mirror.name, mirror.groups is not None, in_task=True)
    if spec is commands.PROMOTE or getattr(outcome, "safe", False):
        return runonce.pause_dags(mirror.name, in_task=True)
    return []


def doc_of(command: str, m: config.MirrorConfig) -> tuple[str, str]:
    """(description, doc_md) of a transition DAG."""
    back = f"{m.name}__reverse" if not m.name.endswith("__reverse") else m.name
    docs = {
        "switchover": (f"planned switchover of mirror {m.name} with proven zero loss",
                       f"""### Planned switchover of `{m.name}`

Stop the producers first. Then: wait until the source is quiet, record switching-over (the mirror's runs
are refused from then on), a final run (through the mirror's Spark connection), fence, record lag 0,
group sync, verify record by record. Ends with **"zero loss: safe to switch"** only when every step held,
and emits the Asset event `eosmirror://{m.name}/switched-over`; else fails naming the step and every
partition. A stopped switchover: trigger again to continue, or with `cancel` to return to mirroring."""),
        "promote": (f"unplanned promotion of mirror {m.name}'s target, with a loss report",
                    f"""### Promote the target of `{m.name}` (the source is lost)

Works while the source is unreachable: fence the mirror, record per partition the target end, the
progress copied and the last source end observed; the final group sync when the source answers. Emits
`eosmirror://{m.name}/promoted`. The loss report (log and XCom) says what may be lost; the `verdict`
task **fails** when that is more than nothing, or when the group sync did not run."""),
        "reverse": (f"the way back after a promotion or switchover of {m.name}: divergence report and reverse mirror",
                    f"""### Reverse `{m.name}` (after a promotion or switchover, the old source answers again)

Reports the old source's records that never reached the target (optionally copies them once to
`<topic>.diverged.{m.name}` on the new primary), then prepares the reverse mirror `{back}` from the
promotion point. Refused (no retry) unless the mirror is promoted or switched over and the old source
answers. Re-trigger to continue."""),
        "resume": (f"the end of the way back of {m.name}: the forward mirror continues after the switch back",
                   f"""### Resume `{m.name}` (after the switch back)

Once `{back}` is switched back (the producers write to the old source again), the forward mirror
continues right after the last record `{back}` copied, `{back}` is retired and `{m.name}` is mirroring
again. Refused (no retry) unless `{m.name}` is reversed and `{back}` switched over. Re-trigger to continue."""),
    }
    return docs[command]
