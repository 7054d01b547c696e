"""The Spark class archive (spark/classarchive.py) and the Kafka one (the kit's jvmarchive.py): each one
`eosmirror setup` built is really mapped into a spark-submit JVM / a Kafka tool's JVM, and a JVM without
it loads nothing from it.

The JVM's own class-load log says where each class came from: "shared objects file (top)" is the
dynamic archive. No Kafka is needed: the archive's training job is the application."""

import subprocess

import pytest

from eosmirror.spark import classarchive, submit

pytestmark = pytest.mark.e2e


def sources_of_spark_classes(tmp_path, conf):
    log = tmp_path / "class-load.log"
    conf = dict(conf)
    conf["spark.driver.extraJavaOptions"] += f" -Xlog:class+load=info:file={log}"
    cmd = [submit.spark_submit_binary(), "--master", "local[1]",
           *[arg for key, value in sorted(conf.items()) for arg in ("--conf", f"{key}={value}")],
           str(classarchive.TRAINING_JOB)]
    done = subprocess.run(cmd, env=submit.process_env(), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = [line for line in log.read_text().splitlines() if " org.apache.spark.SparkContext " in line
             or " org.apache.spark.scheduler.DAGScheduler " in line]
    assert len(lines) == 2, lines
    return lines


def test_setup_built_the_archive_and_a_submit_maps_the_spark_driver_classes_from_it(tmp_path):
    path = classarchive.archive_path(submit.process_env()["SPARK_HOME"])
    assert path is not None and path.exists(), f"`eosmirror setup` (make setup) should have built {path}"
    conf = {**submit.base_conf("class-archive-test"), "spark.ui.enabled": "false"}

    with_archive = submit.with_class_archive(conf)
    assert f"-XX:SharedArchiveFile={path}" in with_archive["spark.driver.extraJavaOptions"]
    assert all("shared objects file (top)" in line for line in sources_of_spark_classes(tmp_path, with_archive))

    without = sources_of_spark_classes(tmp_path, conf)
    assert not any("shared objects file" in line for line in without)


def test_a_mirror_that_sets_its_own_java_options_keeps_them(tmp_path):
    conf = submit.spark_conf({"spark.driver.extraJavaOptions": "-Xss4m"}, "own-options")
    assert submit.with_class_archive(conf)["spark.driver.extraJavaOptions"] == "-Xss4m"


def test_no_archive_for_another_spark_or_jdk_means_no_option(tmp_path, monkeypatch):
    monkeypatch.setenv("EOSMIRROR_CACHE_DIR", str(tmp_path / "empty-cache"))
    conf = submit.base_conf("no-archive")
    assert submit.with_class_archive(conf) == conf


def test_setup_built_the_kafka_archive_and_a_kafka_tool_maps_the_brokers_classes_from_it(tmp_path):
    """The Kafka class archive (tools' kit/jvmarchive.py): a tool's JVM as the kit starts it loads the
    broker's and the client's classes from it; the same JVM without the option reads them from the jars."""
    from eosmirror_tools.kit import jvmarchive, runtime

    lib = runtime.ensure_kafka_lib()
    path = jvmarchive.archive_path(lib)
    assert path is not None and path.exists(), f"`eosmirror setup` (make setup) should have built {path}"
    cmd = runtime.java_command("kafka.Kafka", "--version", heap="256m", short_lived=True)
    assert f"-XX:SharedArchiveFile={path}" in cmd, cmd

    def sources(command: list[str]) -> list[str]:
        log = tmp_path / "class-load.log"
        log.unlink(missing_ok=True)
        done = subprocess.run([command[0], f"-Xlog:class+load=info:file={log}", *command[1:]], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0 and runtime.kafka_version() in done.stdout, done.stdout + done.stderr
        lines = [line for line in log.read_text().splitlines()
                 if " kafka.Kafka " in line or " org.apache.kafka.common.utils.AppInfoParser " in line]
        assert len(lines) == 2, lines
        return lines

    assert all("shared objects file (top)" in line for line in sources(cmd))
    without = [arg for arg in cmd if not arg.startswith("-XX:SharedArchiveFile=")]
    assert not any("shared objects file" in line for line in sources(without))
