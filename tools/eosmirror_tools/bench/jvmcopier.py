"""The lean JVM exactly-once copier (``java/TxCopier.java``): the ceiling that counts for a copier.

ProducerPerformance measures producing only; a mirror must also consume, and commit its positions in
each transaction. TxCopier does exactly that and nothing more, with Kafka's own Java clients from
var/kafka-lib: per slot a read_committed consumer and a transactional producer, records sent to the
same partition with key, value, headers and timestamp, ``sendOffsetsToTransaction`` + commit every
``transaction_ms`` (eosmirror's ``max_transaction_seconds``), the same slot count and producer
batching as eosmirror's slots. It is compiled at bench time with the JDK the project already needs.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eosmirror_tools.kit.processes import ChildRun

SOURCE = Path(__file__).with_name("java") / "TxCopier.java"
MAIN_CLASS = "TxCopier"


def compiled(work: Path) -> Path:
    """The folder with TxCopier.class, compiled once per source version (javac from the JDK on PATH)."""
    from eosmirror_tools.kit import runtime

    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    folder = work / "jvmcopier" / digest
    if (folder / f"{MAIN_CLASS}.class").exists():
        return folder
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("javac is not on PATH: the JVM copier is compiled at bench time; install a JDK 17")
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([javac, "-cp", runtime.classpath(), "-d", str(folder), str(SOURCE)], capture_output=True,
                          text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"javac failed on {SOURCE}:\n{done.stderr[-2000:]}")
    return folder


def command(classes: Path, source: str, target: str, topic: str, partitions: int, slots: int,
            transaction_ms: int, ends: dict[int, int], result_json: Path) -> list[str]:
    from eosmirror_tools.kit import runtime

    return [runtime.java_binary(), "-Xmx1g", "-XX:+UseG1GC", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={runtime.log4j_config()}", "-cp", f"{runtime.classpath()}:{classes}",
            MAIN_CLASS, source, target, topic, str(partitions), str(slots), str(transaction_ms),
            ",".join(str(ends[p]) for p in range(partitions)), str(result_json)]


def run(source: str, target: str, topic: str, partitions: int, slots: int, transaction_ms: int,
        ends: dict[int, int], work: Path, timeout: float) -> ChildRun:
    from eosmirror_tools.kit import measured
    from eosmirror_tools.kit.processes import ChildRun

    classes = compiled(work)
    result_json = work / f"{topic}.jvmcopier.json"
    result_json.unlink(missing_ok=True)
    with measured.child(command(classes, source, target, topic, partitions, slots, transaction_ms, ends, result_json),
                      work / "logs" / f"{topic}.jvmcopier.log") as child:
        code = child.wait(timeout)
    result = json.loads(result_json.read_text()) if result_json.exists() else {}
    return ChildRun(exit_code=code, result=result, wall_seconds=child.seconds, peak=child.peak, cpu=child.cpu())
