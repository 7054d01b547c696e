"""The disaster-recovery DAGs of each mirror: ``eosmirror_switchover__<mirror>``,
``eosmirror_promote__<mirror>`` and, for identity mirrors, ``eosmirror_reverse__<mirror>``,
``eosmirror_switchover__<mirror>__reverse`` (the switch back) and ``eosmirror_resume__<mirror>`` (manual
only; docs/disaster-recovery.md). Airflow is imported inside the functions.

Each is one task calling the same driver function as the CLI. A refusal (the mirror's state) or a
bad Param fails at once, never retried. A switchover that is not proven safe fails, naming the step
and the partitions. A promotion that may have lost records also fails (no retry: it did promote):
"promoted, up to N records may be lost" is no success to hide. The report goes to XCom either way.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from eosmirror.airflow import runonce
from eosmirror.airflow.dagids import promote_dag_id, resume_dag_id, reverse_dag_id, switchover_dag_id
from eosmirror.airflow.tasks import fail_without_retry
from eosmirror.core import config
from eosmirror.core.errors import ConfigError, EosMirrorError
from eosmirror.driver import promote, resume, reverse, switchover
from eosmirror.driver.migrate import RefusedError

log = logging.getLogger(__name__)
# A transient fault (a broker restarting) is retried: every step is idempotent and a retry continues
# where the transition stopped. Refusals, bad Params, "not safe" and "may be lost" are never retried.
_DEFAULT_ARGS: dict[str, Any] = {"retries": 1, "retry_delay": dt.timedelta(seconds=30)}


def _who(context: dict[str, Any]) -> str:
    dag_run = context.get("dag_run")
    return f"airflow:{getattr(dag_run, 'dag_id', '?')}/{getattr(dag_run, 'run_id', '?')}"


def _publish(context: dict[str, Any], report: dict[str, Any]) -> None:
    """The report to XCom before the task fails, so a failed transition still shows what it did."""
    ti = context.get("ti")
    if ti is not None:
        ti.xcom_push(key="report", value=report)


def run_switchover(mirror_name: str, config_path: str | None, context: dict[str, Any]) -> dict[str, Any]:
    params = context.get("params") or {}
    try:
        mirror = config.load(config_path).get(mirror_name)
        options = switchover.SwitchoverOptions(wait_s=float(params.get("wait_seconds") or 300),
                                               quiet_s=float(params.get("quiet_seconds") or 10))
        options.check(mirror.name)
        for line in runonce.pause_dags(mirror.name):
            log.info("switchover %s: %s", mirror.name, line)
        outcome = switchover.switchover(mirror, runonce.final_run_command(mirror.name, config_path), options,
                                        by=_who(context), say=log.info)
    except ConfigError as exc:
        log.error("%s", exc)
        raise fail_without_retry(exc) from None
    report = outcome.as_dict()
    _publish(context, report)
    if not outcome.safe:
        raise fail_without_retry(EosMirrorError(f"switchover {mirror_name}: {outcome.verdict()}"))
    log.info("switchover %s: %s (%.1f s from the trigger)", mirror_name, outcome.verdict(), outcome.recovery_seconds or 0)
    return report


def run_promote(mirror_name: str, config_path: str | None, context: dict[str, Any]) -> dict[str, Any]:
    params = context.get("params") or {}
    try:
        mirror = config.load(config_path).get(mirror_name)
        for line in runonce.pause_dags(mirror.name):
            log.info("promote %s: %s", mirror.name, line)
        outcome = promote.promote(mirror, by=_who(context), source_budget_s=float(params.get("source_seconds") or 10),
                                  say=log.info)
    except ConfigError as exc:
        log.error("%s", exc)
        raise fail_without_retry(exc) from None
    report = outcome.as_dict()
    _publish(context, report)
    log.info("promote %s, loss report:\n%s", mirror_name, "\n".join(outcome.loss.lines()))
    if outcome.exit_code:
        raise fail_without_retry(EosMirrorError(f"mirror {mirror_name} promoted, up to {outcome.loss.total} record(s) "
                                                f"may be lost: see the loss report in the log and XCom"))
    return report


def build_switchover_dag(m: config.MirrorConfig, config_path: str | None) -> Any:
    from airflow.sdk import DAG, Param, task

    params = {
        "wait_seconds": Param(300, type="integer", minimum=2, maximum=86_400, title="Wait at most (s)",
                              description="How long to wait for the source to be quiet."),
        "quiet_seconds": Param(10, type="integer", minimum=1, maximum=3600, title="Quiet for (s)",
                               description="How long no new committed record may arrive on the source."),
    }
    with DAG(dag_id=switchover_dag_id(m.name), schedule=None, start_date=None, max_active_runs=1,
             default_args=_DEFAULT_ARGS | {"owner": m.airflow.owner}, params=params,
             tags=sorted({"eosmirror", "kafka", "disaster-recovery", *m.airflow.tags}),
             description=f"planned switchover of mirror {m.name} with proven zero loss",
             doc_md=f"""### Planned switchover of `{m.name}`

Stop the producers first. Then: pause the mirror's DAGs, wait until the source is quiet, a final run,
fence, record lag 0, group sync, verify record by record. Ends with **"zero loss: safe to switch"**
only when every step held, else fails naming the step and the partitions. Re-trigger to continue.""") as dag:

        @task(task_id="switchover", multiple_outputs=False)
        def run(**context: Any) -> dict[str, Any]:
            return run_switchover(m.name, config_path, context)

        run()
    return dag


def build_promote_dag(m: config.MirrorConfig, config_path: str | None) -> Any:
    from airflow.sdk import DAG, Param, task

    params = {"source_seconds": Param(10, type="integer", minimum=1, maximum=300, title="Wait on the source (s)",
                                      description="The longest any step waits on the source (it may be gone).")}
    with DAG(dag_id=promote_dag_id(m.name), schedule=None, start_date=None, max_active_runs=1,
             default_args=_DEFAULT_ARGS | {"owner": m.airflow.owner}, params=params,
             tags=sorted({"eosmirror", "kafka", "disaster-recovery", *m.airflow.tags}),
             description=f"unplanned promotion of mirror {m.name}'s target, with a loss report",
             doc_md=f"""### Promote the target of `{m.name}` (the source is lost)

Works while the source is unreachable: fence the mirror, pause its DAGs, record per partition the
target end, the progress copied and the last source end observed. The loss report (log and XCom)
says what may be lost; the run **fails** when that is more than nothing.""") as dag:

        @task(task_id="promote", multiple_outputs=False)
        def run(**context: Any) -> dict[str, Any]:
            return run_promote(m.name, config_path, context)

        run()
    return dag


def run_reverse(mirror_name: str, config_path: str | None, context: dict[str, Any]) -> dict[str, Any]:
    params = context.get("params") or {}
    try:
        mirror = config.load(config_path).get(mirror_name)
        options = reverse.ReverseOptions(mode=str(params.get("divergence") or "report"),
                                         source_budget_s=float(params.get("source_seconds") or 10))
        outcome = reverse.reverse(mirror, options, by=_who(context), say=log.info)
    except (ConfigError, RefusedError) as exc:   # refused: the state, a prefix mirror, the old source unreachable,
                                                 # a side topic, a reverse mirror that would move back
        log.error("%s", exc)
        raise fail_without_retry(exc) from None
    report = outcome.as_dict()
    _publish(context, report)
    for line in runonce.unpause_reverse_dag(mirror.name):
        log.info("reverse %s: %s", mirror.name, line)
    log.info("reverse %s:\n%s", mirror_name, "\n".join(outcome.lines()))
    return report


def build_reverse_dag(m: config.MirrorConfig, config_path: str | None) -> Any:
    from airflow.sdk import DAG, Param, task

    params = {"divergence": Param("report", type="string", enum=["report", "copy"], title="Divergence",
                                  description="report: only report the old source's records that never reached "
                                              "the target; copy: also copy them once to side topics."),
              "source_seconds": Param(10, type="integer", minimum=1, maximum=300, title="Wait on the old source (s)",
                                      description="How long to wait for the old source to answer.")}
    with DAG(dag_id=reverse_dag_id(m.name), schedule=None, start_date=None, max_active_runs=1,
             default_args=_DEFAULT_ARGS | {"owner": m.airflow.owner}, params=params,
             tags=sorted({"eosmirror", "kafka", "disaster-recovery", *m.airflow.tags}),
             description=f"the way back after a promotion of {m.name}: divergence report and reverse mirror",
             doc_md=f"""### Reverse `{m.name}` (after a promotion, the old source answers again)

Reports the old source's records that never reached the target (optionally copies them once to
`<topic>.diverged.{m.name}` on the new primary), then prepares the reverse mirror
`{m.name}__reverse` (DAG `eosmirror__{m.name}__reverse`) from the promotion point and unpauses it.
Refused (no retry) unless the mirror is promoted and the old source answers. Re-trigger to continue.""") as dag:

        @task(task_id="reverse", multiple_outputs=False)
        def run(**context: Any) -> dict[str, Any]:
            return run_reverse(m.name, config_path, context)

        run()
    return dag


def run_resume(mirror_name: str, config_path: str | None, context: dict[str, Any]) -> dict[str, Any]:
    params = context.get("params") or {}
    try:
        mirror = config.load(config_path).get(mirror_name)
        outcome = resume.resume(mirror, window=float(params.get("check_seconds") or 3), by=_who(context),
                                say=log.info, accept_stray=bool(params.get("accept_records_after_switch_back")))
    except (ConfigError, RefusedError) as exc:   # refused: the states, records written after the switch back
        log.error("%s", exc)
        raise fail_without_retry(exc) from None
    report = outcome.as_dict()
    _publish(context, report)
    for line in runonce.resume_dags(mirror.name, mirror.groups is not None):
        log.info("resume %s: %s", mirror.name, line)
    log.info("resume %s:\n%s", mirror_name, "\n".join(outcome.lines()))
    return report


def build_resume_dag(m: config.MirrorConfig, config_path: str | None) -> Any:
    from airflow.sdk import DAG, Param, task

    back = m.reverse().name
    params = {"check_seconds": Param(3, type="integer", minimum=1, maximum=300, title="Check for (s)",
                                     description="How long the new primary's ends must stay still before the "
                                                 "forward progress moves."),
              "accept_records_after_switch_back": Param(
                  False, type="boolean", title="Accept records written to the new primary after the switch back",
                  description="They stay on the new primary, not on the old source, named in the report; without "
                              "this the resume is refused while there are any.")}
    with DAG(dag_id=resume_dag_id(m.name), schedule=None, start_date=None, max_active_runs=1,
             default_args=_DEFAULT_ARGS | {"owner": m.airflow.owner}, params=params,
             tags=sorted({"eosmirror", "kafka", "disaster-recovery", *m.airflow.tags}),
             description=f"the end of the way back of {m.name}: the forward mirror continues after the switch back",
             doc_md=f"""### Resume `{m.name}` (after the switch back)

Once `{back}` is switched back (DAG `{switchover_dag_id(back)}`: the producers write to the old source
again), the forward mirror continues right after the last record `{back}` copied (records that came from
the new primary never come forward again), `{back}` is retired and `{m.name}` is mirroring again.
Refused (no retry) unless `{m.name}` is reversed and `{back}` switched over. Re-trigger to continue.""") as dag:

        @task(task_id="resume", multiple_outputs=False)
        def run(**context: Any) -> dict[str, Any]:
            return run_resume(m.name, config_path, context)

        run()
    return dag
