"""Zips with their bytecode (spark/bytecode.py): imported from the .pyc when it is this Python's and
matches its source, from the source otherwise; replaced only by a rename."""

import subprocess
import sys
import zipfile

from eosmirror.spark import bytecode

STAMP = (2020, 1, 1, 0, 0, 0)


def import_from(archive, module):
    """``module`` imported in a fresh interpreter with only ``archive`` added to its path: (file, answer)."""
    code = f"import sys; sys.path.insert(0, {str(archive)!r}); import {module} as m; print(m.__file__); print(m.ANSWER)"
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def write(path, entries):
    bytecode.replace(path, bytecode.zip_bytes(entries))
    return path


def test_a_module_is_imported_from_its_bytecode(tmp_path):
    archive = write(tmp_path / "lib.zip", [("pkg/__init__.py", b"", STAMP), ("pkg/mod.py", b"ANSWER = 42\n", STAMP)])
    assert import_from(archive, "pkg.mod") == [f"{archive}/pkg/mod.pyc", "42"]
    assert bytecode.has_current_bytecode(archive)


def zip_with_pyc(archive, source: bytes, pyc: bytes):
    """A zip of package ``pkg`` whose module ``mod`` has ``source`` and, beside it, ``pyc``."""
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("pkg/__init__.py", b"")
        out.writestr("pkg/mod.py", source)
        out.writestr("pkg/mod.pyc", pyc)
    return archive


def test_bytecode_that_does_not_match_its_source_is_ignored(tmp_path):
    """A .pyc compiled from other source (hash-checked) never runs: the source does."""
    archive = zip_with_pyc(tmp_path / "lib.zip", b"ANSWER = 2\n", bytecode.pyc_of("pkg/mod.py", b"ANSWER = 1\n"))
    assert import_from(archive, "pkg.mod") == [f"{archive}/pkg/mod.py", "2"]


def test_another_pythons_bytecode_is_ignored_and_recompiled(tmp_path):
    """Another interpreter's magic number: the source is imported, and setup compiles the zip again."""
    foreign = b"\x00\x00\r\n" + bytecode.pyc_of("pkg/mod.py", b"ANSWER = 3\n")[4:]
    archive = zip_with_pyc(tmp_path / "lib.zip", b"ANSWER = 3\n", foreign)
    assert import_from(archive, "pkg.mod") == [f"{archive}/pkg/mod.py", "3"]
    assert not bytecode.has_current_bytecode(archive)


def test_spark_zips_are_compiled_once_with_sources_kept_byte_for_byte(tmp_path):
    lib = tmp_path / "python" / "lib"
    lib.mkdir(parents=True)
    sources = [("pyspark/__init__.py", b"ANSWER = 'spark'\n", STAMP), ("pyspark/tests/test_x.py", b"X = 1\n", STAMP),
               ("pyspark/broken.py", b"def (:\n", STAMP), ("pyspark/data.txt", b"not python", STAMP)]
    with zipfile.ZipFile(lib / "pyspark.zip", "w", zipfile.ZIP_DEFLATED) as out:
        for name, content, stamp in sources:
            out.writestr(zipfile.ZipInfo(name, stamp), content)
    first = bytecode.compile_spark_zips(str(tmp_path))
    assert [(c.path.name, c.modules, c.seconds > 0) for c in first] == [("pyspark.zip", 3, True)]
    names = zipfile.ZipFile(lib / "pyspark.zip").namelist()
    assert "pyspark/__init__.pyc" in names
    assert "pyspark/tests/test_x.pyc" not in names and "pyspark/broken.pyc" not in names   # never imported; no code
    assert bytecode.sources(lib / "pyspark.zip") == sources
    assert import_from(lib / "pyspark.zip", "pyspark") == [f"{lib}/pyspark.zip/pyspark/__init__.pyc", "spark"]
    assert [c.seconds for c in bytecode.compile_spark_zips(str(tmp_path))] == [0.0]   # this Python's already


def test_a_zip_is_replaced_by_rename_so_a_hard_link_keeps_the_original(tmp_path):
    """uv installs by hard link into its cache: compiling must not write through the link."""
    original = tmp_path / "cache.zip"
    with zipfile.ZipFile(original, "w") as out:
        out.writestr("m.py", b"ANSWER = 5\n")
    before = original.read_bytes()
    lib = tmp_path / "home" / "python" / "lib"
    lib.mkdir(parents=True)
    (lib / "m.zip").hardlink_to(original)
    bytecode.compile_spark_zips(str(tmp_path / "home"))
    assert original.read_bytes() == before
    assert "m.pyc" in zipfile.ZipFile(lib / "m.zip").namelist()
    assert not list(lib.glob(".*partial"))
