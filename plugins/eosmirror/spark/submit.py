"""spark-submit of one mirror run: the command, its environment, and what executors receive.

Used by the CLI (``eosmirror run``) and by the Airflow ``copy`` task, which hands the same
arguments to SparkSubmitOperator. Secrets never go on this command line: cluster settings are
resolved inside the job (local and inline refs) or handed over in a 0600 file named by
``EOSMIRROR_CLUSTERS_FILE``.

Spark starts Python workers with ``PYSPARK_PYTHON``; unless it is this interpreter, the workers
cannot import eosmirror or confluent_kafka. pyspark's own ``bin/spark-submit`` (installed beside
this interpreter) finds SPARK_HOME through the same interpreter.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from eosmirror import paths
from eosmirror.spark import bytecode, classarchive

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[*]"
# The job's entry point lives inside the package, so an installed wheel can submit it.
JOB = Path(__file__).resolve().with_name("job.py")
# What executors import: the slot copy and what it stands on. Nothing else is shipped.
SHIPPED_PACKAGES = ("core", "kafka", "slot")


def job_arguments(mirror: str, config_path: str | None = None, until: str | None = None,
                  max_records_per_partition: int | None = None, max_bytes_per_slot: int | None = None,
                  topics: list[str] | None = None, dry_run: bool = False, result_json: str | None = None,
                  follow_until: str | None = None, final_of_switchover: bool = False,
                  max_bytes_per_second: int | None = None, accept_foreign: bool = False) -> list[str]:
    args = ["--mirror", mirror]
    options = {"--config": config_path, "--until": until, "--follow-until": follow_until,
               "--max-records-per-partition": max_records_per_partition,
               "--max-bytes-per-slot": max_bytes_per_slot, "--max-bytes-per-second": max_bytes_per_second,
               "--topics": ",".join(topics) if topics else None,
               "--result-json": result_json}
    for flag, value in options.items():
        if value is not None:
            args += [flag, str(value)]
    if dry_run:
        args.append("--dry-run")
    if final_of_switchover:
        args.append("--final-of-switchover")
    if accept_foreign:
        args.append("--accept-foreign")
    return args


def shipped_sources() -> list[tuple[Path, str]]:
    """(file, name inside the zip) of every module executors need."""
    package = paths.PACKAGE_DIR
    files = [package / "__init__.py"]
    for name in SHIPPED_PACKAGES:
        files += sorted(p for p in (package / name).rglob("*.py") if "__pycache__" not in p.parts)
    return [(f, str(f.relative_to(package.parent))) for f in files]


def package_zip() -> Path:
    """The executor-side code as a zip for ``--py-files`` (executors on other hosts import it from there),
    with its bytecode (spark/bytecode.py: each Python worker imported it compiling every module). Rebuilt
    only when a module's source changed (marshalled bytecode is not byte-for-byte stable across processes)."""
    entries = [(arcname, source.read_bytes(), (2020, 1, 1, 0, 0, 0)) for source, arcname in shipped_sources()]
    target = paths.under_home("dist") / "eosmirror-executor.zip"
    current = False
    if target.exists():
        try:
            current = bytecode.sources(target) == entries and bytecode.has_current_bytecode(target)
        except (OSError, zipfile.BadZipFile):
            current = False
    if not current:
        bytecode.replace(target, bytecode.zip_bytes(entries))
    log.info("executor package %s: %d modules, %d bytes", target, len(entries), target.stat().st_size)
    return target


def python_executable() -> str:
    return sys.executable


def spark_submit_binary() -> str:
    """pyspark's ``spark-submit`` next to the running interpreter (the project's venv)."""
    beside = Path(sys.executable).with_name("spark-submit")
    if beside.exists():
        return str(beside)
    found = shutil.which("spark-submit")
    if not found:
        raise FileNotFoundError("spark-submit not found: install the project (`make setup`) or put Spark on PATH")
    return found


def spark_home() -> str:
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        raise FileNotFoundError("pyspark is not installed in this interpreter")
    return str(Path(spec.origin).parent)


def process_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment variables for spark-submit and Spark daemons started by eosmirror."""
    env = dict(os.environ if base is None else base)
    env["PYSPARK_PYTHON"] = python_executable()
    env["PYSPARK_DRIVER_PYTHON"] = python_executable()
    env.setdefault("SPARK_HOME", spark_home())
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only; avoids reverse-DNS stalls
    return env


JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def base_conf(app_name: str) -> dict[str, str]:
    """Spark settings every eosmirror job uses."""
    return {
        "spark.app.name": app_name,
        "spark.pyspark.python": python_executable(),
        "spark.pyspark.driver.python": python_executable(),
        # A slot is one task that owns a transactional id; Spark must never run two copies of it on
        # purpose. Correctness does not depend on this (fencing does), but speculation would only
        # waste work by fencing itself.
        "spark.speculation": "false",
        "spark.ui.showConsoleProgress": "false",
        # Spark's INFO lines buried the run's own summary in the copy task's log; a mirror's
        # spark_conf may set it back ("INFO").
        "spark.log.level": "WARN",
        "spark.driver.bindAddress": "127.0.0.1",
        # Spark's JVMs schedule a few tasks and move no record (the slots' Python workers do): the
        # JIT's second tier and G1's threads only burn CPU there (figures: docs/results.md, "Figures behind the code").
        "spark.driver.extraJavaOptions": JVM_OPTIONS,
        "spark.executor.extraJavaOptions": JVM_OPTIONS,
    }


def spark_conf(mirror_conf: dict[str, str], app_name: str) -> dict[str, str]:
    conf = base_conf(app_name)
    conf.update(mirror_conf)
    return conf


def for_run(conf: dict[str, str], job_args: list[str]) -> dict[str, str]:
    """``conf`` for the run of ``job_args``: a bounded run (no ``--follow-until``) starts no Spark UI unless
    ``conf`` (the mirror's ``spark_conf``) sets ``spark.ui.enabled``: it lives seconds, so nobody opens its
    UI, and starting it took about 0.3 s of every run's start (docs/results.md, "The Spark UI of a bounded
    run"). A follow run, which copies for minutes, keeps Spark's default (on)."""
    if "--follow-until" in job_args or "spark.ui.enabled" in conf:
        return conf
    return {**conf, "spark.ui.enabled": "false"}


def with_class_archive(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with the Spark class archive mapped into the driver and executor JVMs, when this host
    has one built (classarchive.py). Decided where spark-submit runs, at submit time; a mirror that
    sets its own ``extraJavaOptions`` keeps them untouched."""
    options = classarchive.java_options(process_env()["SPARK_HOME"])
    if not options:
        return conf
    conf = dict(conf)
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        if conf.get(key) == JVM_OPTIONS:
            conf[key] = f"{JVM_OPTIONS} {options}"
    return conf


def build_class_archive() -> tuple[Path, float]:
    """Build (or rebuild) this host's Spark class archive: ``eosmirror setup`` and ``eosmirror spark-archive``."""
    return classarchive.build(spark_submit_binary(), process_env(), JVM_OPTIONS)


def command(master: str, job_args: list[str], conf: dict[str, str], ship_package: bool = False,
            deploy_mode: str | None = None, application: Path = JOB) -> list[str]:
    conf = for_run(conf, job_args)
    if deploy_mode != "cluster":   # the driver runs here: this host's archive applies
        conf = with_class_archive(conf)
    cmd = [spark_submit_binary(), "--master", master]
    if deploy_mode:
        cmd += ["--deploy-mode", deploy_mode]
    for key, value in sorted(conf.items()):
        cmd += ["--conf", f"{key}={value}"]
    if ship_package:
        cmd += ["--py-files", str(package_zip())]
    return cmd + [str(application), *job_args]


def run(cmd: list[str], extra_env: dict[str, str] | None = None, **kwargs: Any) -> int:
    env = process_env()
    env.update(extra_env or {})
    return subprocess.run(cmd, env=env, **kwargs).returncode


def default_master() -> str:
    return os.environ.get("EOSMIRROR_SPARK_MASTER", DEFAULT_MASTER)
