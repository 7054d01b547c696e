"""`make matrix` (#30): build the wheel, install it into a fresh venv beside each cell's Airflow and
PySpark (resolved by uv as of that Airflow patch's release, as its constraint file would have: those
files are on GitHub, not reachable from our build machines; cells.py says how), check
that the plugin and the DAGs load with no error, delete the venv (about 1 GB each), and write the table
build/matrix.md (commit, date, result per cell) that docs/install.md "Supported versions" quotes.

Then (MATRIX_RUN=0 skips it) one mirror DAG run per cell against the local clusters (mirrorrun.py); the
matrix starts them at $EOSMIRROR_SOURCE_PORT/TARGET_PORT when they are not running and stops only those.

MATRIX_CELLS=3.1,pyspark-3.5 runs the matching cells only. `make test` keeps testing the locked cell.
"""

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from eosmirror_tools.matrix import cells as cellmod
from eosmirror_tools.matrix import mirrorrun

REPO = Path(__file__).resolve().parents[3]
UV = REPO / "var" / "tools" / "uv" / "bin" / "uv"
BUILD = REPO / "build" / "matrix"
CHECK = Path(__file__).with_name("check.py")
# Two lines: what a team's DAG file holds (docs/install.md).
# The project's release list: its "releases" carry each file's upload time (the per-version
# /pypi/apache-airflow/<version>/json answers 404 through our network).
PYPI_RELEASES = "https://pypi.org/pypi/apache-airflow/json"
DAG_FILE = ("from eosmirror.airflow.factory import mirror_dags\n"
            "globals().update(mirror_dags(__file__.rsplit('/', 1)[0] + '/mirrors.yaml'))\n")


def run(cmd: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], env=env, capture_output=True, text=True, timeout=timeout)


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("UV_PROJECT", "VIRTUAL_ENV", "PYTHONPATH", "AIRFLOW", "EOSMIRROR_CONFIG"))}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    return env


def build_wheel(env: dict[str, str]) -> Path:
    dist = BUILD / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    done = run([UV, "build", "--wheel", "--out-dir", dist, REPO], env, 300)
    if done.returncode:
        raise SystemExit(f"uv build failed:\n{done.stderr[-2000:]}")
    return next(dist.glob("eosmirror-*.whl"))


def airflow_releases() -> dict[str, list[dict]]:
    with urllib.request.urlopen(PYPI_RELEASES, timeout=60) as answer:
        return json.load(answer)["releases"]


def run_cell(cell: cellmod.Cell, wheel: Path, env: dict[str, str], expected: list[str],
             clusters: tuple[dict, dict] | None, now: dt.datetime) -> dict:
    """One cell: fresh venv, install, check; the venv is removed whatever happens."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"eosmirror-matrix-{cell.name}-") as work:
        venv, home = Path(work) / "venv", Path(work) / "airflow"
        dags = home / "dags"
        dags.mkdir(parents=True)
        (dags / "eosmirror_dags.py").write_text(DAG_FILE)
        shutil.copy(REPO / "dags" / "mirrors.yaml", dags / "mirrors.yaml")
        flags = cell.uv_flags(now)
        result = {"cell": cell.name, "requirements": cell.requirements(), "uv_flags": flags,
                  "resolved_as_of": cellmod.iso(cell.exclude_newer()) if cell.uploaded else "today"}
        done = run([UV, "venv", "--python", sys.executable, venv], env, 120)
        install = [UV, "pip", "install", "--python", venv / "bin" / "python", wheel, *cell.requirements(), *flags]
        done = done if done.returncode else run(install, env, 1800)
        if done.returncode:
            return {**result, "result": "install failed", "detail": (done.stdout + done.stderr)[-1500:],
                    "seconds": round(time.monotonic() - started)}
        cell_env = {**env, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
                    "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "PATH": f"{venv / 'bin'}:{env.get('PATH', '')}",
                    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}"}
        done = run([venv / "bin" / "python", CHECK, dags], cell_env, 600)
        if done.returncode:
            return {**result, "result": "import failed", "detail": done.stderr[-1500:],
                    "seconds": round(time.monotonic() - started)}
        checked = json.loads(done.stdout.strip().splitlines()[-1])
        plugins = run([venv / "bin" / "airflow", "plugins", "--output", "json"], cell_env, 300)
        providers = run([venv / "bin" / "airflow", "providers", "list", "--output", "json"], cell_env, 300)
        problems = []
        if checked["import_errors"]:
            problems.append(f"DAG import errors: {checked['import_errors']}")
        if not checked["dag_ids"] or checked["dag_ids"] != expected:
            problems.append(f"DAG ids {checked['dag_ids']} != {expected}")
        if '"eosmirror"' not in plugins.stdout:
            problems.append(f"`airflow plugins` lacks eosmirror: {(plugins.stdout + plugins.stderr)[-800:]}")
        if '"eosmirror"' not in providers.stdout:
            problems.append(f"`airflow providers list` lacks eosmirror: {(providers.stdout + providers.stderr)[-800:]}")
        if clusters and not problems:
            failed = mirrorrun.run(venv, home, cell_env, *clusters)
            problems += [f"mirror DAG run: {failed}"] if failed else []
            checked["mirror_run"] = "failed" if failed else f"{mirrorrun.PARTITIONS * mirrorrun.PER_PARTITION} records, exact"
        return {**result, **checked, "result": "fail" if problems else "pass", "detail": "; ".join(problems),
                "seconds": round(time.monotonic() - started)}


def table(rows: list[dict], commit: str, date: str) -> str:
    lines = [f"Commit `{commit}`, {date}. Each cell: a fresh venv with the wheel, resolved by uv as of one day "
             "after that Airflow patch's upload to PyPI (`--exclude-newer`, as its constraint file would have), "
             "pyspark, pyspark-client and the Spark provider as of the run; the plugin "
             "and provider are listed by `airflow plugins`/`airflow providers list`, the two-line DAG file "
             "loads its DAGs with no import error, and one mirror DAG run (`airflow dags test`) copies a fresh "
             "2-partition topic to the local target cluster, read back with a read_committed consumer.", "",
             "| Airflow | resolved as of | PySpark | Spark provider | confluent-kafka | mirror DAG run | result |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.get('apache-airflow', r['cell'])} | {r.get('resolved_as_of', '')} | {r.get('pyspark', '')} | "
                     f"{r.get('apache-airflow-providers-apache-spark', '')} | {r.get('confluent-kafka', '')} | "
                     f"{r.get('mirror_run', 'not run')} | "
                     f"{r['result']}{(': ' + ' '.join(r['detail'][:300].replace('|', '/').split())) if r.get('detail') else ''} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    if not UV.exists():
        raise SystemExit(f"{UV} is missing: run `make setup` first")
    env = clean_env()
    BUILD.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--", "plugins", "pyproject.toml"],
                           capture_output=True, text=True).stdout.strip()
    commit += "+uncommitted changes" if dirty else ""    # the table must not claim a commit it did not test
    now = dt.datetime.now(dt.timezone.utc)
    date = now.strftime("%Y-%m-%d %H:%M UTC")
    wheel = build_wheel(env)
    from eosmirror.airflow.factory import mirror_dags  # the DAG ids the locked environment builds

    expected = sorted(mirror_dags(REPO / "dags" / "mirrors.yaml"))
    releases = airflow_releases()
    rows = []
    results = BUILD / "matrix.json"
    started, clusters = local_clusters() if os.environ.get("MATRIX_RUN", "1") != "0" else ([], None)
    try:
        for cell in cellmod.select(os.environ.get("MATRIX_CELLS")):
            rows.append(one(cell.released(releases), wheel, env, expected, clusters, now))
            results.write_text(json.dumps({"commit": commit, "date": date, "rows": rows}, indent=1))
            (BUILD / "matrix.md").write_text(table(rows, commit, date))
    finally:
        from eosmirror_tools.kit import cluster

        for c in started:     # only the clusters this matrix started
            cluster.stop(c)
    print(f"matrix: {BUILD / 'matrix.md'}")
    return 0 if all(r["result"] == "pass" for r in rows) else 1


def local_clusters() -> tuple[list, tuple[dict, dict]]:
    """The local source and target clusters' client settings; starts those not running (returned first)."""
    from eosmirror_tools.kit import cluster

    wanted = cluster.default_clusters()
    started = [c for c in wanted if not cluster.is_reachable(c)]
    if started:
        cluster.up(started)
    return started, (wanted[0].client_config(), wanted[1].client_config())


def one(cell: cellmod.Cell, wheel: Path, env: dict[str, str], expected: list[str], clusters,
        now: dt.datetime) -> dict:
    print(f"matrix: {cell.name} ({' '.join(cell.requirements() + cell.uv_flags(now))}) ...", flush=True)
    row = run_cell(cell, wheel, env, expected, clusters, now)
    print(f"matrix: {cell.name}: {row['result']} ({row['seconds']} s) {row.get('detail', '')[:300]}", flush=True)
    return row


if __name__ == "__main__":
    sys.exit(main())
