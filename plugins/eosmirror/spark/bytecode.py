"""Python zips that carry their bytecode: Spark's own (pyspark.zip, py4j) and the executor package.

Spark puts ``SPARK_HOME/python/lib/pyspark.zip`` and py4j's zip first on the path of every Python process
it starts (the spark-submit driver, the worker daemon and its workers), and eosmirror's executor zip
(``--py-files``) next; pip's pyspark ships those zips with sources only, and Python never writes
bytecode into a zip, so each of those processes compiled every module it imported, every run: about
0.4 s in the driver before it can ask for a SparkContext and as much in the worker daemon before the
first slot starts (figures: docs/results.md, "Spark's Python zips with their bytecode").

Invariants:
1. Never a correctness dependency. Each ``.pyc`` sits beside its ``.py`` (where zipimport looks first)
   and is hash-checked: zipimport compares it with the source's hash at import and uses the source
   when they differ, and it uses the source too when the ``.pyc`` is another Python version's (its
   magic number). The ``.py`` entries are copied byte for byte.
2. A zip is replaced by a rename of a complete file written beside it, never rewritten in place (uv
   installs by hard link into its cache: an in-place write would change the cache's copy too).
3. Compiling Spark's zips is part of ``eosmirror setup`` only; a read-only installation keeps them as
   they are (setup says what that costs) and every run still works.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

Entry = tuple[str, bytes, tuple[int, int, int, int, int, int]]   # name in the zip, content, its date_time


def pyc_of(name: str, source: bytes) -> bytes:
    """The hash-checked bytecode of ``source`` for this interpreter (invariant 1), in PEP 552's layout:
    the magic number, flags 0b11 (hash-based, checked), the source's hash, the marshalled code."""
    code = compile(source, name, "exec", dont_inherit=True)
    return (importlib.util.MAGIC_NUMBER + (0b11).to_bytes(4, "little") + importlib.util.source_hash(source)
            + marshal.dumps(code))


def zip_bytes(entries: list[Entry], compile_tests: bool = True) -> bytes:
    """A zip of ``entries`` (each ``.py`` deflated, as pip's zips are) with each module's ``.pyc`` beside it,
    stored: it is read at every import, so it is not inflated at every import either. A source that does
    not compile (a test fixture, another Python's syntax) goes in without bytecode."""
    import io

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as out:
        for name, content, date_time in entries:
            out.writestr(zipfile.ZipInfo(name, date_time), content, zipfile.ZIP_DEFLATED)
            if not name.endswith(".py") or (not compile_tests and "/tests/" in name):
                continue
            try:
                pyc = pyc_of(name, content)
            except (SyntaxError, ValueError):
                continue
            out.writestr(zipfile.ZipInfo(name + "c", date_time), pyc, zipfile.ZIP_STORED)
    return buffer.getvalue()


def sources(path: Path) -> list[Entry]:
    """Every entry of the zip at ``path`` but its ``.pyc`` files, in order."""
    with zipfile.ZipFile(path) as archive:
        return [(info.filename, archive.read(info), info.date_time) for info in archive.infolist()
                if not info.filename.endswith(".pyc")]


def has_current_bytecode(path: Path) -> bool:
    """Whether the zip at ``path`` holds ``.pyc`` files of this interpreter (their magic number)."""
    magic = importlib.util.MAGIC_NUMBER
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if info.filename.endswith(".pyc"):
                with archive.open(info) as pyc:
                    return pyc.read(len(magic)) == magic
    return False


def replace(path: Path, content: bytes) -> None:
    """Write ``content`` at ``path`` by renaming a complete file written beside it (invariant 2)."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        partial.write_bytes(content)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


@dataclass(frozen=True)
class Compiled:
    path: Path
    seconds: float        # 0.0: it already held this Python's bytecode
    modules: int


def spark_zips(spark_home: str) -> list[Path]:
    return sorted((Path(spark_home) / "python" / "lib").glob("*.zip"))


def compile_spark_zips(spark_home: str) -> list[Compiled]:
    """Give each of Spark's Python zips its bytecode (skipping pyspark's own test modules, never
    imported by a run). Raises OSError when a zip cannot be replaced (a read-only installation)."""
    done = []
    for path in spark_zips(spark_home):
        started = time.monotonic()
        with zipfile.ZipFile(path) as archive:
            modules = sum(1 for name in archive.namelist() if name.endswith(".py"))
        if has_current_bytecode(path):
            done.append(Compiled(path, 0.0, modules))
            continue
        replace(path, zip_bytes(sources(path), compile_tests=False))
        done.append(Compiled(path, time.monotonic() - started, modules))
    return done
