"""One cross-version cell of the broker matrix (issue #53; `make broker-matrix` runs all four): Kafka 2.8 with
ZooKeeper -> Kafka 4.4 (KRaft). A mirror under production with aborted transactions, judged by the oracle, by
Kafka 2.8's ConsoleConsumer on the source against Kafka 4.4's on the target and by 4.4's find-hanging; then an
exact group failover judged by Kafka 4.4's ConsoleConsumer in the moved group. And a version whose jars are
not served: refused naming the available ones, no jar folder left that a later start would trust, no broker.

Marked `brokers`: `make test` leaves it out (its clusters start two other Kafka versions, a ZooKeeper and the
jars' first fetch); CI runs it as its own step (.ci/run)."""

from __future__ import annotations

import pytest

from eosmirror_tools.brokers import cells
from eosmirror_tools.kit import cluster, runtime

pytestmark = [pytest.mark.integration, pytest.mark.brokers]


def test_kafka_2_8_with_zookeeper_to_4_4_exactly_once_and_exact_group_failover(tmp_path):
    row = cells.run_cell(cells.Cell("2.8", "4.4"), ("a", "b"), tmp_path)
    assert row["source_metadata"] == "ZooKeeper" and row["target_metadata"] == "KRaft", row
    assert row["ok"], row
    a, b = row["parts"]["a"], row["parts"]["b"]
    assert a["aborted"] > 0 and a["records_checked"] == a["committed"] == a["source_console"] == a["target_console"]
    assert a["find_hanging"] == "none", a
    assert len(b["first_on_target"]) == cells.PARTITIONS, b
    print(f"2.8 -> 4.4: start {row['start_s']} s, a {a['seconds']} s ({a['committed']} records, {a['aborted']} "
          f"aborted), b {b['seconds']} s; whole cell {row['seconds']} s")


def test_a_version_whose_jars_are_not_served_is_refused_and_leaves_nothing(tmp_path):
    missing = "3.9.99"    # a release of a known line that Maven Central does not have
    with pytest.raises(runtime.KafkaRuntimeError) as info:
        cluster.up([cluster.LocalCluster("brokers-refused", cells.base_port("source") + 10, version=missing)])
    text = str(info.value)
    assert f"could not fetch the Kafka {missing} jars" in text and "available: 2.8 (2.8.2, ZooKeeper)" in text, text
    lib = runtime.lib_dir(missing)
    assert not lib.exists() and not lib.with_name(lib.name + ".partial").exists()
    assert missing not in runtime.fetched()
    refused = cluster.LocalCluster("brokers-refused", cells.base_port("source") + 10, version=missing)
    assert cluster.running_pid(refused) is None and cluster.zookeeper_pid(refused) is None


def test_a_cluster_that_cannot_start_leaves_none_of_the_others_running(tmp_path):
    """`local up` of two clusters whose second cannot start (its port is held): the first, a 2.8 broker and
    its ZooKeeper already launched, is stopped again; nothing half-started stays behind."""
    import socket

    first = cluster.LocalCluster("brokers-half-a", cells.base_port("source") + 30, version="2.8.2")
    second = cluster.LocalCluster("brokers-half-b", cells.base_port("target") + 30, version="4.4.0")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", second.port))
        holder.listen()
        with pytest.raises(cluster.LocalClusterError, match=rf"ports? {second.port}\b"):
            cluster.up([first, second])
    assert first.zookeeper_log_file.exists() and first.log_file.exists()   # both of the first were launched
    assert not first.zookeeper_pid_file.exists() and not first.pid_file.exists()
    assert cluster.running_pid(first) is None and cluster.zookeeper_pid(first) is None
    assert cluster.running_pid(second) is None
    assert _processes_naming(first.dir) == [], "a process of the first cluster outlived the failed up()"


def _processes_naming(folder) -> list[int]:
    """Live processes whose command line names ``folder`` (a cluster's config files live there)."""
    from pathlib import Path

    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
                state = (proc / "stat").read_text().split()[2]
            except OSError:
                continue
            if str(folder) in cmdline and state != "Z":
                found.append(int(proc.name))
    return found
