"""The project's own Airflow home: settings every Airflow process started by `make airflow` reads."""

import os
import sqlite3
import subprocess
import sys
import threading
import time

from eosmirror.airflow import home


def test_sqlite_waits_for_a_busy_writer_instead_of_failing_database_is_locked(tmp_path):
    """CI failed `airflow backfill create` with "database is locked" while the scheduler wrote:
    pysqlite's default 5 s busy timeout. Airflow must build its engine with our longer one."""
    env = home.airflow_environ()
    path = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS"]
    module, _, name = path.rpartition(".")
    assert module == home.__name__ and getattr(home, name)["timeout"] >= 30, path

    # Behaviour, not only the setting: a writer holding the lock for 6 s (more than pysqlite's 5 s
    # default) delays a second writer opened with these args; it does not fail it.
    db = tmp_path / "busy.db"
    sqlite3.connect(db).execute("create table t (x)").connection.commit()
    holder = sqlite3.connect(db, check_same_thread=False)
    holder.execute("begin exclusive")
    threading.Timer(6, holder.commit).start()
    started = time.monotonic()
    writer = sqlite3.connect(db, **getattr(home, name))
    writer.execute("insert into t values (1)")
    writer.commit()
    assert time.monotonic() - started >= 5.5


def test_airflow_reads_the_connect_args_from_the_project_home():
    code = ("from airflow.settings import _get_connect_args; import sys; "
            "sys.stdout.write(str(_get_connect_args('sync').get('timeout')))")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, **home.airflow_environ()},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == str(home.SQLITE_CONNECT_ARGS["timeout"]), done.stdout


def test_a_task_waits_a_minute_for_the_execution_api_and_a_users_own_timeout_is_kept(monkeypatch):
    """A fresh standalone's first task failed on Airflow's 5 s execution API timeout at load 10 (the API
    server's first /execution request took 34 s): the task SDK must read the home's longer one."""
    code = "from airflow.sdk.api import client; import sys; sys.stdout.write(str(client.API_TIMEOUT))"
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, **home.airflow_environ()},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.strip().splitlines()[-1]) == float(home.EXECUTION_API_TIMEOUT_SECONDS) >= 30, done.stdout
    monkeypatch.setenv("AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT", "7.5")
    assert home.airflow_environ()["AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT"] == "7.5"


def test_a_short_jwt_secret_is_replaced_by_a_64_byte_one_and_a_strong_one_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(home, "airflow_home", lambda: tmp_path)
    assert home.strengthen_jwt_secret() is False                     # no airflow.cfg yet: nothing to do
    cfg = tmp_path / "airflow.cfg"
    cfg.write_text("[api_auth]\n# the secret\njwt_secret = Ursabqn7tx1oHtCBGFIkRg==\njwt_algorithm =\n")
    assert home.strengthen_jwt_secret() is True
    lines = cfg.read_text().splitlines()
    secret = next(line for line in lines if line.startswith("jwt_secret = ")).split(" = ", 1)[1]
    assert len(secret.encode()) >= 64 and secret != "Ursabqn7tx1oHtCBGFIkRg==", secret
    assert lines[:2] == ["[api_auth]", "# the secret"] and lines[3] == "jwt_algorithm ="   # nothing else changed
    assert cfg.stat().st_mode & 0o077 == 0
    assert home.strengthen_jwt_secret() is False and secret in cfg.read_text()     # kept from now on


def test_listen_defaults_to_loopback_and_refuses_an_unknown_value(monkeypatch):
    import pytest

    from eosmirror.airflow import listen
    from eosmirror.core.errors import ConfigError

    monkeypatch.delenv(listen.LISTEN_ENV, raising=False)
    env = home.airflow_environ()
    assert env["AIRFLOW__API__HOST"] == env["AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_HOST"] == "127.0.0.1"
    assert env["PATH"].split(os.pathsep)[0] == str(listen.shim_dir(home.airflow_home()))
    assert listen.with_skip_serve_logs(["triggerer"]) == ["triggerer", "--skip-serve-logs"]
    assert listen.with_skip_serve_logs(["dags", "test", "x"]) == ["dags", "test", "x"]
    monkeypatch.setenv(listen.LISTEN_ENV, "all")
    env = home.airflow_environ()
    assert env["AIRFLOW__API__HOST"] == "0.0.0.0" and str(listen.shim_dir(home.airflow_home())) not in env["PATH"]
    assert listen.with_skip_serve_logs(["scheduler"]) == ["scheduler"]
    monkeypatch.setenv(listen.LISTEN_ENV, "lan")
    with pytest.raises(ConfigError, match=r"EOSMIRROR_LISTEN='lan'.*loopback.*all"):
        home.airflow_environ()


def test_the_shim_adds_skip_serve_logs_and_the_password_file_is_owner_only(tmp_path, monkeypatch):
    """The shim runs for real: a stand-in `airflow` echoes the arguments it gets."""
    from eosmirror.airflow import listen

    monkeypatch.delenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", raising=False)
    echo = tmp_path / "real airflow"
    echo.write_text('#!/bin/sh\necho "$@"\n')
    echo.chmod(0o755)
    listen.write_shim(tmp_path, str(echo))
    shim = str(listen.shim_dir(tmp_path) / "airflow")
    for args, expected in ((["scheduler", "-n", "1"], "scheduler -n 1 --skip-serve-logs"),
                           (["triggerer"], "triggerer --skip-serve-logs"), (["api-server"], "api-server")):
        assert subprocess.run([shim, *args], capture_output=True, text=True).stdout.strip() == expected
    passwords = tmp_path / listen.PASSWORDS_FILE
    listen.private_password_file(tmp_path)
    assert passwords.read_text() == "" and passwords.stat().st_mode & 0o777 == 0o600
    passwords.write_text('{"admin": "x"}\n')
    passwords.chmod(0o644)
    listen.private_password_file(tmp_path)
    assert passwords.read_text() == '{"admin": "x"}\n' and passwords.stat().st_mode & 0o777 == 0o600


def test_the_api_server_waits_less_for_sqlite_than_the_other_components():
    """The API server's audit log and its own sync requests wait on each other until the busy timeout
    ends it (home.py): 20 s there, 60 s in the scheduler, the DAG processor, tasks and CLI calls."""
    code = "from eosmirror.airflow import home; print(home.SQLITE_CONNECT_ARGS['timeout'])"   # argv: -c, the role
    seen = {}
    for role in ("api-server", "scheduler", "dag-processor", "tasks"):
        done = subprocess.run([sys.executable, "-c", code, role, "--port", "1"], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr[-2000:]
        seen[role] = int(done.stdout.strip())
    assert seen == {"api-server": home.API_SERVER_SQLITE_TIMEOUT, "scheduler": 60, "dag-processor": 60, "tasks": 60}
    assert home.API_SERVER_SQLITE_TIMEOUT < 60
