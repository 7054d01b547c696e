"""The path of a user with their own Airflow: the wheel, installed outside the repository.

Builds the wheel, installs it with the locked dependencies into a fresh virtual environment in a
temporary folder (no checkout on sys.path), gives a temporary Airflow home only the DAG file and a
mirrors file whose clusters are Airflow connections, and runs one mirror DAG end to end
(`airflow dags test`): preflight, spark-submit of the packaged job, publish. Then the installed CLI
verifies the copy record by record.

Slow (about 110 s): building the wheel and installing the locked dependencies into a fresh virtual
environment is the user's path it checks.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import create_topic, read_all, seed_sequence, values

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
UV = REPO / "var" / "tools" / "uv" / "bin" / "uv"


def run(cmd, env, cwd, timeout, what):
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{what} failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh venv outside the repository with the eosmirror wheel and its locked dependencies."""
    if not UV.exists():
        pytest.fail(f"{UV} is missing: run `make setup` first (it installs uv)")
    work = tmp_path_factory.mktemp("install")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_PROJECT", "VIRTUAL_ENV", "PYTHONPATH"))}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    run([str(UV), "build", "--wheel", "--out-dir", str(work / "dist"), str(REPO)], env, work, 300, "uv build")
    wheel = next((work / "dist").glob("eosmirror-*.whl"))
    requirements = work / "requirements.txt"
    run([str(UV), "export", "--frozen", "--no-dev", "--no-hashes", "--no-emit-project", "--project", str(REPO),
         "-o", str(requirements)], env, work, 120, "uv export")
    venv = work / "venv"
    run([str(UV), "venv", "--python", sys.executable, str(venv)], env, work, 120, "uv venv")
    # --compile-bytecode, as docs/install.md tells uv users: uv installs no .pyc, and where Python may not write
    # them every airflow command below compiled Airflow again (the file: 57-58 s with it, 62-71 s without).
    install = [str(UV), "pip", "install", "--compile-bytecode", "--python", str(venv / "bin" / "python"), "-r",
               str(requirements), str(wheel)]
    # Offline first: pyspark exists only as an sdist, and an online `uv pip install` re-validates it
    # against the index and builds a new revision of it into uv's cache on every run (1.4-1.9 GB each;
    # 58.6 GB after a few dozen runs filled this machine's disk). Offline reuses the build already in
    # the cache. On a machine whose cache lacks the index pages, the online install runs once.
    if subprocess.run([*install, "--offline"], env=env, cwd=work, capture_output=True, timeout=480).returncode:
        run(install, env, work, 480, "uv pip install")
    return {"work": work, "venv": venv, "wheel": wheel, "env": env}


def test_wheel_holds_the_package_and_no_dev_tools(installed):
    import zipfile

    names = zipfile.ZipFile(installed["wheel"]).namelist()
    assert "eosmirror/spark/job.py" in names and "eosmirror/slot/copier.py" in names
    assert "eosmirror/monitoring/alerts.yml" in names          # the Prometheus rules ship with the package
    assert not [n for n in names if n.startswith("eosmirror_tools") or "/bench/" in n or "/chaos/" in n]


def airflow_env(installed, home):
    """A bare Airflow home: its own (empty) plugins folder, nothing of the checkout."""
    env = {**installed["env"], "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
           "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
           "PATH": f"{installed['venv'] / 'bin'}:{os.environ.get('PATH', '')}"}
    env.pop("EOSMIRROR_CONFIG", None)
    return env


def test_installed_wheel_registers_its_plugin_and_provider_with_no_file_copied(installed, unique):
    """#24: the entry points alone make `airflow plugins` and `airflow providers list` show eosmirror."""
    home = installed["work"] / unique("bare")
    (home / "plugins").mkdir(parents=True)
    env, airflow = airflow_env(installed, home), str(installed["venv"] / "bin" / "airflow")
    plugins = json.loads(run([airflow, "plugins", "--output", "json"], env, installed["work"], 300, "airflow plugins"))
    (ours,) = [p for p in plugins if p["name"] == "eosmirror"]
    assert "eosmirror.airflow.plugin:EosMirrorPlugin" in ours["source"] and str(home) not in ours["source"], ours
    assert [a["url_prefix"] for a in ours["fastapi_apps"]] == ["/eosmirror"], ours
    assert [v["url_route"] for v in ours["external_views"]] == ["mirror-lag"], ours
    assert list((home / "plugins").iterdir()) == []
    providers = json.loads(run([airflow, "providers", "list", "--output", "json"], env, installed["work"], 300,
                               "airflow providers list"))
    (provider,) = [p for p in providers if p["package_name"] == "eosmirror"]
    assert provider["version"] == installed["wheel"].name.split("-")[1], provider
    # The `kafka` connection type stays the Kafka provider's.
    hooks = run([airflow, "providers", "hooks", "--output", "json"], env, installed["work"], 300, "providers hooks")
    kafka = [h for h in json.loads(hooks) if h.get("connection_type") == "kafka"]
    assert kafka and all(h["package_name"] == "apache-airflow-providers-apache-kafka" for h in kafka), kafka


def test_installed_wheel_runs_a_mirror_dag_end_to_end(installed, source_conf, target_conf, unique):
    work, venv = installed["work"], installed["venv"]
    topic = create_topic(source_conf, unique("inst"), partitions=2)
    seed_sequence(source_conf, topic, 2, 150)
    home = work / unique("airflow")
    dags = home / "dags"
    dags.mkdir(parents=True)
    # The team's DAG file: two lines (docs/install.md).
    (dags / "eosmirror_dags.py").write_text("from eosmirror.airflow.factory import mirror_dags\n"
                                            f"globals().update(mirror_dags({str(dags / 'mirrors.yaml')!r}))\n")
    name = unique("m")
    (dags / "mirrors.yaml").write_text(yaml.safe_dump({"mirrors": [{
        "name": name, "source": {"connection": "kafka_src"}, "target": {"connection": "kafka_dst"},
        "topics": [topic], "slots": 2, "max_transaction_seconds": 10, "airflow": {"schedule": None}}]}))
    env = {**installed["env"], "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
           "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
           "EOSMIRROR_HOME": str(home / "eosmirror"), "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '')}",
           "AIRFLOW_CONN_KAFKA_SRC": json.dumps({"conn_type": "kafka", "extra": source_conf}),
           "AIRFLOW_CONN_KAFKA_DST": json.dumps({"conn_type": "kafka", "extra": target_conf}),
           "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]",
                                                     "extra": {"deploy-mode": "client"}})}
    for key in ("EOSMIRROR_CONFIG", "AIRFLOW__CORE__PLUGINS_FOLDER"):
        env.pop(key, None)
    python, airflow = str(venv / "bin" / "python"), str(venv / "bin" / "airflow")
    where = run([python, "-c", "import eosmirror, sys; print(eosmirror.__path__[0]); print(sys.path)"],
                env, work, 60, "import eosmirror")
    assert where.splitlines()[0].startswith(str(venv)), where
    assert str(REPO) not in where, f"the checkout leaks onto sys.path: {where}"
    run([airflow, "db", "migrate"], env, work, 300, "airflow db migrate")
    out = run([airflow, "dags", "test", f"eosmirror__{name}"], env, work, 420, "airflow dags test")
    assert "state=success" in out.split("DagRun Finished")[-1], out[-3000:]
    assert "eosmirror/spark/job.py" in out and str(venv) in out        # the packaged job, from the venv
    for partition in range(2):
        assert values(read_all(target_conf, topic, partition)) == [f"{partition}-{n}".encode() for n in range(150)]
    verified = run([str(venv / "bin" / "eosmirror"), "verify", name, "--config", str(dags / "mirrors.yaml")],
                   env, work, 300, "eosmirror verify")
    assert "300 records" in verified or "identical" in verified, verified
