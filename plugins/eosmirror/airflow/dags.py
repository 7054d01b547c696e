"""DAG factories for the thin files in ``dags/``, composing eosmirror's operators (``operators``) and tasks.
Airflow-side code: it imports the operators module, which imports Airflow at its top.

Parsing is cheap and offline: it reads ``mirrors.yaml`` and nothing else (no broker, no
connection, no Variable), in sorted order.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from eosmirror.airflow import drdags, lagtasks, readinesstasks, tasks
from eosmirror.airflow.compat import cron_data_interval_timetable
from eosmirror.airflow.dagids import (
    FENCE_DAG_ID,
    LAG_DAG_ID,
    MIGRATE_DAG_ID,
    groups_dag_id,
    mirror_dag_id,
    promote_dag_id,
    readiness_dag_id,
    resume_dag_id,
    reverse_dag_id,
    switchover_dag_id,
)
from eosmirror.airflow.operators import GroupSyncOperator, MirrorCopyOperator, TransitionOperator
from eosmirror.core import commands, config
from eosmirror.spark import submit

# What `from` accepts (checked by the trigger form; core/migration.parse_origin decides).
MIGRATE_ORIGIN = r"^(mm2(:[A-Za-z0-9._-]+)?|group:.+|target-end(:[0-9]+)?)$"
# What `until` accepts (checked by the trigger form; the job parses it with datetime.fromisoformat).
ISO_TIMESTAMP = r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)?(Z|[+-]\d{2}:?\d{2})?$"


def _describe_ref(ref: config.ClusterRef) -> str:
    return ref.describe()


def _doc(m: config.MirrorConfig) -> str:
    bound = (f"Scheduled and backfill runs copy what lies below the source offsets of their data interval's "
             f"end (`{m.airflow.schedule}`, UTC), so re-running an old interval copies nothing."
             if m.airflow.schedule else "Manual only.")
    return f"""### eosmirror: `{m.name}`

Exactly-once mirror from **{_describe_ref(m.source)}** to **{_describe_ref(m.target)}**.

| | |
|---|---|
| topics | `{', '.join(m.topics)}` (exclude `{', '.join(m.topics_exclude) or '-'}`) |
| naming | {m.replication_policy}{f" (`{m.source_alias}.<topic>`)" if m.replication_policy == 'prefix' else ''} |
| slots / delivery | {m.slots} / {m.delivery} |
| progress group | `{m.progress_group}` on the target |
| Spark connection | `{m.airflow.spark_conn_id}` |

{bound} Manual runs copy up to the `until` parameter (default: now). Each run: `preflight` (config,
clusters reachable, target topics in sync) → `copy` (the Spark job) → `publish` (summary to XCom,
one Asset event `kafka://<target>/<topic>` per target topic that received records).
Retrying any task is safe: every slot fences older attempts and re-reads its committed progress.
"""


def build_mirror_dag(m: config.MirrorConfig, config_path: str | None, paused: bool | None = None) -> Any:
    """A mirror's DAG (``paused``: paused when Airflow first sees it, as a reverse mirror's is)."""
    from airflow.sdk import DAG, AssetAlias, Param, task

    schedule = cron_data_interval_timetable(m.airflow.schedule) if m.airflow.schedule else None
    params = {
        "until": Param(None, type=["null", "string"], format="date-time", pattern=ISO_TIMESTAMP, title="Copy up to",
                       description="Copy only records below the source offsets of this time. Empty: the data "
                                   "interval's end for scheduled runs, now for manual runs."),
        "max_records_per_partition": Param(None, type=["null", "integer"], minimum=1, title="Max records per partition",
                                           description=f"Empty: the mirror's bound ({m.max_records_per_partition or 'none'})."),
        # "null" in a type is what keeps Airflow's form from marking a field required (*): these are optional.
        "topics": Param([], type=["array", "null"], items={"type": "string"}, title="Only these source topics",
                        description="Empty: every topic the mirror matches."),
        "dry_run": Param(False, type=["boolean", "null"], title="Dry run", description="Plan and report; write nothing."),
        "accept_foreign": Param(False, type=["boolean", "null"], title="Accept foreign records",
                                description="This run only: the records another producer wrote to the mirrored "
                                            "target topics (which stopped the last run: exit 8) are accepted as they "
                                            "are; the run logs them and copies on after them (`eosmirror run "
                                            "--accept-foreign`). Decide first: docs/failing-loudly.md."),
    }
    default_args = {"owner": m.airflow.owner, "retries": m.airflow.retries}
    with DAG(dag_id=mirror_dag_id(m.name), schedule=schedule, start_date=m.airflow.start_date,
             # A follow mirror's next run starts while the previous one follows, and takes over from it.
             catchup=m.airflow.catchup, max_active_runs=2 if m.follow else 1, default_args=default_args, params=params,
             tags=sorted({"eosmirror", "kafka", *m.airflow.tags}), doc_md=_doc(m), is_paused_upon_creation=paused,
             description=f"exactly-once mirror {m.name}") as dag:

        @task(task_id="preflight", multiple_outputs=False)
        def preflight(**context: Any) -> dict[str, Any]:
            return tasks.preflight(m.name, config_path, context)

        copy = MirrorCopyOperator(
            task_id="copy", mirror=m.name, config_path=config_path, conn_id=m.airflow.spark_conn_id,
            conf=submit.spark_conf(dict(m.spark_conf), f"eosmirror-{m.name}"), verbose=False)

        @task(task_id="publish", multiple_outputs=False, outlets=[AssetAlias(tasks.asset_alias(m.name))])
        def publish(**context: Any) -> dict[str, Any]:
            return tasks.publish(m.name, context)

        preflight() >> copy >> publish()
    return dag


def _mirror_choice(mirrors: config.MirrorsFile, param: Any, with_reverse: bool = False) -> Any:
    """The `mirror` Param of a DAG that acts on one configured mirror: a choice of their names
    (``with_reverse``: and the generated reverse mirror of each identity mirror)."""
    names = mirrors.names()
    if with_reverse:
        names = [n for m in mirrors.mirrors for n in ([m.name, m.reverse().name]
                                                      if m.replication_policy == "identity" else [m.name])]
    return (param(names[0], type="string", enum=names, title="Mirror") if names
            else param("", type="string", title="Mirror"))


def build_fence_dag(mirrors: config.MirrorsFile, config_path: str | None) -> Any:
    from airflow.sdk import DAG, Param, task

    mirror_param = _mirror_choice(mirrors, Param, with_reverse=True)   # a reverse mirror's zombies too
    with DAG(dag_id=FENCE_DAG_ID, schedule=None, start_date=None, max_active_runs=1,
             default_args={"owner": "data-platform", "retries": 1},
             tags=["eosmirror", "kafka", "fencing"], description="fence a mirror's zombie producers",
             params={"mirror": mirror_param,
                     "all_generations": Param(True, type="boolean", title="All generations",
                                              description="Fence the slot ids of every recorded generation "
                                                          "(not only the current slot count).")},
             doc_md="""### Fence a mirror's zombie producers

Calls `init_transactions` on every transactional id the mirror may have used (the planner id and
the slot ids of every recorded generation). This aborts an open transaction of a killed or stalled
slot, so read_committed consumers of the target are no longer held back, and makes any surviving
instance unable to commit. Then checks every mirrored partition: last stable offset = high watermark.
A mirror run that is active meanwhile fails cleanly; the next run continues exactly where the
committed progress is.""") as dag:

        @task(task_id="fence", multiple_outputs=False)
        def fence(**context: Any) -> dict[str, Any]:
            params = context["params"]
            return tasks.fence(params["mirror"], bool(params["all_generations"]), config_path)

        fence()
    return dag


def _groups_doc(m: config.MirrorConfig) -> str:
    g = m.groups
    assert g is not None, m.name     # only mirrors with a `groups` section get a group DAG
    way_back = (f" After a promotion and `eosmirror reverse`, the failback goes through both exact maps: this "
                f"mirror's copies and what `{m.name}__reverse` copied back." if m.replication_policy == "identity" else "")
    return f"""### eosmirror consumer groups: `{m.name}`

Moves consumer groups between **{_describe_ref(m.source)}** and **{_describe_ref(m.target)}** with exact
offsets, translated through the mirror's offset syncs. Scheduled runs (`{g.schedule or 'manual only'}`) sync
**failover** (source groups → target groups), so the target is ready before a disaster. After consumers ran on
the target, trigger with `direction: failback` to move them back.{way_back}

Groups: include `{', '.join(g.include)}`, exclude `{', '.join(g.exclude) or '-'}`. A group with members on the
written side is skipped, untouched; an offset never moves backwards unless `allow_rewind`; a group ahead of the
mirror waits for the next mirror run. Each group is written in ONE transaction with its MirrorMaker 2 checkpoints.
The task log holds one table per group; XCom the whole report.
"""


def build_groups_dag(m: config.MirrorConfig, config_path: str | None) -> Any:
    from airflow.sdk import DAG, Param

    g = m.groups
    assert g is not None, m.name     # only mirrors with a `groups` section get a group DAG
    params = {
        "direction": Param("failover", type="string", enum=["failover", "failback"], title="Direction",
                           description="failover: source groups -> target groups; failback: target -> source."),
        "dry_run": Param(False, type="boolean", title="Dry run", description="Plan and report; write nothing."),
        "allow_rewind": Param(g.allow_rewind, type="boolean", title="Allow rewind",
                              description="Allow moving a group's offset backwards."),
        "groups": Param([], type="array", items={"type": "string", "minLength": 1}, title="Only these groups",
                        description="Empty: every group the mirror's groups.include/exclude select."),
    }
    with DAG(dag_id=groups_dag_id(m.name), schedule=g.schedule, start_date=m.airflow.start_date, catchup=False,
             max_active_runs=1, default_args={"owner": m.airflow.owner, "retries": max(1, m.airflow.retries)},
             params=params, tags=sorted({"eosmirror", "kafka", "consumer-groups", *m.airflow.tags}),
             doc_md=_groups_doc(m), description=f"consumer-group failover/failback of mirror {m.name}") as dag:

        GroupSyncOperator(task_id="sync_groups", mirror=m.name, config_path=config_path)
    return dag   # (it was missing: build_all's dict held None and Airflow's auto-registration hid it)


LAG_DOC = """### Mirror lag: how far behind each mirror is

Per mirror and source partition: the source's high watermark and last stable offset, the mirror's
committed progress, the **record lag** (LSO - progress; markers and aborted records occupy offsets,
so it is an upper bound on records) and the **time lag** (age of the oldest committed source record
not yet mirrored, 0 when caught up). Each evaluation is appended to the mirror's
`eosmirror-lag.<mirror>.internal` topic on the target (kept `lag.history_days`) and judged over a
window of them: OK, LAGGING (lag grows), STALLED (progress does not move while lag > 0), STOPPED (no
successful run for 2 schedule intervals), ERROR (the last run failed), FOREIGN (the target partition holds
records the mirror did not write: runs refuse until an operator decides).

The task **fails** (no retry: the next evaluation checks again) when a mirror breaches its
`max_lag_seconds` SLO or is STALLED, STOPPED, ERROR or FOREIGN, naming the mirror, the partitions, the figure
and the threshold; the mirror's `on_lag_alert` callable is called first with the same figures.
The figures are also on the "Mirror lag" page (`/eosmirror/`), in `/eosmirror/metrics` and in
`eosmirror lag [MIRROR] --json`.
"""


def build_lag_dag(mirrors: config.MirrorsFile, config_path: str | None) -> Any:
    import datetime as dt

    from airflow.sdk import DAG, Param, task

    names = mirrors.names()
    cron = mirrors.mirrors[0].lag.schedule if mirrors.mirrors else config.LagSettings().schedule
    schedule = cron_data_interval_timetable(cron) if cron else None
    with DAG(dag_id=LAG_DAG_ID, schedule=schedule, start_date=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
             catchup=False, max_active_runs=1, tags=["eosmirror", "kafka", "lag"], doc_md=LAG_DOC,
             description="lag of every mirror: history, statuses, SLO alerts",
             default_args={"owner": "data-platform", "retries": 1, "retry_delay": dt.timedelta(seconds=30)},
             params={"mirror": Param("", type="string", enum=["", *names], title="Mirror",
                                     description="Empty: every mirror.")}) as dag:

        @task(task_id="evaluate", multiple_outputs=False)
        def evaluate(**context: Any) -> dict[str, Any]:
            return lagtasks.evaluate(context["params"]["mirror"], config_path)

        evaluate()
    return dag


READINESS_DOC = """### Readiness: could the target take over now?

`eosmirror readiness <mirror> --record`: record and time lag, who but the mirror can write the target topics,
configuration drift (partitions, synced configs, ACLs), consumer groups the group sync does not cover, a
switchover dry run (its checks without fencing or recording, and the recovery time it expects). Each report
is appended to the mirror's lag topic on the target. The task **fails** (no retry) on NOT READY, naming each
blocking check. docs/disaster-recovery.md, "Readiness".
"""


def build_readiness_dag(m: config.MirrorConfig, config_path: str | None) -> Any:
    from airflow.sdk import DAG, task

    cron = m.airflow.readiness_schedule
    with DAG(dag_id=readiness_dag_id(m.name), schedule=cron_data_interval_timetable(cron) if cron else None,
             start_date=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), catchup=False, max_active_runs=1,
             tags=sorted({"eosmirror", "kafka", "readiness", *m.airflow.tags}), doc_md=READINESS_DOC,
             description=f"could {m.name}'s target take over now: lag, writers, drift, groups, switchover dry run",
             default_args={"owner": m.airflow.owner, "retries": 1, "retry_delay": dt.timedelta(seconds=30)}) as dag:

        @task(task_id="readiness", multiple_outputs=False)
        def readiness() -> dict[str, Any]:
            return readinesstasks.assess(m.name, config_path)

        readiness()
    return dag


def build_migrate_dag(mirrors: config.MirrorsFile, config_path: str | None) -> Any:
    from airflow.sdk import DAG, Param, task

    mirror_param = _mirror_choice(mirrors, Param)
    with DAG(dag_id=MIGRATE_DAG_ID, schedule=None, start_date=None, max_active_runs=1,
             default_args={"owner": "data-platform", "retries": 1},
             tags=["eosmirror", "kafka", "migration"], description="take over progress from MirrorMaker 2 or a group",
             params={"mirror": mirror_param,
                     "from": Param("mm2", type="string", pattern=MIGRATE_ORIGIN, title="Take over from",
                                   description="mm2 (MM2's committed offsets; mm2:<alias> when the mirror has no "
                                               "source_alias), group:<consumer group on the source>, or "
                                               "target-end[:N] (continue after the target's last N records, "
                                               "checked record by record)"),
                     "dry_run": Param(True, type="boolean", title="Dry run",
                                      description="Check and report what would change; write nothing.")},
             doc_md="""### Take over a mirror's progress (moving onto eosmirror)

Seeds the mirror's progress from MirrorMaker 2's committed offsets (`mm2`) or from a source consumer
group (`group:<name>`), with the mapping to the current target end as each partition's first offset
sync, and writes an audit record (`eosmirror history <mirror>`). Refused -- nothing written, never
retried -- while MM2 or a run still moves offsets, when MM2's target topics are named differently,
or when the target holds records MM2's offsets do not account for. Dry run by default.""") as dag:

        @task(task_id="migrate", multiple_outputs=False)
        def migrate(**context: Any) -> dict[str, Any]:
            params = context["params"]
            return tasks.migrate(params["mirror"], str(params["from"]), bool(params["dry_run"]), config_path,
                                 context)

        migrate()
    return dag


TRANSITION_DAG_IDS = {"switchover": switchover_dag_id, "promote": promote_dag_id, "reverse": reverse_dag_id,
                      "resume": resume_dag_id}


def transition_params(spec: commands.CommandSpec) -> dict[str, Any]:
    """A disaster-recovery command's Params, made from its one declaration (core/commands.py)."""
    from airflow.sdk import Param

    params = {}
    for o in spec.options:
        if o.kind is bool:
            params[o.name] = Param(o.default, type="boolean", title=o.title, description=o.help)
        elif o.kind is str:
            params[o.name] = Param(o.default, type="string", enum=list(o.choices), title=o.title, description=o.help)
        else:
            params[o.name] = Param(o.default, type="number", minimum=o.minimum, maximum=o.maximum, title=o.title,
                                   description=o.help)
    return params


def build_transition_dag(spec: commands.CommandSpec, m: config.MirrorConfig, config_path: str | None) -> Any:
    """The one factory of the disaster-recovery DAGs: the command's task (``TransitionOperator``), then
    ``verdict``, which fails the run when the command did not end with exit 0 (a promotion that may have
    lost records did promote: its task succeeds and emits the Asset event, the verdict fails the run)."""
    from airflow.sdk import DAG, Param, task

    description, doc = drdags.doc_of(spec.name, m)
    params = transition_params(spec)
    gated = spec is commands.SWITCHOVER
    if gated:
        params["ignore_readiness"] = Param(False, type="boolean", title="Go on when NOT READY",
                                           description="Switch over even when the readiness report (the first "
                                                       "task) says NOT READY")
    with DAG(dag_id=TRANSITION_DAG_IDS[spec.name](m.name), schedule=None, start_date=None, max_active_runs=1,
             # A transient fault is retried (every step is idempotent: the retry continues); refusals,
             # bad Params and verdicts never are (fail_without_retry). The mirror's retries, 30 s apart.
             default_args={"owner": m.airflow.owner, "retries": m.airflow.retries,
                           "retry_delay": dt.timedelta(seconds=30)},
             params=params, tags=sorted({"eosmirror", "kafka", "disaster-recovery", *m.airflow.tags}),
             description=description, doc_md=doc) as dag:
        transition = TransitionOperator(task_id=spec.name, command=spec.name, mirror=m.name, config_path=config_path)

        @task(task_id="verdict")   # its failure is final (fail_without_retry): nothing to retry
        def verdict(report: dict[str, Any] | None) -> dict[str, Any]:
            return drdags.check_verdict(spec.name, m.name, report)

        verdict(transition.output)  # type: ignore[arg-type]  # an XComArg: Airflow passes the report
        if gated:   # the readiness report first: NOT READY fails the run unless ignore_readiness
            @task(task_id="readiness")
            def readiness(**context: Any) -> dict[str, Any]:
                return readinesstasks.before_switchover(m.name, config_path, dict(context["params"]))

            readiness() >> transition
    return dag


def build_all(config_path: str | None = None) -> dict[str, Any]:
    """Every eosmirror DAG: one per mirror (sorted), one group DAG per mirror with a `groups` section,
    a switchover and a promotion DAG per mirror, for each identity mirror its reverse DAG, its
    reverse mirror's DAG (paused on creation), the reverse mirror's switchover DAG (the switch back)
    and its resume DAG, a readiness DAG per mirror, the fencing DAG, the lag DAG and the migration DAG."""
    mirrors = config.load(config_path)
    dags = {mirror_dag_id(m.name): build_mirror_dag(m, config_path) for m in mirrors.mirrors}
    dags.update({groups_dag_id(m.name): build_groups_dag(m, config_path) for m in mirrors.mirrors if m.groups})
    for m in mirrors.mirrors:   # the disaster-recovery DAGs: manual only
        dags[switchover_dag_id(m.name)] = build_transition_dag(commands.SWITCHOVER, m, config_path)
        dags[promote_dag_id(m.name)] = build_transition_dag(commands.PROMOTE, m, config_path)
        if m.replication_policy == "identity":   # the way back: reverse, the reverse mirror (paused), switch back, resume
            dags[reverse_dag_id(m.name)] = build_transition_dag(commands.REVERSE, m, config_path)
            dags[mirror_dag_id(m.reverse().name)] = build_mirror_dag(m.reverse(), config_path, paused=True)
            dags[switchover_dag_id(m.reverse().name)] = build_transition_dag(commands.SWITCHOVER, m.reverse(), config_path)
            dags[resume_dag_id(m.name)] = build_transition_dag(commands.RESUME, m, config_path)
    dags.update({readiness_dag_id(m.name): build_readiness_dag(m, config_path) for m in mirrors.mirrors})
    dags[FENCE_DAG_ID] = build_fence_dag(mirrors, config_path)
    dags[LAG_DAG_ID] = build_lag_dag(mirrors, config_path)
    dags[MIGRATE_DAG_ID] = build_migrate_dag(mirrors, config_path)
    return dags
