"""The Spark provider's private members the copy operator relies on (eosmirror/airflow/sparkadapter.py), checked
against the installed provider: a real SparkSubmitOperator builds its real hook, which runs a stand-in spark-submit,
and the adapter must see its output lines and its process. A provider release that renames or stops calling one
of them fails here, not in a user's DAG run."""

import inspect
import os
import stat

import pytest

from eosmirror.airflow import sparkadapter

REPORT = "EOSMIRROR_RESULT {}"


@pytest.fixture
def fake_spark_submit(tmp_path, monkeypatch):
    script = tmp_path / "bin" / "spark-submit"
    script.parent.mkdir()
    script.write_text(f"#!/bin/sh\necho 'starting'\necho '{REPORT}'\necho 'done'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("AIRFLOW_CONN_EOSMIRROR_ADAPTER_TEST", '{"conn_type": "spark", "host": "local"}')
    return script


def test_every_member_the_adapter_names_exists_in_the_installed_provider():
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    operator = SparkSubmitOperator(task_id="t", application="job.py", conn_id="eosmirror_adapter_test")
    missing = [m for m in sparkadapter.OPERATOR_MEMBERS if not hasattr(operator, m)]
    hook_source = inspect.getsource(SparkSubmitHook)
    missing += [m for m in sparkadapter.HOOK_MEMBERS if f"self.{m}" not in hook_source]
    assert missing == [], f"the Spark provider no longer has {missing}: update eosmirror/airflow/sparkadapter.py"
    assert list(inspect.signature(SparkSubmitHook._process_spark_submit_log).parameters) == ["self", "itr"]


def test_the_adapter_sees_spark_submits_output_and_process(fake_spark_submit):
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    operator = SparkSubmitOperator(task_id="t", application="job.py", conn_id="eosmirror_adapter_test")
    seen = []

    def tap(lines):
        for line in lines:
            seen.append(line if isinstance(line, str) else line.decode())
            yield line

    operator._hook = sparkadapter.tap_output(operator._get_hook(), tap)
    assert sparkadapter.submit_process(operator) is None   # nothing started yet
    operator._hook.submit(application="job.py")
    assert [line.strip() for line in seen] == ["starting", REPORT, "done"]
    process = sparkadapter.submit_process(operator)
    assert process is not None and process.returncode == 0
    sparkadapter.rebuild_hook(operator)
    assert sparkadapter.submit_process(operator) is None and operator._get_hook() is not None


def test_a_replaced_command_runs_with_the_operators_environment(fake_spark_submit, tmp_path):
    """The run server's client instead of spark-submit: same output path, same process, and the env_vars
    (the secrets file's name) reach it as they reach spark-submit."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    client = tmp_path / "client.sh"
    client.write_text(f"#!/bin/sh\necho \"file=$EOSMIRROR_CLUSTERS_FILE\"\necho '{REPORT}'\n")
    client.chmod(client.stat().st_mode | stat.S_IXUSR)
    operator = SparkSubmitOperator(task_id="t", application="job.py", conn_id="eosmirror_adapter_test",
                                   env_vars={"EOSMIRROR_CLUSTERS_FILE": "/tmp/x/clusters.json"})
    seen = []

    def tap(lines):
        for line in lines:
            seen.append(line if isinstance(line, str) else line.decode())
            yield line

    hook = sparkadapter.replace_command(sparkadapter.tap_output(operator._get_hook(), tap), [str(client)])
    hook.submit(application="job.py")
    assert [line.strip() for line in seen] == ["file=/tmp/x/clusters.json", REPORT]
    assert hook._submit_sp is not None and hook._submit_sp.returncode == 0
