"""The eosmirror_groups__<mirror> DAG through Airflow (dag.test): Params, XCom report, task log, and
bad Params failing at once without retries."""

import pytest

from tests.airflow_helpers import run_dag, task_log_text, task_states, xcoms
from tests.helpers import create_topic, mirror, run, seed_sequence
from tests.support.airflow_dags import mirror_def, use_mirrors
from tests.support.groups import commit_offsets, group_offsets

pytestmark = pytest.mark.e2e


def test_group_dag_dry_run_then_sync_with_params(source_conf, target_conf, unique, tmp_path, monkeypatch, capfd, caplog):
    caplog.set_level("INFO")
    topic = create_topic(source_conf, unique("g"), 3)
    seed_sequence(source_conf, topic, 3, 20)
    group, other = unique("app"), unique("other")
    commit_offsets(source_conf, group, topic, {0: 5, 1: 10, 2: 15})
    commit_offsets(source_conf, other, topic, {0: 1})
    name = unique("m")
    use_mirrors(tmp_path, monkeypatch, {**mirror_def(name, [topic]), "groups": {"schedule": None}})
    m = mirror(name, [topic], groups={})
    assert run(m)["status"] == "ok"

    dr = run_dag(f"eosmirror_groups__{name}", run_conf={"dry_run": True, "groups": [group]})
    assert str(dr.state) == "success", task_states(dr)
    result = xcoms(dr)["sync_groups"]
    assert result["dry_run"] and [g["group"] for g in result["groups"]] == [group]
    assert [p["new_offset"] for p in result["groups"][0]["partitions"]] == [5, 10, 15]
    assert group_offsets(target_conf, group, topic) == {0: None, 1: None, 2: None}
    assert "would write 3 partition(s)" in task_log_text(capfd, caplog)    # the readable table is in the task log

    dr = run_dag(f"eosmirror_groups__{name}", run_conf={"groups": [group]})
    assert str(dr.state) == "success", task_states(dr)
    assert group_offsets(target_conf, group, topic) == {0: 5, 1: 10, 2: 15}
    assert group_offsets(target_conf, other, topic)[0] is None     # not in the subset: untouched


def test_a_bad_group_param_fails_at_once_and_is_not_retried(source_conf, unique, tmp_path, monkeypatch):
    from airflow.sdk.exceptions import ParamValidationError

    topic = create_topic(source_conf, unique("g"), 1)
    name = unique("m")
    use_mirrors(tmp_path, monkeypatch, {**mirror_def(name, [topic]), "airflow": {"schedule": None, "retries": 2},
                                        "groups": {"schedule": None}})
    with pytest.raises(ParamValidationError, match="direction"):
        run_dag(f"eosmirror_groups__{name}", run_conf={"direction": "sideways"})
    dr = run_dag(f"eosmirror_groups__{name}", run_conf={"no_such_param": 1})
    ti = next(t for t in dr.get_task_instances() if t.task_id == "sync_groups")
    assert str(dr.state) == "failed" and ti.try_number == 1 and str(ti.state) == "failed", (ti.try_number, ti.state)
