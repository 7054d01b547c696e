"""Bad Params fail the run at once, in preflight, with the CLI's message, and are never retried; a
dry run's XCom and log hold its plan (issue: the operator's day in Airflow)."""

import time

import pytest

from tests.airflow_helpers import run_dag, task_log_text, task_states, xcoms
from tests.helpers import cli, create_topic, mirrors_file, seed_sequence
from tests.support.airflow_dags import mirror_def, use_mirrors

pytestmark = pytest.mark.e2e
RETRY_DELAY_SECONDS = 300   # Airflow's default retry_delay, which the mirror DAGs keep


@pytest.mark.parametrize("conf, message", [
    ({"topics": ["no.such.topic"]}, "topics no.such.topic are not mirrored by it"),
    ({"no_such_param": 1}, "unknown key(s) in the run's conf: no_such_param"),
])
def test_a_bad_param_fails_preflight_at_once_and_is_not_retried(source_conf, unique, tmp_path, monkeypatch, conf,
                                                                  message, capfd, caplog):
    caplog.set_level("INFO")
    topic = create_topic(source_conf, unique("bp"), 1)
    name = unique("m")
    # retries: 2 with a 5-minute delay by default: only a failure that is never retried ends within the budget.
    use_mirrors(tmp_path, monkeypatch, {**mirror_def(name, [topic]), "airflow": {"schedule": None, "retries": 2}})
    started = time.monotonic()
    dr = run_dag(f"eosmirror__{name}", run_conf=conf)
    took = time.monotonic() - started
    states = task_states(dr)
    assert str(dr.state) == "failed" and states["preflight"] == "failed", states
    assert states["copy"] in ("upstream_failed", "None"), states   # Spark never started
    ti = next(t for t in dr.get_task_instances() if t.task_id == "preflight")
    assert ti.try_number == 1 and str(ti.state) == "failed", (ti.try_number, ti.state)
    assert message in task_log_text(capfd, caplog)
    # Not a speed target (that would belong in make bench): a run that waited out even one retry
    # delay (5 minutes) would take longer than this; a loaded machine once needed 45 s without one.
    assert took < RETRY_DELAY_SECONDS, f"the bad Param took {took:.1f} s to fail: was it retried?"
    print(f"bad Param {conf}: failed in {took:.1f} s")


@pytest.mark.parametrize("conf", [{"until": "yesterday"}, {"accept_foreign": "yes"}])
def test_a_param_of_the_wrong_form_is_refused_at_trigger(unique, tmp_path, monkeypatch, source_conf, conf):
    from airflow.sdk.exceptions import ParamValidationError

    topic = create_topic(source_conf, unique("bu"), 1)
    name = unique("m")
    use_mirrors(tmp_path, monkeypatch, {**mirror_def(name, [topic]), "airflow": {"schedule": None}})
    with pytest.raises(ParamValidationError, match=next(iter(conf))):
        run_dag(f"eosmirror__{name}", run_conf=conf)


def test_a_dry_run_shows_its_plan_in_xcom(source_conf, unique, tmp_path, monkeypatch):
    topic = create_topic(source_conf, unique("dr"), 2)
    seed_sequence(source_conf, topic, 2, 100)
    name = unique("m")
    path = use_mirrors(tmp_path, monkeypatch, {**mirror_def(name, [topic]), "airflow": {"schedule": None, "retries": 0}})
    dr = run_dag(f"eosmirror__{name}", run_conf={"dry_run": True})
    assert str(dr.state) == "success", task_states(dr)
    published = xcoms(dr)["publish"]
    assert published["records"] == 0 and published["pending"] == 200
    assert sorted((p["partition"], p["start"], p["end"], p["pending"]) for p in published["plan"]) == [
        (0, 0, 100, 100), (1, 0, 100, 100)]

    # the same plan `eosmirror plan` prints for the same bound (now: nothing was produced since)
    from eosmirror.core import report
    from tests.run_reports import report as run_report

    printed = cli("plan", name, "--config", str(path))
    assert printed.returncode == 0, printed.stderr
    plan = run_report(plan=published["plan"]).plan   # the XCom's plan (JSON), typed
    assert report.plan_table(plan) in printed.stdout, (published["plan"], printed.stdout)


def test_an_unreachable_cluster_fails_preflight_as_a_transient_fault_that_keeps_its_retries(unique, tmp_path,
                                                                                            clusters):
    from airflow.sdk.exceptions import AirflowFailException

    from eosmirror.airflow import tasks

    name = unique("m")
    path = mirrors_file(tmp_path / "mirrors.yaml", [{"name": name, "topics": ["anything"], "target": {"local": "target"},
                                                     "source": {"config": {"bootstrap.servers": "127.0.0.1:1"}}}])
    with pytest.raises(Exception) as info:
        tasks.preflight(name, str(path), {"params": {}})
    assert not isinstance(info.value, AirflowFailException), info.value   # Airflow retries it
    assert "source cluster" in str(info.value) and "no answer" in str(info.value)
