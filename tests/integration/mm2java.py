"""The small Java programs of tests/integration/java, compiled against the project's Kafka jars and
run with the JDK the project already uses (Java 17): MirrorMaker 2's own code answers the questions."""

from __future__ import annotations

import atexit
import shutil
import subprocess
import threading
from pathlib import Path

JAVA_DIR = Path(__file__).with_name("java")
SOURCES = ("LoadProperties.java", "MM2Selection.java", "PasswordKeys.java")


def compile_helpers(into: Path) -> str:
    """Compile the helpers into ``into``; the classpath to run them with."""
    from eosmirror_tools.kit import runtime

    assert shutil.which("javac"), ("no javac on PATH: these checks compile small programs against Kafka's jars; "
                                   "install a JDK 17 (the README's prerequisites)")
    classpath = runtime.classpath()
    compiled = subprocess.run(["javac", "-cp", classpath, "-d", str(into), *(str(JAVA_DIR / s) for s in SOURCES)],
                              capture_output=True, text=True, timeout=180)
    assert compiled.returncode == 0, compiled.stderr[-3000:]
    return f"{classpath}:{into}"


def java(classpath: str, main: str, *args: str) -> list[str]:
    """A short-lived JVM's command line: C1 only and the serial collector, as the kit's short-lived tools."""
    from eosmirror_tools.kit import runtime

    return ["java", *runtime.QUICK_START_FLAGS, "-cp", classpath, main, *args]


def run(classpath: str, main: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(java(classpath, main, *args), input=stdin, capture_output=True, text=True, timeout=120)


class _Selection:
    """One MM2Selection JVM for every flow asked with the same classpath (a JVM start is ~3 s of CPU)."""

    def __init__(self, classpath: str):
        self.proc = subprocess.Popen(java(classpath, "org.apache.kafka.connect.mirror.MM2Selection"),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lock = threading.Lock()
        atexit.register(self.close)

    def ask(self, properties: Path, source: str, target: str, lines: list[str]) -> list[str]:
        with self.lock:
            assert self.proc.stdin and self.proc.stdout
            self.proc.stdin.write(f"flow {properties}\t{source}\t{target}\n" + "".join(f"{x}\n" for x in lines)
                                  + "end\n")
            self.proc.stdin.flush()
            answers = []
            while (line := self.proc.stdout.readline()) != "end\n":
                if not line:       # the JVM ended: an exception in MM2's code for this flow
                    self.proc.wait(30)
                    raise AssertionError(f"MM2Selection ended (exit {self.proc.returncode}) on {properties}: "
                                         f"{self.proc.stderr.read()[-3000:] if self.proc.stderr else ''}")
                answers.append(line.rstrip("\n"))
            return answers

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


_selections: dict[str, _Selection] = {}


def mm2_selects(classpath: str, properties: Path, source: str, target: str,
                names: dict[str, list[str]]) -> dict[str, set[str]]:
    """What MM2 selects of ``names`` ({"topic": [...], "group": [...], "config": [...]}) for one flow."""
    selection = _selections.get(classpath) or _selections.setdefault(classpath, _Selection(classpath))
    answers = selection.ask(properties, source, target, [f"{kind} {name}" for kind, items in names.items()
                                                         for name in items])
    chosen: dict[str, set[str]] = {kind: set() for kind in names}
    for line in answers:
        kind, name, verdict = line.split(" ")
        if verdict == "true":
            chosen[kind].add(name)
    assert len(answers) == sum(map(len, names.values())), answers[-20:]
    return chosen
