"""The tests' judge of what a Kafka application sees: Kafka's own Java KafkaConsumer (from the project's
Kafka jars), read_committed, answering in ONE long-lived JVM per test session (java/Judge.java).

It replaces a ConsoleConsumer JVM per read, which cost ~1 CPU-second of JVM start plus its 6 s idle
``--timeout-ms`` before it ended: the judge reads until every assigned partition's position reaches its
end offset (under read_committed, the last stable offset) or a maximum of records, then, in a group,
commits as ConsoleConsumer's close does (the consumer's positions, those with untaken fetched records
sought back first). Positions, records and the committed offsets all come from Kafka's Java client.

The JVM is compiled once per source and classpath (cached under the temporary directory), started on
the first read, shared by the session's reads under a lock and closed at exit.
"""

from __future__ import annotations

import atexit
import base64
import fcntl
import hashlib
import os
import queue
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).with_name("java") / "Judge.java"
# The client's own logs at WARN, to standard error (the protocol owns standard output).
_LOG4J = """status = warn
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
"""
ANSWER_SLACK_S = 30     # beyond a read's own budget: the JVM's close and a stalled JVM's give-up


@dataclass
class Reading:
    """What the judge's consumer took, per partition (offset, value) in the order poll gave them, and the
    group's committed offsets read back from the broker after its commit (empty without a group)."""

    records: dict[int, list[tuple[int, str]]] = field(default_factory=dict)
    committed: dict[int, int] = field(default_factory=dict)

    def count(self) -> int:
        return sum(map(len, self.records.values()))


def _compiled(classpath: str) -> Path:
    """The directory holding Judge.class for this source and classpath (compiled once, shared by workers)."""
    key = hashlib.sha256(SOURCE.read_bytes() + classpath.encode() + _LOG4J.encode()).hexdigest()[:16]
    where = Path(tempfile.gettempdir()) / f"eosmirror-judge-{key}"
    if (where / "Judge.class").exists():
        return where
    assert shutil.which("javac"), ("no javac on PATH: the tests' judge compiles a small program against Kafka's "
                                   "jars; install a JDK 17 (the README's prerequisites)")
    with open(f"{where}.lock", "w") as lock:     # one worker compiles (~1.8 CPU-s); the others wait for it
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (where / "Judge.class").exists():
            return where
        build = Path(tempfile.mkdtemp(prefix="eosmirror-judge-build-"))
        done = subprocess.run(["javac", "-cp", classpath, "-d", str(build), str(SOURCE)],
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, f"javac {SOURCE} exited {done.returncode}: {done.stderr[-3000:]}"
        (build / "log4j2.properties").write_text(_LOG4J)
        build.rename(where)    # whole: a directory with Judge.class in it is complete
    return where


class _Judge:
    """One Judge JVM; reads one at a time (a lock), answers read by a thread into a queue so every wait
    for the JVM has a budget."""

    def __init__(self, classpath: str):
        from eosmirror_tools.kit import jvmarchive, runtime

        classes = _compiled(classpath)
        self.log_path = Path(tempfile.gettempdir()) / f"eosmirror-judge-{os.getpid()}.log"
        self.log = self.log_path.open("w")
        lib = runtime.ensure_kafka_lib()
        # the Kafka class archive (kit/jvmarchive.py) when setup built it; the JVM runs without it otherwise
        command = [runtime.java_binary(), "-Xmx256m", *runtime.QUICK_START_FLAGS,
                   *jvmarchive.java_options(lib, "Judge"), "-Djava.awt.headless=true",
                   f"-Dlog4j2.configurationFile={classes / 'log4j2.properties'}", "-cp", f"{classpath}:{classes}",
                   "Judge"]
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, encoding="utf-8")
        self.lock = threading.Lock()
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, name="judge-stdout", daemon=True).start()
        atexit.register(self.close)

    def _pump(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _log_tail(self) -> str:
        """The end of the JVM's standard error (the client's WARN and ERROR lines)."""
        return self.log_path.read_text(errors="replace")[-2000:] if self.log_path.exists() else "(no log)"

    def ask(self, fields: list[str], what: str, budget_s: float, take) -> int:
        """Send one request; each answer line but the last goes to ``take(kind, rest)``; returns the number the
        "end" line says. A client error, the JVM's end or silence past the budget raise AssertionError."""
        assert not any(("\t" in f or "\n" in f) for f in fields), "a tab or newline in a judge request"
        with self.lock:
            assert self.proc.stdin
            if self.proc.poll() is not None:
                raise AssertionError(f"{what}: the judge JVM had ended (exit {self.proc.returncode}): "
                                     f"{self._log_tail()}")
            self.proc.stdin.write("\t".join(fields) + "\n")
            self.proc.stdin.flush()
            give_up = budget_s + ANSWER_SLACK_S
            while True:
                try:
                    line = self.lines.get(timeout=give_up)
                except queue.Empty:
                    tail = self._log_tail()
                    self.close()
                    raise AssertionError(f"{what}: no answer within {give_up:.0f} s (the JVM stalled; stopped it); "
                                         f"its log: {tail}") from None
                if line is None:
                    self.proc.wait(30)
                    raise AssertionError(f"{what}: the judge JVM ended (exit {self.proc.returncode}); its log: "
                                         f"{self._log_tail()}")
                kind, _, rest = line.partition("\t")
                if kind == "end":
                    return int(rest)
                if kind == "error":
                    raise AssertionError(f"{what}: {rest}")
                take(kind, rest)

    def close(self) -> None:
        if self.proc.poll() is None:
            if self.proc.stdin:
                self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        self.log_path.unlink(missing_ok=True)    # a failure's message carried its tail already


def _summary(reading: Reading) -> str:
    return (f"{reading.count()} record(s), per partition (first, last offset) "
            f"{ {k: (r[0][0], r[-1][0]) for k, r in sorted(reading.records.items()) if r} }")


_judges: dict[str, _Judge] = {}
_judges_lock = threading.Lock()


def _judge() -> _Judge:
    """The session's judge for the project's Kafka jars (started on first use, again if it ended)."""
    from eosmirror_tools.kit import runtime

    classpath = runtime.classpath()
    with _judges_lock:
        judge = _judges.get(classpath)
        if judge is None or judge.proc.poll() is not None:
            judge = _judges[classpath] = _Judge(classpath)
        return judge


def judge_read(conf: dict[str, Any], topic: str, group: str | None, max_records: int | None = None,
               budget_s: float = 90) -> Reading:
    """Kafka's Java KafkaConsumer (read_committed) reads ``topic``: in ``group`` (subscribed: the group's
    committed offsets, the earliest where it has none) or, without one, every partition from the
    beginning; until each assigned partition's position reaches its end offset, or ``max_records``
    records. In a group it then commits as ConsoleConsumer's close does. Raises AssertionError (saying
    what it read so far) on any client error or when ``budget_s`` passes."""
    reading = Reading()

    def take(kind: str, rest: str) -> None:
        if kind == "r":
            partition, offset, value = rest.split("\t")
            text = "null" if value == "-" else base64.b64decode(value).decode("utf-8", errors="replace")
            reading.records.setdefault(int(partition), []).append((int(offset), text))
        elif kind == "c":
            partition, offset = rest.split("\t")
            reading.committed[int(partition)] = int(offset)
        else:
            raise AssertionError(f"the judge's read of {topic} answered {kind!r} {rest!r}")

    what = (f"the judge (Kafka's Java KafkaConsumer, read_committed) on {conf['bootstrap.servers']} topic {topic} "
            f"group {group or '(none)'}")
    fields = ["read", str(int(budget_s * 1000)), str(-1 if max_records is None else max_records), topic,
              group or "", f"bootstrap.servers={conf['bootstrap.servers']}"]
    try:
        count = _judge().ask(fields, what, budget_s, take)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; read so far: {_summary(reading)}") from None
    assert count == reading.count(), f"{what}: it said {count} records but sent {reading.count()}"
    return reading


def judge_ends(conf: dict[str, Any], topic: str, budget_s: float = 60) -> dict[int, int]:
    """Kafka's Java KafkaConsumer (read_uncommitted): each partition of ``topic`` and its latest offset (the
    high watermark; what GetOffsetShell --time -1 prints)."""
    ends: dict[int, int] = {}

    def take(kind: str, rest: str) -> None:
        assert kind == "e", f"the judge's ends of {topic} answered {kind!r} {rest!r}"
        partition, offset = rest.split("\t")
        ends[int(partition)] = int(offset)

    what = f"the judge (Kafka's Java KafkaConsumer) asking the end offsets of {topic} on {conf['bootstrap.servers']}"
    count = _judge().ask(["ends", str(int(budget_s * 1000)), topic, f"bootstrap.servers={conf['bootstrap.servers']}"],
                         what, budget_s, take)
    assert count == len(ends), f"{what}: it said {count} partitions but sent {len(ends)}"
    return ends
