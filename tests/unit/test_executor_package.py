"""What executors receive on --py-files: the slot copy and what it stands on, nothing else."""

import subprocess
import sys
import zipfile

from eosmirror.spark import submit


def test_executor_zip_holds_core_kafka_and_slot_only(tmp_path, monkeypatch):
    monkeypatch.setenv("EOSMIRROR_HOME", str(tmp_path))
    names = zipfile.ZipFile(submit.package_zip()).namelist()
    packages = {n.split("/")[1] for n in names if n.count("/") >= 2}
    assert packages == {"core", "kafka", "slot"}, sorted(names)
    assert "eosmirror/slot/copier.py" in names and "eosmirror/__init__.py" in names
    assert not [n for n in names if any(part in n for part in ("bench", "chaos", "local", "demo", "airflow",
                                                                 "driver", "spark/"))]


def test_executor_zip_is_self_contained(tmp_path, monkeypatch):
    """Import the executor entry point from the zip alone: no site-packages (-S), no checkout; from its
    bytecode, which this interpreter accepts (its magic number, the source's hash)."""
    monkeypatch.setenv("EOSMIRROR_HOME", str(tmp_path))
    archive = submit.package_zip()
    code = (f"import sys; sys.path[:] = [{str(archive)!r}] + [p for p in sys.path if 'site-packages' not in p "
            f"and 'plugins' not in p and p]; import eosmirror.slot.copier as c; print(c.__file__); "
            f"print(callable(c.run_slot))")
    done = subprocess.run([sys.executable, "-S", "-I", "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{archive}/eosmirror/slot/copier.pyc", "True"]


def test_executor_zip_is_rebuilt_only_when_the_code_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("EOSMIRROR_HOME", str(tmp_path))
    first = submit.package_zip()
    stamp = first.stat().st_mtime_ns
    assert submit.package_zip().stat().st_mtime_ns == stamp
