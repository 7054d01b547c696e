"""The Apache Kafka runtime (jars) for the embedded clusters, fetched from Maven Central.

``pom.xml`` beside this file pins the Kafka version. ``ensure_kafka_lib()`` asks Maven to copy the
artifacts and their runtime dependencies into ``var/kafka-lib/<version>/`` once; afterwards the
folder's completion stamp makes every start download nothing (and not even start Maven).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

from eosmirror import paths

log = logging.getLogger(__name__)

POM = Path(__file__).resolve().parent / "pom.xml"
_STAMP = ".complete"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"


class KafkaRuntimeError(RuntimeError):
    """The Kafka jars or the Java runtime needed to run them are not available."""


def kafka_version() -> str:
    match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", POM.read_text())
    if not match:
        raise KafkaRuntimeError(f"{POM} has no <kafka.version> property")
    return match.group(1)


def lib_dir() -> Path:
    """The jar cache. In a checkout it is ``var/kafka-lib`` whatever ``EOSMIRROR_HOME`` says: the
    jars are a download cache, not state, and the test suite's own home must not fetch them again."""
    root = paths.checkout_root()
    return (root / "var" if root else paths.home()) / "kafka-lib" / kafka_version()


def java_binary() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise KafkaRuntimeError("no `java` on PATH and JAVA_HOME is not set: install Java 17 or newer")
    return found


def ensure_kafka_lib() -> Path:
    """Return the folder holding the Kafka jars, fetching them with Maven on first use."""
    target = lib_dir()
    if (target / _STAMP).exists():
        return target
    mvn = shutil.which("mvn")
    if not mvn:
        raise KafkaRuntimeError("Kafka jars are missing and `mvn` is not on PATH: install Maven 3.8+")
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    log.info("fetching Apache Kafka %s jars from Maven Central into %s", kafka_version(), target)
    cmd = [mvn, "-B", "-q", "-f", str(POM), DEPENDENCY_PLUGIN,
           "-DincludeScope=runtime", f"-DoutputDirectory={staging}"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise KafkaRuntimeError(f"Maven could not fetch the Kafka jars (exit {done.returncode}):\n{tail}")
    (staging / _STAMP).write_text(kafka_version() + "\n")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)  # atomic: a folder with the stamp is always complete
    return target


def classpath() -> str:
    return str(ensure_kafka_lib() / "*")  # the JVM expands the wildcard itself


_CONSOLE = [
    "status = warn",
    "appender.stdout.type = Console",
    "appender.stdout.name = STDOUT",
    "appender.stdout.layout.type = PatternLayout",
    "appender.stdout.layout.pattern = [%d] %p %m (%c)%n",
    "rootLogger.level = INFO",
    "rootLogger.appenderRef.stdout.ref = STDOUT",
]
# The chattiest loggers at INFO; their WARN/ERROR lines still reach the log.
_QUIET = {"statechange": "state.change.logger", "cleaner": "kafka.log.LogCleaner",
          "storage": "org.apache.kafka.storage.internals", "config": "org.apache.kafka.common.config.AbstractConfig"}


def log4j_config(name: str = "log4j2.properties", config_dumps: bool = False) -> Path:
    """A log4j2 config that writes to stdout (redirected to each process's log file).

    ``config_dumps`` keeps AbstractConfig at INFO: its dumps show what a process really ran with
    (the benchmark reads MirrorMaker 2's exactly-once settings from them).
    """
    path = paths.under_home("kafka") / name
    lines = list(_CONSOLE)
    for key, logger in _QUIET.items():
        if not (config_dumps and key == "config"):
            lines += [f"logger.{key}.name = {logger}", f"logger.{key}.level = WARN"]
    text = "\n".join(lines + [""])
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


QUICK_START_ENV = "EOSMIRROR_JVM_QUICK_START"
# The JIT's first tier only, and the serial collector: a JVM that lives minutes (a test session's
# brokers, a storage format) spends far less CPU compiling; peak speed drops, so never for benchmarks.
QUICK_START_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def quick_start() -> bool:
    """True where CPU at start-up matters more than peak speed (the test suite sets it)."""
    return os.environ.get(QUICK_START_ENV) == "1"


def java_command(main_class: str, *args: str, heap: str = "1g", extra_jvm: tuple[str, ...] = (),
                 short_lived: bool = False) -> list[str]:
    """The command line that runs a Kafka main class on the fetched classpath. ``short_lived`` with
    quick_start(): QUICK_START_FLAGS instead of G1 and the full JIT."""
    tuning = QUICK_START_FLAGS if short_lived and quick_start() else ("-XX:+UseG1GC",)
    return [java_binary(), f"-Xmx{heap}", *tuning, "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j_config()}", *extra_jvm,
            "-cp", classpath(), main_class, *args]


TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"


def kafka_transactions(bootstrap: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``kafka-transactions.sh --bootstrap-server <bootstrap> <args>`` from the fetched jars (find-hanging,
    describe-producers, abort): what an operator runs against a transaction a broker left open."""
    command = java_command(TRANSACTIONS_COMMAND, "--bootstrap-server", bootstrap, *args, heap="256m", short_lived=True)
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)
