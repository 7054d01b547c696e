"""docker/compose.yaml and the deployment test's helpers, checked without Docker."""

from pathlib import Path

import yaml

from eosmirror_tools.deploy import images

COMPOSE = Path(__file__).resolve().parents[2] / "docker" / "compose.yaml"


def services():
    return yaml.safe_load(COMPOSE.read_text())["services"]


def test_every_long_running_service_has_a_healthcheck():
    missing = [name for name, s in services().items() if name != "airflow-init" and "healthcheck" not in s]
    assert not missing


def test_no_port_is_published_on_the_host():
    assert not [name for name, s in services().items() if "ports" in s]


def test_no_service_asks_the_engine_for_ulimits():
    """A dockerd that may not raise a hard limit (nested, rootless, locked down) refuses to start such a container
    ("error setting rlimit type 7"); the broker's entrypoint raises its soft open-files limit itself instead."""
    assert not [name for name, s in services().items() if "ulimits" in s]
    entrypoint = (COMPOSE.parent / "kafka" / "entrypoint.sh").read_text()
    assert 'ulimit -Sn "$want"' in entrypoint


def test_the_deployment_has_the_hosts_the_issue_asks_for():
    names = set(services())
    assert {f"{c}-kafka-{i}" for c in ("src", "dst") for i in (1, 2, 3)} <= names
    assert {"spark-master", "spark-worker-1", "spark-worker-2", "postgres", "redis", "airflow-api-server",
            "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer", "airflow-worker-1",
            "airflow-worker-2"} <= names


def test_no_secret_is_written_in_the_compose_file():
    text = COMPOSE.read_text()
    for variable in ("EOSMIRROR_POSTGRES_PASSWORD", "EOSMIRROR_FERNET_KEY", "EOSMIRROR_JWT_SECRET"):
        assert f"${{{variable}:?}}" in text


def test_apt_mirror_is_read_from_the_machines_sources(tmp_path, monkeypatch):
    sources = tmp_path / "sources.list"
    sources.write_text("deb http://mirror.example/debian-security bookworm-security main\n"
                       "deb [arch=amd64] http://mirror.example/debian/ bookworm main\n")
    real_path = images.Path

    def fake_path(p):
        return sources if p == "/etc/apt/sources.list" else real_path(tmp_path / "none")
    monkeypatch.setattr(images, "Path", fake_path)
    assert images.apt_mirror() == "http://mirror.example/debian"


class FakeTester:
    def probe(self, command, *args, **kwargs):
        assert command == "run-state"
        return {"state": "running", "tasks": [{"task_id": "copy", "hostname": "airflow-worker-2"}]}


def test_spark_faults_hit_the_worker_whose_executors_are_busy():
    from eosmirror_tools.deploy import faults

    def fetch(stack, host):
        assert host == "airflow-worker-2"
        return [{"host": "spark-worker-1", "active_tasks": 0}, {"host": "spark-worker-2", "active_tasks": 1},
                {"host": "spark-worker-2", "active_tasks": 1}]
    assert faults.busy_spark_worker(None, FakeTester(), "run", "spark-worker-1", fetch)[0] == "spark-worker-2"


def test_spark_faults_fall_back_when_the_driver_does_not_answer():
    from eosmirror_tools.deploy import faults

    def fetch(stack, host):
        raise faults.DeployError("connection refused")
    service, why = faults.busy_spark_worker(None, FakeTester(), "run", "spark-worker-1", fetch)
    assert service == "spark-worker-1" and "connection refused" in why


def _ran(copy_host: str, publish_host: str, state: str = "success") -> dict:
    return {"state": state, "tasks": [{"task_id": "copy", "hostname": copy_host},
                                      {"task_id": "preflight", "hostname": "airflow-worker-9"},
                                      {"task_id": "publish", "hostname": publish_host}]}


def test_cross_host_check_counts_faulted_catch_up_first_and_final_runs():
    from eosmirror_tools.deploy import runs

    scenarios = [{"name": "first run", **_ran("w1", "w1")},
                 {"name": "target-leader", **_ran("w2", "w2"), "catch_up": _ran("w1", "w2")},
                 {"name": "celery-copy-kill", **_ran("w1", "w2", state="failed")},
                 {"name": "final clean run", **_ran("w2", "w2")}]
    check = runs.cross_host_check(scenarios, required=True)
    assert check["ok"] and check["runs"] == 4 and check["crossed"] == ["target-leader catch-up"]


def test_cross_host_check_fails_only_when_required_and_never_seen():
    from eosmirror_tools.deploy import runs

    same = [{"name": "first run", **_ran("w1", "w1")}, {"name": "final clean run", **_ran("w2", "w2")}]
    assert not runs.cross_host_check(same, required=True)["ok"]
    assert runs.cross_host_check(same, required=False)["ok"]


def test_faults_argument_accepts_all_none_and_known_names():
    from eosmirror_tools.deploy import faults

    assert faults.fault_names("all") == list(faults.FAULTS) and faults.fault_names("none") == []
    assert faults.fault_names(" target-leader, celery-copy-kill ") == ["target-leader", "celery-copy-kill"]


def test_an_unknown_fault_is_refused_before_anything_is_installed_or_started(monkeypatch, capsys):
    import pytest

    from eosmirror_tools.deploy import __main__ as deploy
    from eosmirror_tools.deploy import engine

    def must_not_run():
        raise AssertionError("packages were looked at before the arguments were checked")
    monkeypatch.setattr(engine, "ensure_packages", must_not_run)
    with pytest.raises(SystemExit) as exited:
        deploy.main(["--faults", "target-leader,kill-everything"])
    assert exited.value.code == 2
    assert "unknown fault(s) ['kill-everything']" in capsys.readouterr().err


def test_every_celery_worker_can_start_a_run_server_and_only_when_asked():
    workers = {name: s for name, s in services().items() if s.get("command", [])[:2] == ["airflow", "celery"]}
    assert len(workers) == 2, sorted(workers)
    for name, service in workers.items():
        env = service["environment"]
        assert env["EOSMIRROR_RUN_SERVER_MASTER"] == "${EOSMIRROR_RUN_SERVER_MASTER:-}", (name, env)   # off by default
        assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor", name   # the shared Airflow environment kept
    entrypoint = (COMPOSE.parent / "eosmirror" / "entrypoint.sh").read_text()
    assert '"${2:-}" = "celery" ] && [ -n "${EOSMIRROR_RUN_SERVER_MASTER:-}" ]' in entrypoint


def test_timed_runs_switch_the_run_server_in_place_and_drop_the_pacing(tmp_path):
    import os

    from eosmirror_tools.deploy import timed
    from eosmirror_tools.deploy.stack import Stack
    from eosmirror_tools.deploy.tester import write_mirrors_file

    path = write_mirrors_file(tmp_path / "mirrors.yaml", "orders")
    inode = os.stat(path).st_ino
    stack = Stack(path, env={})
    timed.set_run_server(stack, True)
    mirror = yaml.safe_load(path.read_text())["mirrors"][0]
    assert os.stat(path).st_ino == inode, "the file was replaced: a bind mount of it would not see the change"
    assert mirror["airflow"]["run_server"] is True
    assert "spark.executorEnv.EOSMIRROR_FAULTS" not in mirror["spark_conf"], mirror["spark_conf"]
    timed.set_run_server(stack, False)
    assert yaml.safe_load(path.read_text())["mirrors"][0]["airflow"]["run_server"] is False


def test_a_negative_count_of_timed_runs_is_refused(capsys):
    import pytest

    from eosmirror_tools.deploy import __main__ as deploy

    with pytest.raises(SystemExit) as exited:
        deploy.main(["--timed-runs", "-1"])
    assert exited.value.code == 2 and "--timed-runs -1" in capsys.readouterr().err
