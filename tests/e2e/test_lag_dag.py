"""The eosmirror_lag DAG (dag.test) against real brokers: an SLO breach fails the task naming the mirror,
the partitions, the figure and the threshold and calls on_lag_alert; a caught-up mirror succeeds."""

import json
import time

import pytest

from tests.airflow_helpers import run_dag, task_states, xcoms
from tests.helpers import create_topic, mirror, run, seed_sequence
from tests.support.airflow_dags import mirror_def, use_mirrors

pytestmark = pytest.mark.e2e


def test_slo_breach_fails_the_task_and_calls_the_hook_then_catching_up_succeeds(
        source_conf, target_conf, unique, tmp_path, monkeypatch, capfd):
    topic = create_topic(source_conf, unique("src"), 2)
    seed_sequence(source_conf, topic, 2, 10)
    name = unique("m")
    alerts = tmp_path / "alerts.jsonl"
    monkeypatch.setenv("EOSMIRROR_TEST_ALERTS", str(alerts))
    fields = {"max_lag_seconds": 1, "on_lag_alert": "tests.e2e.lag_hook.record"}
    use_mirrors(tmp_path, monkeypatch, mirror_def(name, [topic], **fields))
    m = mirror(name, [topic], max_records_per_partition=4, **fields)
    assert run(m)["status"] == "ok"
    time.sleep(2)   # the oldest unmirrored records are now older than the 1 s SLO
    started = time.monotonic()
    dr = run_dag("eosmirror_lag", run_conf={"mirror": name})
    took = time.monotonic() - started
    ti = next(t for t in dr.get_task_instances() if t.task_id == "evaluate")
    assert str(dr.state) == "failed" and ti.try_number == 1, task_states(dr)   # an alert is not retried
    out, err = capfd.readouterr()
    assert f"lag alert: mirror {name}: time lag SLO max_lag_seconds=1 breached on {topic}[0], {topic}[1]" in out + err
    (alert,) = [json.loads(line) for line in alerts.read_text().splitlines()]
    assert alert["mirror"] == name and alert["record_lag"] == 12 and alert["alerting"]
    assert [f"{p['source_topic']}[{p['partition']}]" for p in alert["partitions"] if p["breach"]] == [
        f"{topic}[0]", f"{topic}[1]"]
    # Caught up: the task succeeds and returns the figures (XCom).
    assert run(mirror(name, [topic]))["status"] == "ok"
    dr = run_dag("eosmirror_lag", run_conf={"mirror": name})
    assert str(dr.state) == "success", task_states(dr)
    (shown,) = xcoms(dr)["evaluate"]["mirrors"]
    assert (shown["mirror"], shown["status"], shown["record_lag"], shown["time_lag_seconds"]) == (name, "OK", 0, 0.0)
    print(f"lag DAG with one mirror of 2 partitions: failed in {took:.1f} s")


def test_an_unknown_mirror_param_is_refused_at_trigger(unique, tmp_path, monkeypatch, source_conf):
    from airflow.sdk.exceptions import ParamValidationError

    use_mirrors(tmp_path, monkeypatch, mirror_def(unique("m"), ["x"]))
    with pytest.raises(ParamValidationError):
        run_dag("eosmirror_lag", run_conf={"mirror": "no-such-mirror"})
