"""Spark process environment and a local session helper (pyspark is imported lazily).

Spark starts Python workers with ``PYSPARK_PYTHON``; unless it is the project's interpreter, the
workers cannot import eosmirror or confluent_kafka. pyspark's own ``bin/spark-submit`` (installed
into the virtual environment) finds SPARK_HOME through the same interpreter.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

DEFAULT_MASTER = "local[*]"


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
        "spark.driver.bindAddress": "127.0.0.1",
    }


def local_session(app_name: str = "eosmirror", master: str = "local[2]", conf: dict[str, str] | None = None) -> Any:
    """A SparkSession on this machine whose workers run the project's interpreter."""
    os.environ.update(process_env())
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master)
    for key, value in {**base_conf(app_name), "spark.ui.enabled": "false", **(conf or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
