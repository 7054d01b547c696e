"""Build and run the spark-submit command of a mirror run (used by the CLI; Airflow builds the same
arguments for SparkSubmitOperator from ``job_arguments``/``spark_conf``).

Secrets never go on this command line: cluster settings are resolved inside the job (local and
inline refs) or handed over in a 0600 file named by ``EOSMIRROR_CLUSTERS_FILE``.
"""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path
from typing import Any

from eosmirror import paths, spark_env

JOB = paths.REPO_ROOT / "spark_jobs" / "mirror_batch.py"


def job_arguments(mirror: str, config_path: str | None = None, until: str | None = None,
                  max_records_per_partition: int | None = None, max_bytes_per_slot: int | None = None,
                  topics: list[str] | None = None, dry_run: bool = False, result_json: str | None = None) -> list[str]:
    args = ["--mirror", mirror]
    if config_path:
        args += ["--config", str(config_path)]
    if until:
        args += ["--until", until]
    if max_records_per_partition is not None:
        args += ["--max-records-per-partition", str(max_records_per_partition)]
    if max_bytes_per_slot is not None:
        args += ["--max-bytes-per-slot", str(max_bytes_per_slot)]
    if topics:
        args += ["--topics", ",".join(topics)]
    if dry_run:
        args.append("--dry-run")
    if result_json:
        args += ["--result-json", str(result_json)]
    return args


def package_zip() -> Path:
    """The core package as a zip for ``--py-files`` (executors on other hosts import it from there)."""
    target = paths.under_home("dist") / "eosmirror.zip"
    sources = sorted(p for p in paths.PACKAGE_DIR.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                     and p.suffix in (".py", ".xml"))
    newest = max(p.stat().st_mtime for p in sources)
    if target.exists() and target.stat().st_mtime >= newest:
        return target
    tmp = target.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for source in sources:
            zf.write(source, source.relative_to(paths.PACKAGE_DIR.parent))
    tmp.replace(target)
    return target


def spark_conf(mirror_conf: dict[str, str], app_name: str) -> dict[str, str]:
    conf = spark_env.base_conf(app_name)
    conf.update(mirror_conf)
    return conf


def command(master: str, job_args: list[str], conf: dict[str, str], ship_package: bool = False,
            deploy_mode: str | None = None) -> list[str]:
    cmd = [spark_env.spark_submit_binary(), "--master", master]
    if deploy_mode:
        cmd += ["--deploy-mode", deploy_mode]
    for key, value in sorted(conf.items()):
        cmd += ["--conf", f"{key}={value}"]
    if ship_package:
        cmd += ["--py-files", str(package_zip())]
    return cmd + [str(JOB), *job_args]


def run(cmd: list[str], extra_env: dict[str, str] | None = None, **kwargs: Any) -> int:
    env = spark_env.process_env()
    env.update(extra_env or {})
    return subprocess.run(cmd, env=env, **kwargs).returncode


def default_master() -> str:
    return os.environ.get("EOSMIRROR_SPARK_MASTER", spark_env.DEFAULT_MASTER)
