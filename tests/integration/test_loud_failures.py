"""Loud, not silent (issue 10): start_from only on a topic's first mirroring; verify finds records on
the target that the mirror did not write, and reports mirrored ranges the source (or target) no
longer holds instead of crashing. Real brokers throughout."""

import re

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from eosmirror.core import planning
from eosmirror.core.errors import ForeignWriteError
from eosmirror.driver import verify
from tests.helpers import (
    cli,
    create_topic,
    mirror,
    producer,
    read_all,
    run,
    seed_sequence,
    transactional_batches,
    values,
    write_mirror_file,
)

pytestmark = pytest.mark.integration


def committed_values(conf, topic, partition):
    return values(read_all(conf, topic, partition))


def plan_of(report, topic, partition):
    return next(p for p in report["plan"] if p["source_topic"] == topic and p["partition"] == partition)


def cli_verify(m, tmp_path):
    config_file = write_mirror_file(tmp_path / "mirrors.yaml", m)
    result = cli("verify", m.name, "--config", str(config_file), timeout=240)
    return result.returncode, result.stdout + result.stderr


def test_a_partition_added_to_a_mirrored_topic_is_copied_whole_under_start_from_latest(source_conf, target_conf,
                                                                                      unique, tmp_path):
    topic = create_topic(source_conf, unique("grow"), partitions=2)
    seed_sequence(source_conf, topic, 2, 10)
    m = mirror(unique("m"), [topic], start_from="latest")
    assert run(m)["records"] == 0                       # the topic's first mirroring: "latest" = from now on
    seed_sequence(source_conf, topic, 2, 5, prefix="b")
    assert run(m)["records"] == 10
    admin = AdminClient(source_conf)     # kept referenced: a destroyed client fails its futures
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(30)
    # The acceptance run's case: committed records (and an aborted batch) land in the new partition
    # before the next run; start_from: latest resolved at that moment would skip all of them.
    transactional_batches(source_conf, topic, unique("tx"), [(True, [b"p2-%d" % n for n in range(100)]),
                                                             (False, [b"aborted"] * 20),
                                                             (True, [b"p2-%d" % n for n in range(100, 162)])],
                          partition=2)
    seed_sequence(source_conf, topic, 3, 4, prefix="c")
    report = run(m)
    assert report["status"] == "ok", report["errors"]
    new = plan_of(report, topic, 2)
    assert (new["start"], new["origin"], new["lost"]) == (0, planning.ORIGIN_NEW_PARTITION, 0), new
    assert {plan_of(report, topic, k)["origin"] for k in (0, 1)} == {planning.ORIGIN_PROGRESS}
    assert report["records"] == 162 + 4 + 2 * 4
    source_p2 = committed_values(source_conf, topic, 2)
    assert len(source_p2) == 166 and committed_values(target_conf, topic, 2) == source_p2
    for k in (0, 1):
        assert committed_values(target_conf, topic, k) == committed_values(source_conf, topic, k)[10:]
    rc, out = cli_verify(m, tmp_path)
    assert rc == 0 and "all identical" in out, out


def test_a_topic_that_starts_matching_later_is_a_first_mirroring(source_conf, target_conf, unique):
    """Documented rule: a topic the mirror never copied gets start_from when it first matches `topics`."""
    stem = unique("late")
    first = create_topic(source_conf, f"{stem}.a")
    seed_sequence(source_conf, first, 1, 3)
    m = mirror(unique("m"), [], patterns=[re.escape(stem) + r"\..*"], start_from="latest")
    assert run(m)["records"] == 0
    later = create_topic(source_conf, f"{stem}.b", partitions=2)
    seed_sequence(source_conf, later, 2, 20)
    report = run(m)
    assert report["status"] == "ok" and report["records"] == 0
    assert [(plan_of(report, later, k)["start"], plan_of(report, later, k)["origin"]) for k in (0, 1)] == [
        (20, planning.ORIGIN_START_FROM)] * 2
    seed_sequence(source_conf, later, 2, 2, prefix="new")
    seed_sequence(source_conf, first, 1, 1, prefix="new")
    assert run(m)["records"] == 2 * 2 + 1
    assert [committed_values(target_conf, later, k) for k in (0, 1)] == [[b"new0-0", b"new0-1"], [b"new1-0", b"new1-1"]]
    assert committed_values(target_conf, first, 0) == [b"new0-0"]


def test_verify_names_records_written_straight_to_the_target_after_the_mirrored_range(source_conf, target_conf,
                                                                                      unique, tmp_path):
    topic = create_topic(source_conf, unique("after"))
    seed_sequence(source_conf, topic, 1, 10)
    m = mirror(unique("m"), [topic], slots=1)
    assert run(m)["records"] == 10
    rc, out = cli_verify(m, tmp_path)
    assert rc == 0 and "verified 1 partitions, 10 records: all identical" in out, out
    last = read_all(target_conf, topic)[-1]
    planter = producer(target_conf)
    planter.produce(topic, key=last.key, value=last.value, headers=list(last.headers), timestamp=last.timestamp,
                    partition=0)                                            # a duplicate of the last record
    planter.produce(topic, value=b"planted:ABORTED", partition=0)
    assert planter.flush(30) == 0
    planted = [r.offset for r in read_all(target_conf, topic)[-2:]]
    rc, out = cli_verify(m, tmp_path)
    assert rc == 1, out
    assert ("2 record(s) on the target that no offset sync of the mirror accounts for: 0 before the first mirrored "
            "record (target offset 0), 0 between mirrored records, 2 after the last one") in out, out
    assert f"target offsets {planted[0]}, {planted[1]}." in out and "planted:ABORTED" in out, out
    assert "1 partition(s) differ (2 foreign record(s) on the target)" in out, out


def test_verify_names_records_written_to_the_target_before_and_between_the_mirror_s_copies(source_conf, target_conf,
                                                                                          unique, tmp_path):
    topic = create_topic(source_conf, unique("before"))
    create_topic(target_conf, topic)                     # identity naming: the mirror's target topic
    planter = producer(target_conf)
    planter.produce(topic, value=b"there before the mirror", partition=0)
    assert planter.flush(30) == 0
    seed_sequence(source_conf, topic, 1, 5)
    m = mirror(unique("m"), [topic], slots=1)
    assert run(m)["records"] == 5
    planter.produce(topic, value=b"between two runs", partition=0)
    assert planter.flush(30) == 0
    seed_sequence(source_conf, topic, 1, 3, prefix="b")
    between = read_all(target_conf, topic)[-1].offset
    with pytest.raises(ForeignWriteError, match=re.escape(f"1 foreign record(s) at offset(s) {between} ")):
        run(m)        # the next run refuses it (the one before the mirror's first copy is not judged) ...
    assert run(m, accept_foreign=True)["records"] == 3   # ... unless accepted: the copy lands after it
    on_target = read_all(target_conf, topic)
    foreign = [r.offset for r in on_target if r.value in (b"there before the mirror", b"between two runs")]
    assert len(on_target) == 10 and foreign[0] == 0
    checks = verify.verify(m)
    assert [(c.foreign, c.records) for c in checks] == [(2, 8)]
    assert checks[0].differences[0].startswith(
        "2 record(s) on the target that no offset sync of the mirror accounts for: 1 before the first mirrored "
        "record (target offset 1), 1 between mirrored records, 0 after the last one"), checks[0].differences
    assert f"target offsets {foreign[0]}, {foreign[1]}." in checks[0].differences[0]
    assert verify.exit_code(checks) == 1
    rc, out = cli_verify(m, tmp_path)
    assert rc == 1 and "between two runs" in out, out


def test_verify_reports_ranges_deleted_since_they_were_mirrored_and_checks_the_rest(source_conf, target_conf,
                                                                                   unique, tmp_path):
    topic = create_topic(source_conf, unique("gone"), partitions=2)
    seed_sequence(source_conf, topic, 2, 30)
    m = mirror(unique("m"), [topic], slots=1)
    assert run(m)["records"] == 60
    # Retention (here delete-records) removes mirrored data: on the source in partition 0, on the target in 1.
    gone_source, gone_target = TopicPartition(topic, 0, 20), TopicPartition(topic, 1, 12)
    source_admin, target_admin = AdminClient(source_conf), AdminClient(target_conf)   # kept referenced
    source_admin.delete_records([gone_source])[gone_source].result(30)
    target_admin.delete_records([gone_target])[gone_target].result(30)
    checks = {c.partition: c for c in verify.verify(m)}
    assert all(c.ok for c in checks.values()), [c.differences for c in checks.values()]
    assert (checks[0].source_gone, checks[0].target_gone, checks[0].records) == (20, 0, 10)
    assert checks[0].unchecked == [f"source offsets 0..19 are no longer on the source (retention or delete-records on "
                                   f"{topic}): 20 mirrored offsets cannot be compared"]
    assert (checks[1].source_gone, checks[1].target_gone, checks[1].records) == (0, 12, 18)
    assert "target offsets 0..11 are no longer on the target" in checks[1].unchecked[0]
    assert verify.exit_code(list(checks.values())) == verify.EXIT_INCOMPLETE == 3
    rc, out = cli_verify(m, tmp_path)
    # 3 once cli.py's _verify returns verify.exit_code(checks); before that change the CLI says 0.
    assert rc == 3 and "Traceback" not in out and "_AUTO_OFFSET_RESET" not in out, out
    assert "not checkable: source offsets 0..19" in out and "32 mirrored offsets could not be checked" in out, out
    # What is still there is still checked: a planted record is found next to the deleted range.
    planter = producer(target_conf)
    planter.produce(topic, value=b"planted", partition=0)
    assert planter.flush(30) == 0
    rc, out = cli_verify(m, tmp_path)
    assert rc == 1 and "1 record(s) on the target that no offset sync" in out, out


def test_a_controller_port_is_named_as_such_not_as_an_unsupported_feature(clusters, tmp_path, unique):
    from tests.helpers import mirrors_file

    name = unique("m")
    controller = f"127.0.0.1:{clusters['source'].controller_port}"
    path = mirrors_file(tmp_path / "mirrors.yaml", [{"name": name, "topics": ["anything"], "target": {"local": "target"},
                                                     "source": {"config": {"bootstrap.servers": controller}}}])
    result = cli("plan", name, "--config", str(path))
    # a wrong address, not a transient fault: exit 2, never retried (the brokers' ApiVersions check sees it)
    assert result.returncode == 2, result.stdout + result.stderr
    assert controller in result.stderr and "Is it a KRaft controller port?" in result.stderr, result.stderr
