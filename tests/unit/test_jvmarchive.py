"""The Kafka class archive's options (the kit's jvmarchive.py): offered only when built for exactly
these jars and this JDK; the training broker writes one instead of mapping it."""

from pathlib import Path

import pytest

from eosmirror.spark import classarchive
from eosmirror_tools.kit import jvmarchive


@pytest.fixture
def lib(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("EOSMIRROR_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "4.3.1"
    folder.mkdir()
    (folder / "kafka-clients-4.3.1.jar").write_bytes(b"jar")
    return folder


def test_nothing_is_offered_until_the_archive_of_these_jars_exists(lib):
    assert jvmarchive.java_options(lib, "kafka.Kafka") == ()
    path = jvmarchive.archive_path(lib)
    path.write_bytes(b"archive")
    assert jvmarchive.java_options(lib, "kafka.tools.StorageTool") == (f"-XX:SharedArchiveFile={path}", *jvmarchive.QUIET)


def test_another_jar_set_has_another_archive(lib):
    before = jvmarchive.archive_path(lib)
    (lib / "kafka-tools-4.3.1.jar").write_bytes(b"another jar")
    assert jvmarchive.archive_path(lib) != before and jvmarchive.archive_path(lib).name.startswith("kafka-4.3.1-")


def test_the_training_broker_writes_the_archive_and_tools_beside_it_map_nothing_half_written(lib, monkeypatch, tmp_path):
    partial = tmp_path / "x.partial"
    monkeypatch.setattr(jvmarchive, "_training", partial)
    assert jvmarchive.java_options(lib, "kafka.Kafka") == (f"-XX:ArchiveClassesAtExit={partial}", *jvmarchive.QUIET)
    assert jvmarchive.java_options(lib, "org.apache.kafka.tools.TransactionsCommand") == ()


def test_without_java_there_is_no_archive(lib, monkeypatch):
    monkeypatch.setattr(classarchive, "java_binary", lambda: None)
    assert jvmarchive.archive_path(lib) is None and jvmarchive.java_options(lib, "kafka.Kafka") == ()
