"""The Apache Kafka runtime (jars) for the embedded clusters, fetched from Maven Central.

``pom.xml`` beside this file pins the default Kafka version. ``ensure_kafka_lib()`` asks Maven to copy the
artifacts and their runtime dependencies into ``var/kafka-lib/<version>/`` once; afterwards the
folder's completion stamp makes every start download nothing (and not even start Maven).

Other versions (a cluster of another Kafka line: ``eosmirror local up --source-version 2.8``, the broker
matrix) are fetched the same way into their own folder: ``resolve_version`` turns what a person typed
into a release of one of ``LINES`` (or says which are available), ``ensure_kafka_lib(version)`` fetches
it, and ``java_command(..., version=...)`` runs a main class of that release. Lines before 3.3 keep their
metadata in ZooKeeper (whose jar comes with the broker's own dependencies); 3.3 and newer run KRaft.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

from eosmirror import paths
from eosmirror_tools.kit import jvmarchive

log = logging.getLogger(__name__)

POM = Path(__file__).resolve().parent / "pom.xml"
_STAMP = ".complete"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"


class KafkaRuntimeError(RuntimeError):
    """The Kafka jars or the Java runtime needed to run them are not available."""


def kafka_version() -> str:
    """The default version: the one ``pom.xml`` pins (every cluster runs it unless told otherwise)."""
    match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", POM.read_text())
    if not match:
        raise KafkaRuntimeError(f"{POM} has no <kafka.version> property")
    return match.group(1)


# The Kafka lines a local cluster can run, each at its newest release on Maven Central (checked with
# Maven: docs/versions.md has what the broker matrix measured on them). A line alone ("3.9") means its
# release here; another release of a listed line ("3.9.0") is fetched as asked.
LINES = {"2.8": "2.8.2", "3.9": "3.9.2", "4.0": "4.0.2", "4.1": "4.1.2", "4.2": "4.2.2", "4.3": "4.3.1",
         "4.4": "4.4.0"}
KRAFT_FROM = (3, 3)      # KRaft production-ready (KIP-833); before it a cluster keeps its metadata in ZooKeeper
_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


def line_of(version: str) -> tuple[int, int]:
    found = _RELEASE.match(version)
    if not found:
        raise KafkaRuntimeError(f"{version!r} is not a Kafka release number (major.minor.patch)")
    return int(found.group(1)), int(found.group(2))


def uses_zookeeper(version: str) -> bool:
    """True for the lines before KRaft's production release (3.3): the broker needs a ZooKeeper."""
    return line_of(version) < KRAFT_FROM


def log4j1(version: str) -> bool:
    """Kafka logs through log4j 1 (reload4j) before 4.0, through log4j2 from 4.0 on."""
    return line_of(version) < (4, 0)


def fetched() -> list[str]:
    """The versions whose jars are complete here (their folder has the completion stamp)."""
    root = lib_dir().parent
    return sorted(d.name for d in root.glob("*") if (d / _STAMP).exists()) if root.exists() else []


def available() -> str:
    """The versions a person can ask for, and those already fetched here (for error messages)."""
    lines = ", ".join(f"{line} ({release}, {'ZooKeeper' if uses_zookeeper(release) else 'KRaft'})"
                      for line, release in LINES.items())
    return f"available: {lines}; fetched here: {', '.join(fetched()) or 'none'}"


def resolve_version(asked: str | None) -> str:
    """The release a cluster runs for what a person asked: nothing = the default, a line = its release
    in LINES, a release of a listed line = itself. Anything else is refused naming what is available."""
    if not asked:
        return kafka_version()
    asked = asked.strip()
    if asked in LINES:
        return LINES[asked]
    found = _RELEASE.match(asked)
    if found and f"{found.group(1)}.{found.group(2)}" in LINES:
        return asked
    raise KafkaRuntimeError(f"unknown Kafka version {asked!r} for a local cluster; {available()}")


MM2_FROM = (3, 5)        # exactly-once MirrorMaker 2 (KIP-618's exactly-once source connectors)
MM2_SUFFIX = "+mm2"      # the folder of another version's broker, tools and MirrorMaker 2 (connect-mirror)


def has_exactly_once_mm2(version: str) -> bool:
    return line_of(version) >= MM2_FROM


def lib_dir(version: str | None = None, mm2: bool = False) -> Path:
    """The jar cache. In a checkout it is ``var/kafka-lib`` whatever ``EOSMIRROR_HOME`` says: the
    jars are a download cache, not state, and the test suite's own home must not fetch them again.
    ``mm2``: another version's MirrorMaker 2 lives in ``<version>+mm2`` (its broker folder stays broker-only);
    the default version's folder already holds it."""
    root = paths.checkout_root()
    version = version or kafka_version()
    name = version + MM2_SUFFIX if mm2 and version != kafka_version() else version
    return (root / "var" if root else paths.home()) / "kafka-lib" / name


def java_binary() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise KafkaRuntimeError("no `java` on PATH and JAVA_HOME is not set: install Java 17 or newer")
    return found


def ensure_kafka_lib(version: str | None = None, mm2: bool = False) -> Path:
    """Return the folder holding the jars of ``version`` (default: the pom's), with MirrorMaker 2 when
    ``mm2``, fetching them with Maven on first use. A failed fetch leaves nothing a later start would trust: the jars land in a staging
    folder that becomes the real one, stamped, only once Maven copied everything."""
    version = version or kafka_version()
    target = lib_dir(version, mm2)
    if (target / _STAMP).exists():
        return target
    mvn = shutil.which("mvn")
    if not mvn:
        raise KafkaRuntimeError(f"Kafka {version} jars are missing and `mvn` is not on PATH: install Maven 3.8+")
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    log.info("fetching Apache Kafka %s jars from Maven Central into %s", version, target)
    cmd = [mvn, "-B", "-q", "-f", str(POM), DEPENDENCY_PLUGIN,
           "-DincludeScope=runtime", f"-DoutputDirectory={staging}"]
    if version != kafka_version():
        # A broker and its tools; with MirrorMaker 2 (connect-mirror of that version) only when asked
        cmd += [f"-Dkafka.version={version}"] + ([] if mm2 else ["-Dkafka.brokeronly=true"]) + (
            ["-Dkafka.logging=log4j1"] if log4j1(version) else [])
    done = subprocess.run(cmd, capture_output=True, text=True)
    wanted = [f"kafka_2.13-{version}.jar"] + ([f"connect-mirror-{version}.jar"] if mm2 else [])
    if done.returncode != 0 or not all((staging / jar).exists() for jar in wanted):
        shutil.rmtree(staging, ignore_errors=True)
        output = (done.stdout + done.stderr).strip().splitlines()
        missing = [line for line in output if "Could not find artifact" in line or "could not be resolved" in line]
        tail = "\n".join((missing or output)[-15:])
        raise KafkaRuntimeError(f"Maven could not fetch the Kafka {version} jars{' with MirrorMaker 2' if mm2 else ''} "
                                f"(exit {done.returncode}); "
                                f"{available()}\n{tail}")
    (staging / _STAMP).write_text(version + "\n")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)  # atomic: a folder with the stamp is always complete
    return target


def classpath(version: str | None = None, mm2: bool = False) -> str:
    return str(ensure_kafka_lib(version, mm2) / "*")  # the JVM expands the wildcard itself


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


def log4j1_config() -> Path:
    """The log4j 1 (reload4j) twin of :func:`log4j_config`, for the lines before 4.0."""
    path = paths.under_home("kafka") / "log4j.properties"
    lines = ["log4j.rootLogger=INFO, stdout", "log4j.appender.stdout=org.apache.log4j.ConsoleAppender",
             "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout",
             "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n"]
    lines += [f"log4j.logger.{logger}=WARN" for logger in _QUIET.values()]
    text = "\n".join(lines + [""])
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def java_command(main_class: str, *args: str, heap: str = "1g", extra_jvm: tuple[str, ...] = (),
                 short_lived: bool = False, version: str | None = None, mm2: bool = False) -> list[str]:
    """The command line that runs a Kafka main class on the fetched classpath (of ``version``; default:
    the pom's; ``mm2``: with that version's MirrorMaker 2). ``short_lived`` with quick_start(): QUICK_START_FLAGS instead of G1 and the full JIT.
    The Kafka class archive (jvmarchive.py) is mapped when ``make setup`` built it."""
    tuning = QUICK_START_FLAGS if short_lived and quick_start() else ("-XX:+UseG1GC",)
    old_logging = (f"-Dlog4j.configuration=file:{log4j1_config()}",) if version and log4j1(version) else ()
    lib = ensure_kafka_lib(version, mm2)
    return [java_binary(), f"-Xmx{heap}", *tuning, *jvmarchive.java_options(lib, main_class), "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j_config()}", *old_logging, *extra_jvm,
            "-cp", str(lib / "*"), main_class, *args]


TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"


def kafka_transactions(bootstrap: str, *args: str, timeout: float = 120,
                       version: str | None = None) -> subprocess.CompletedProcess:
    """``kafka-transactions.sh --bootstrap-server <bootstrap> <args>`` from the fetched jars (find-hanging,
    describe-producers, abort): what an operator runs against a transaction a broker left open."""
    command = java_command(TRANSACTIONS_COMMAND, "--bootstrap-server", bootstrap, *args, heap="256m", short_lived=True,
                           version=version)
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)
