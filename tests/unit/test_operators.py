"""eosmirror's operators are module-level classes, importable by name as the providers' are, and their
templated fields render like any operator's: a team's own DAG can pass Jinja in the mirror, the mirrors file,
the copy bound or the group direction."""

import datetime as dt

from eosmirror.airflow import grouptasks, tasks
from eosmirror.airflow.operators import GroupSyncOperator, MirrorCopyOperator


def test_the_operators_are_imported_by_name_and_declare_their_templated_fields():
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    assert MirrorCopyOperator.__module__ == GroupSyncOperator.__module__ == "eosmirror.airflow.operators"
    assert {"mirror", "config_path", "until"} <= set(MirrorCopyOperator.template_fields)
    assert set(SparkSubmitOperator.template_fields) <= set(MirrorCopyOperator.template_fields)
    assert GroupSyncOperator.template_fields == ("mirror", "config_path", "direction")


def render(operator, **context):
    operator.render_template_fields(context)
    return operator


def test_jinja_in_the_mirror_the_mirrors_file_and_the_bound_is_rendered():
    from airflow.sdk import DAG

    with DAG("team_dag", schedule=None, start_date=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)):
        copy = MirrorCopyOperator(task_id="copy", mirror="{{ params.mirror }}", config_path="/etc/{{ params.env }}.yaml",
                                  until="{{ ds }}T00:00:00Z", application="job.py")
        sync = GroupSyncOperator(task_id="sync", mirror="{{ params.mirror }}", direction="{{ params.direction }}")
    params = {"mirror": "orders", "env": "prod", "direction": "failback"}
    render(copy, params=params, ds="2026-02-03")
    assert (copy.mirror, copy.config_path, copy.until) == ("orders", "/etc/prod.yaml", "2026-02-03T00:00:00Z")
    render(sync, params=params)
    assert (sync.mirror, sync.direction) == ("orders", "failback")


def test_a_value_given_to_the_operator_wins_over_the_param_and_none_leaves_the_params():
    context = {"params": {"until": None, "direction": "failover", "dry_run": True}, "ds": "x"}
    assert tasks.with_params(context, until=None) is context
    assert tasks.with_params(context, until="")["params"] is context["params"]
    given = tasks.with_params(context, direction="failback")
    assert given["params"] == {"until": None, "direction": "failback", "dry_run": True} and given["ds"] == "x"
    assert tasks.resolve_until(tasks.with_params(context, until="2026-02-03T00:00:00Z"))[0] == \
        "2026-02-03T00:00:00+00:00"


def test_the_group_operator_hands_its_direction_to_the_task(monkeypatch):
    seen = {}
    monkeypatch.setattr(grouptasks, "move_groups",
                        lambda mirror, config_path, context: seen.update(mirror=mirror, params=context["params"]) or {})
    GroupSyncOperator(task_id="sync", mirror="orders", direction="failback").execute({"params": {"dry_run": True}})
    assert seen == {"mirror": "orders", "params": {"dry_run": True, "direction": "failback"}}
