"""The small Java programs of tests/integration/java, compiled against the project's Kafka jars and
run with the JDK the project already uses (Java 17): MirrorMaker 2's own code answers the questions."""

from __future__ import annotations

import shutil
import subprocess
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


def run(classpath: str, main: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(["java", "-cp", classpath, main, *args], input=stdin, capture_output=True, text=True,
                          timeout=120)


def mm2_selects(classpath: str, properties: Path, source: str, target: str,
                names: dict[str, list[str]]) -> dict[str, set[str]]:
    """What MM2 selects of ``names`` ({"topic": [...], "group": [...], "config": [...]}) for one flow."""
    lines = "".join(f"{kind} {name}\n" for kind, items in names.items() for name in items)
    ran = run(classpath, "org.apache.kafka.connect.mirror.MM2Selection", str(properties), source, target, stdin=lines)
    assert ran.returncode == 0, ran.stderr[-3000:]
    chosen: dict[str, set[str]] = {kind: set() for kind in names}
    answered = 0
    for line in ran.stdout.splitlines():
        kind, name, verdict = line.split(" ")
        answered += 1
        if verdict == "true":
            chosen[kind].add(name)
    assert answered == sum(map(len, names.values())), ran.stdout[-2000:]
    return chosen
