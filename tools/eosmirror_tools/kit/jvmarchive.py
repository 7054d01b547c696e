"""A class-data-sharing archive of the Kafka JVMs' classes: the local brokers and every Kafka tool the
kit runs (ConsoleConsumer, GetOffsetShell, kafka-transactions, the storage format) map the classes a
broker loaded from one file instead of reading and verifying them from the jars again.

Measured on this project's 2-core machine (Kafka 4.3.1, Java 17, the suite's quick-start flags): a
broker's start 2.25 -> 1.25 s of CPU and 4.2 -> 2.2 s until it answers; kafka-transactions 0.93 ->
0.58 s of CPU; ConsoleConsumer 1.14 -> 0.79 s. ``make test`` starts about 35 brokers and 100 tools. The
benchmarks' MirrorMaker 2 (the default release's folder holds it) maps it too: a start-up gain for the peer,
none for eosmirror (whose Spark driver has an archive of its own).

Invariants (those of the Spark driver's archive, eosmirror/spark/classarchive.py, whose key and cache
this shares):
1. Never a correctness dependency: the JVM checks the archive against its own build and the class path
   and runs without it when they differ (``-Xlog:cds=off`` keeps that out of the tools' output, which
   tests read); a missing archive is not offered at all.
2. One archive per Kafka jar folder, keyed by the java binary and the jars: another JDK or another
   release (or another release's MirrorMaker 2 folder) never even sees it.
3. Built only by ``eosmirror setup`` (cluster.ensure_class_archive): a broker of its own, started with
   ``-XX:ArchiveClassesAtExit`` and stopped (SIGTERM: the JVM writes the archive on its way out), then
   checked by a JVM that maps it and loads ``kafka.Kafka`` from it, then renamed into place. A JVM never
   maps half a file.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
from pathlib import Path
from typing import Iterator

from eosmirror.spark import classarchive

QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
CHECK_TIMEOUT = 120
_training: Path | None = None     # set while ensure() runs its broker: that JVM writes, not maps


def archive_path(lib: Path) -> Path | None:
    key = classarchive.jvm_key(lib)
    return classarchive.cache_dir() / f"kafka-{lib.name}-{key}.jsa" if key else None


def java_options(lib: Path, main_class: str) -> tuple[str, ...]:
    """The options a Kafka JVM on ``lib``'s jars starts with: map the archive when it is built."""
    if _training is not None and main_class == "kafka.Kafka":
        return (f"-XX:ArchiveClassesAtExit={_training}", *QUIET)
    path = archive_path(lib)
    return (f"-XX:SharedArchiveFile={path}", *QUIET) if path is not None and path.exists() else ()


@contextlib.contextmanager
def training(partial: Path) -> Iterator[None]:
    """While this lasts, a broker the kit launches writes its loaded classes to ``partial`` at exit."""
    global _training
    _training = partial
    try:
        yield
    finally:
        _training = None


def install(partial: Path, path: Path, lib: Path, java: str, classpath: str) -> None:
    """Invariant 3: a JVM that maps ``partial`` must load ``kafka.Kafka`` from it; only then is it renamed to
    ``path`` (and the archives of earlier jar sets of this folder removed). RuntimeError says what failed."""
    loads = path.with_suffix(f".{os.getpid()}.loads")
    try:
        if not partial.exists():
            raise RuntimeError(f"the training broker stopped but wrote no archive at {partial}")
        check = [java, f"-XX:SharedArchiveFile={partial}", *QUIET, f"-Xlog:class+load=info:file={loads}", "-cp",
                 classpath, "kafka.Kafka", "--version"]
        done = subprocess.run(check, capture_output=True, text=True, timeout=CHECK_TIMEOUT)
        mapped = loads.exists() and any("kafka.Kafka " in line and "shared objects file (top)" in line
                                        for line in loads.read_text(errors="replace").splitlines())
        if done.returncode != 0 or not mapped:
            raise RuntimeError(f"the check run did not load kafka.Kafka from the new archive (exit {done.returncode}): "
                               f"{(done.stdout + done.stderr)[-800:]}")
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
        loads.unlink(missing_ok=True)
    for old in classarchive.cache_dir().glob(f"kafka-{lib.name}-*.jsa"):   # of an earlier JDK or jar set
        if old != path:
            old.unlink(missing_ok=True)


def free_port_pair() -> int:
    """A port whose next port is free too (the broker's listener and its controller's)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        with socket.socket() as next_one:
            try:
                next_one.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two free neighbouring ports on 127.0.0.1 for the class archive's training broker")
