"""A class-data-sharing archive of the Spark driver's classes: a run's JVM starts about 1 s sooner.

Every run starts a fresh Spark JVM (spark-submit), and most of its start-up is loading and
verifying the same few thousand classes (SparkContext, Netty, Jetty, Scala). Java 17 can dump the
classes a JVM loaded into a file (``-XX:ArchiveClassesAtExit``) and map them into the next JVM
(``-XX:SharedArchiveFile``); figures: docs/results.md, "Figures behind the code".

Invariants:
1. Never a correctness dependency. A missing archive is silently ignored by the JVM; one made by
   another JDK or for another class path is refused by the JVM's own checks and the JVM runs
   without it (the ``-Xlog`` options below keep that refusal out of the run's log).
2. The archive is keyed by what it depends on (the java binary, libjvm's size and mtime, the name,
   size and mtime of every jar of ``SPARK_HOME/jars``): an upgrade of either makes a new key, so a
   stale archive is never even offered.
3. It is built only by ``eosmirror setup`` (or ``eosmirror spark-archive``, e.g. in an image build),
   written to a temporary name, checked by a JVM that maps it, and renamed: a run never sees half
   a file or one that failed its check (a JVM that maps a truncated archive can crash).
4. It lives in a cache shared by every ``EOSMIRROR_HOME`` of the user (``EOSMIRROR_CACHE_DIR``,
   default ``var/cache`` of a checkout or ``~/.cache/eosmirror``): it holds no secret and no state.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from eosmirror import paths

TRAINING_JOB = Path(__file__).resolve().with_name("classtrain.py")
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
BUILD_TIMEOUT = 300


def cache_dir() -> Path:
    if os.environ.get("EOSMIRROR_CACHE_DIR"):
        path = Path(os.environ["EOSMIRROR_CACHE_DIR"])
    else:
        root = paths.checkout_root()
        path = root / "var" / "cache" if root else Path.home() / ".cache" / "eosmirror"
    path.mkdir(parents=True, exist_ok=True)
    return path


def java_binary() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def jvm_key(jar_dir: Path) -> str | None:
    """What a class archive of the jars in ``jar_dir`` depends on, hashed (invariant 2): the java
    binary, libjvm's size and mtime, each jar's name, size and mtime. None when there is no java."""
    java = java_binary()
    if java is None:
        return None
    libjvm = java.parent.parent / "lib" / "server" / "libjvm.so"
    jvm_stat = libjvm.stat() if libjvm.exists() else None
    jars = sorted((p.name, p.stat().st_size, int(p.stat().st_mtime)) for p in jar_dir.glob("*.jar"))
    identity = [str(java), (jvm_stat.st_size, int(jvm_stat.st_mtime)) if jvm_stat else None, jars]
    return hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:16]


def archive_key(spark_home: str) -> str | None:
    return jvm_key(Path(spark_home) / "jars")


def archive_path(spark_home: str) -> Path | None:
    key = archive_key(spark_home)
    return cache_dir() / f"spark-driver-{key}.jsa" if key else None


def java_options(spark_home: str) -> str:
    """The options that map the archive, if it is built; "" otherwise."""
    path = archive_path(spark_home)
    if path is None or not path.exists():
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET}"


def _train(spark_submit: str, env: dict[str, str], java_options: str, what: str) -> None:
    cmd = [spark_submit, "--master", "local[1]", "--conf", "spark.ui.enabled=false",
           "--conf", "spark.log.level=ERROR", "--conf", "spark.ui.showConsoleProgress=false",
           "--conf", f"spark.driver.extraJavaOptions={java_options}", str(TRAINING_JOB)]
    done = subprocess.run(cmd, env=env, capture_output=True, timeout=BUILD_TIMEOUT)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).decode(errors="replace")[-1500:]
        raise RuntimeError(f"{what} failed (exit {done.returncode}): {tail}")


def build(spark_submit: str, env: dict[str, str], base_options: str) -> tuple[Path, float]:
    """Run the training job once with ``-XX:ArchiveClassesAtExit``, then once more mapping the new
    archive, and install it only if that JVM ran and loaded SparkContext from it (a JVM that maps
    a damaged archive can crash: it is never offered to a run). Returns (path, seconds)."""
    path = archive_path(env["SPARK_HOME"])
    if path is None:
        raise RuntimeError("no java found (JAVA_HOME or PATH): the Spark class archive needs the JVM Spark runs on")
    started = time.monotonic()
    partial = path.with_suffix(f".{os.getpid()}.partial")
    loads = path.with_suffix(f".{os.getpid()}.loads")
    try:
        _train(spark_submit, env, f"{base_options} -XX:ArchiveClassesAtExit={partial} {QUIET}",
               "the training job that writes the Spark class archive")
        if not partial.exists():
            raise RuntimeError(f"the training job ended but wrote no archive at {partial}")
        _train(spark_submit, env, f"{base_options} -XX:SharedArchiveFile={partial} {QUIET} "
                                  f"-Xlog:class+load=info:file={loads}", "the check run on the new Spark class archive")
        if not any(" org.apache.spark.SparkContext " in line and "shared objects file (top)" in line
                   for line in loads.read_text(errors="replace").splitlines()):
            raise RuntimeError("the check run did not load SparkContext from the new Spark class archive")
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
        loads.unlink(missing_ok=True)
    for old in cache_dir().glob("spark-driver-*.jsa"):   # archives of an earlier JDK or Spark
        if old != path:
            old.unlink(missing_ok=True)
    return path, time.monotonic() - started
