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
