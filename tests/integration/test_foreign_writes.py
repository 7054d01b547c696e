"""A foreign write on a mirrored target topic is caught at once (issue #51 item 3, core/foreign.py): the next
run refuses before it copies (exit 8) naming partition, offsets and producer id, the lag view says FOREIGN
and `promote` lists the records beside its loss report; a killed attempt of the mirror itself is not foreign."""

from __future__ import annotations

import pytest

from eosmirror.core.errors import EXIT_FOREIGN
from eosmirror.driver import lag, promote
from tests.helpers import (
    cli,
    create_topic,
    faults_env,
    mirror,
    producer,
    read_all,
    seed_sequence,
    values,
    write_mirror_file,
)
from tests.support.java import java_end_offsets
from tests.support.transactions import producer_id_of, producer_ids_on

pytestmark = pytest.mark.integration


def delivered_offsets(conf, topic: str, partition: int, payloads: list[bytes], **extra) -> list[int]:
    """Write ``payloads`` to ``topic[partition]`` (in one committed transaction when ``extra`` names a
    transactional.id); the offsets Kafka's delivery reports gave them."""
    offsets: list[int] = []
    p = producer(conf, **extra)
    transactional = "transactional.id" in extra
    if transactional:
        p.init_transactions(30)
        p.begin_transaction()
    for payload in payloads:
        p.produce(topic, value=payload, partition=partition,
                  on_delivery=lambda err, msg: offsets.append(msg.offset()) if err is None else None)
    assert p.flush(30) == 0
    if transactional:
        p.commit_transaction(30)
    assert len(offsets) == len(payloads)
    return sorted(offsets)


def mirrored_once(source_conf, unique, tmp_path, records: int):
    """A 2-partition topic with ``records`` per partition, mirrored once by a one-slot mirror (its CLI)."""
    topic = create_topic(source_conf, unique("fw"), partitions=2)
    seed_sequence(source_conf, topic, 2, records)
    m = mirror(unique("m"), [topic], slots=1)
    config_file = write_mirror_file(tmp_path / "mirrors.yaml", m)
    first = cli("run", m.name, "--config", str(config_file), "--inprocess")
    assert first.returncode == 0, first.stdout + first.stderr
    return topic, m, config_file


def test_a_foreign_write_between_runs_stops_the_next_run_naming_it(source_conf, target_conf, unique, tmp_path):
    topic, m, config_file = mirrored_once(source_conf, unique, tmp_path, 50)

    # Two applications write to the mirrored target topic: a plain (idempotent) producer on partition 0, a
    # transactional producer with its own transactional.id on partition 1.
    plain = delivered_offsets(target_conf, topic, 0, [b"plain-foreign"], **{"enable.idempotence": True})
    other_id = unique("other-app")
    txn = delivered_offsets(target_conf, topic, 1, [b"txn-foreign-1", b"txn-foreign-2"], **{"transactional.id": other_id})
    seed_sequence(source_conf, topic, 2, 20, prefix="more-")      # what the next run would copy
    ends = java_end_offsets(target_conf, topic)
    committed = {k: values(read_all(target_conf, topic, k)) for k in range(2)}

    refused = cli("run", m.name, "--config", str(config_file), "--inprocess")
    said = refused.stdout + refused.stderr
    assert refused.returncode == EXIT_FOREIGN, said
    assert f"{topic}[0]: 1 foreign record(s) at offset(s) {plain[0]} " in said
    assert f"{topic}[1]: 2 foreign record(s) at offset(s) {txn[0]}, {txn[1]} " in said
    mirror_pid = producer_id_of(target_conf, f"eosmirror.{m.name}.0")
    plain_pids = producer_ids_on(target_conf, topic, 0) - {mirror_pid}
    assert len(plain_pids) == 1, plain_pids
    assert f"producer id {plain_pids.pop()} epoch" in said and "(not the mirror's)" in said
    assert f"producer id {producer_id_of(target_conf, other_id)} epoch" in said
    # It copied nothing: the same committed records, the same ends (Kafka's GetOffsetShell).
    assert {k: values(read_all(target_conf, topic, k)) for k in range(2)} == committed
    assert java_end_offsets(target_conf, topic) == ends
    assert committed[0][-1] == b"plain-foreign" and committed[1][-2:] == [b"txn-foreign-1", b"txn-foreign-2"]

    status = lag.report(m)
    assert status.status == "FOREIGN", status
    assert {p.partition: p.status for p in status.partitions} == {0: "FOREIGN", 1: "FOREIGN"}
    assert f"the first at offset {plain[0]}" in status.partitions[0].reason

    outcome = promote.promote(m, by="test")
    report = outcome.as_dict()
    assert {(f["partition"], tuple(f["offsets"])) for f in report["foreign_records"]["foreign"]} == {
        (0, tuple(plain)), (1, tuple(txn))}
    assert any(s["name"] == "foreign records" and s["status"] == "ran" for s in report["steps"])
    assert any(f"{topic}[1]: 2 foreign record(s)" in line for line in report["foreign_report"])
    assert "3 record(s) on the target were not written by the mirror" in report["verdict"]


def test_a_killed_attempt_of_the_mirror_is_not_a_foreign_write(source_conf, target_conf, unique, tmp_path):
    """A slot killed inside its transaction leaves its records and, once the next run fences it, their
    abort marker beyond what the mirror accounts for: the next run reads them and copies on."""
    topic, m, config_file = mirrored_once(source_conf, unique, tmp_path, 40)
    seed_sequence(source_conf, topic, 2, 60, prefix="more-")
    killed = cli("run", m.name, "--config", str(config_file), "--inprocess",
                 env=faults_env({"point": "before_commit", "action": "kill", "once": str(tmp_path / "killed")}))
    assert killed.returncode == -9, killed.stdout + killed.stderr
    assert len(read_all(target_conf, topic, 0, read_committed=False)) == 100   # its records reached the log
    retry = cli("run", m.name, "--config", str(config_file), "--inprocess")
    said = retry.stdout + retry.stderr
    assert retry.returncode == 0, said
    assert "ForeignWriteError" not in said and "foreign record(s) at" not in said, said
    expected = {k: [f"{k}-{n}".encode() for n in range(40)] + [f"more-{k}-{n}".encode() for n in range(60)]
                for k in range(2)}
    assert {k: values(read_all(target_conf, topic, k)) for k in range(2)} == expected
    status = lag.report(m)
    assert all(p.status != "FOREIGN" for p in status.partitions), status
