"""The run server on a Spark standalone cluster: real master and worker, real brokers, the real CLI.

The slots run in the cluster's executors, not under the server's JVM, so they cannot see the
client's process: they hold the run's lease (spark/leases.py) as a connection to the server's driver.

1. Served runs copy exactly once, in the executors' Python workers (whose JVM is an executor's,
   not the server's).
2. A client killed while its slots hold open transactions: the server revokes the run's lease, the
   slots abort (LSO = HW on every target partition within the budget), the server serves on, and
   the next run copies every record exactly once.
"""

from __future__ import annotations

import pytest

from eosmirror.slot import lifeline
from tests.e2e.sparkcluster import spark_standalone  # noqa: F401 - a fixture
from tests.helpers import create_topic, seed_sequence
from tests.support.kill import PARTITIONS, RECORDS, expected
from tests.support.run_server import held_server, killed_client_ends_its_slots, mirror_file, served_run, target_values

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cluster_server(spark_standalone, tmp_path_factory):  # noqa: F811 - the fixture imported above
    conf = {"spark.executor.cores": "2", "spark.cores.max": "4", "spark.executor.memory": "512m"}
    yield from held_server(tmp_path_factory.mktemp("holds"), executor_env=True, master=spark_standalone, conf=conf)


def test_served_runs_copy_exactly_once_in_the_clusters_executors(cluster_server, source_conf, target_conf, unique,
                                                                 tmp_path):
    assert cluster_server["master"].startswith("spark://"), cluster_server
    topic = create_topic(source_conf, unique("srvc"), partitions=PARTITIONS)
    name = unique("m")
    config = mirror_file(tmp_path, name, topic)
    seed_sequence(source_conf, topic, PARTITIONS, RECORDS)
    result = served_run(name, config, tmp_path / "run.json")
    assert result["records"] == RECORDS * PARTITIONS, result
    assert target_values(target_conf, topic) == expected()
    for slot in result["slots"]:
        jvm = lifeline.jvm_ancestor(slot["attempt_pid"])
        assert jvm is not None and jvm.pid != cluster_server["jvm_pid"], (
            f"slot {slot['slot']} ran under the server's JVM ({jvm}), not in a cluster executor")
        with open(f"/proc/{jvm.pid}/cmdline", "rb") as f:
            assert b"CoarseGrainedExecutorBackend" in f.read(), f"slot {slot['slot']}'s JVM {jvm} is no executor"


def test_a_killed_client_ends_its_slots_on_the_cluster(cluster_server, source_conf, target_conf, unique, tmp_path):
    killed_client_ends_its_slots(cluster_server, source_conf, target_conf, unique, tmp_path, "standalone cluster")
