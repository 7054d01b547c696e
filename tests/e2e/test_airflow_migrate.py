"""The eosmirror_migrate DAG: Param errors are refused at trigger, a refusal fails at once and is never
retried, a dry run writes nothing and shows its plan in XCom, a real run is audited with Airflow's run id."""

import time

import pytest

from tests.airflow_helpers import run_dag, task_states, xcoms
from tests.helpers import create_topic, progress_of, seed_sequence
from tests.support.airflow_dags import mirror_def, use_mirrors
from tests.support.groups import commit_offsets
from tests.support.load import home_made_copy

pytestmark = pytest.mark.e2e


def test_a_bad_from_param_is_refused_at_trigger(source_conf, unique, tmp_path, monkeypatch):
    from airflow.sdk.exceptions import ParamValidationError

    topic = create_topic(source_conf, unique("mp"), 1)
    name = unique("m")
    use_mirrors(tmp_path, monkeypatch, mirror_def(name, [topic]))
    with pytest.raises(ParamValidationError, match="from"):
        run_dag("eosmirror_migrate", run_conf={"mirror": name, "from": "kafka-connect"})


def test_migrate_dag_refuses_without_retry_then_dry_runs_then_migrates(source_conf, target_conf, unique, tmp_path,
                                                                      monkeypatch):
    from eosmirror.core import config
    from eosmirror.driver import migrate

    topic = create_topic(source_conf, unique("md"), 2)
    create_topic(target_conf, topic, 2)
    seed_sequence(source_conf, topic, 2, 10)
    home_made_copy(source_conf, target_conf, topic, 6)
    group, name = unique("g"), unique("m")
    path = use_mirrors(tmp_path, monkeypatch, mirror_def(name, [topic]))
    m = config.load(path).get(name)

    started = time.monotonic()   # the group has no offsets yet: refused, never retried (retries: 1)
    refused = run_dag("eosmirror_migrate", run_conf={"mirror": name, "from": f"group:{group}", "dry_run": False})
    ti = next(t for t in refused.get_task_instances() if t.task_id == "migrate")
    assert str(refused.state) == "failed" and ti.try_number == 1, task_states(refused)
    assert time.monotonic() - started < 60

    commit_offsets(source_conf, group, topic, {0: 6, 1: 6})
    dry = run_dag("eosmirror_migrate", run_conf={"mirror": name, "from": f"group:{group}", "dry_run": True})
    assert str(dry.state) == "success", task_states(dry)
    plan = xcoms(dry)["migrate"]
    assert plan["dry_run"] and [(c["partition"], c["new"]) for c in plan["partitions"]] == [(0, 6), (1, 6)]
    assert progress_of(target_conf, m, topic, 2) == {0: None, 1: None}

    done = run_dag("eosmirror_migrate", run_conf={"mirror": name, "from": f"group:{group}", "dry_run": False})
    assert str(done.state) == "success", task_states(done)
    assert {p: pr.offset for p, pr in progress_of(target_conf, m, topic, 2).items()} == {0: 6, 1: 6}
    [record] = migrate.history(m)
    assert record.who == f"airflow:eosmirror_migrate/{done.run_id}"
