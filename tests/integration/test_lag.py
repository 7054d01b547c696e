"""Lag reports against real brokers: the figures, each status, the SLO, the history topic, the CLI.

Mirrors here run every minute (`* * * * *`) and are sampled every minute, so STALLED/LAGGING need
a window of one minute and STOPPED two minutes without a successful run; the evaluation's clock is
injected (``now_ms``) so the tests do not wait for it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import pytest

from eosmirror.core import lag as core_lag
from eosmirror.core import naming
from eosmirror.driver import lag
from eosmirror.kafka import lagstore
from tests.helpers import cli, create_topic, mirror, producer, run, seed_sequence, write_mirror_file

pytestmark = pytest.mark.integration

MINUTELY = {"airflow": {"schedule": "* * * * *"}, "lag": {"schedule": "* * * * *"}}


def produce(conf, topic, count, start=0):
    p = producer(conf, **{"enable.idempotence": True})
    for n in range(start, start + count):
        p.produce(topic, value=f"v{n}".encode(), partition=0)
    p.flush(30)


def test_production_outrunning_a_capped_mirror_is_lagging_and_breaches_the_slo_then_catches_up(
        source_conf, target_conf, target_cluster, unique):
    topic = create_topic(source_conf, unique("src"))
    m = mirror(unique("m"), [topic], max_records_per_partition=10, max_lag_seconds=30, **MINUTELY)
    t0 = lagstore.now_ms()
    statuses = []
    for step, offset in enumerate((0, 30_000, 61_000)):
        produce(source_conf, topic, 30, start=30 * step)
        assert run(m)["status"] == "ok"
        statuses.append(lag.report(m, now_ms=t0 + offset, record=True))
    first, _, last = statuses
    part = last.partitions[0]
    assert (first.record_lag, last.record_lag) == (20, 60), [s.record_lag for s in statuses]
    assert (part.high_watermark, part.last_stable, part.progress) == (90, 90, 30)
    assert first.status == core_lag.OK and last.status == core_lag.LAGGING, last
    assert "grew from 20 to 60" in last.reason
    # The oldest unmirrored record (offset 30) was written a moment before t0+30s; the clock says t0+61s.
    assert 25 < part.time_lag_seconds < 75 and part.breach and last.alerting
    assert last.alerts() == [f"mirror {m.name}: time lag SLO max_lag_seconds=30 breached on {topic}[0] "
                             f"(worst {topic}[0]: {part.time_lag_seconds:.1f} s, 60 offsets behind)"]
    # Uncapped runs catch up: OK, no lag.
    assert run(dataclasses.replace(m, max_records_per_partition=None))["status"] == "ok"
    caught_up = lag.report(m, now_ms=t0 + 90_000, record=True)
    assert (caught_up.status, caught_up.record_lag, caught_up.time_lag_seconds) == (core_lag.OK, 0, 0.0)
    assert not caught_up.alerting
    # The history topic holds the four samples, time-retained for lag.history_days (7).
    samples, _ = lagstore.read_since(target_cluster, m.name, t0 - 60_000,
                                     m.progress_group)
    assert [s.time_ms - t0 for s in samples] == [0, 30_000, 61_000, 90_000]
    from confluent_kafka.admin import AdminClient, ConfigResource

    resource = ConfigResource("topic", naming.lag_topic(m.name))
    admin = AdminClient(target_conf)
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["retention.ms"].value == str(7 * 86_400_000) and configs["cleanup.policy"].value == "delete"


def test_a_paused_mirror_with_pending_records_is_stalled_then_stopped(source_conf, target_conf, unique):
    topic = create_topic(source_conf, unique("src"), partitions=2)
    seed_sequence(source_conf, topic, 2, 20)
    m = mirror(unique("m"), [topic], max_records_per_partition=5, **MINUTELY)
    assert run(m)["status"] == "ok"
    t0 = lagstore.now_ms()
    first = lag.report(m, now_ms=t0, record=True)
    assert first.status == core_lag.OK and first.record_lag == 30
    # No run since: progress stands still with lag > 0 for one interval -> STALLED ...
    stalled = lag.report(m, now_ms=t0 + 61_000, record=True)
    assert stalled.status == core_lag.STALLED and [p.status for p in stalled.partitions] == [core_lag.STALLED] * 2
    assert stalled.alerts() == [f"mirror {m.name}: STALLED: progress stayed at 5 for 61 s with 15 offsets to "
                                f"copy (partitions {topic}[0], {topic}[1])"]
    # ... and after two intervals without a successful run -> STOPPED.
    stopped = lag.report(m, now_ms=t0 + 125_000, record=True)
    assert stopped.status == core_lag.STOPPED and "no successful run for" in stopped.reason, stopped


def _job_args(path) -> argparse.Namespace:
    from eosmirror.spark import job

    parser = argparse.ArgumentParser()
    job.add_run_arguments(parser)
    return parser.parse_args(["--config", str(path)])


def test_a_failed_run_is_error(source_conf, target_conf, unique, tmp_path):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    from eosmirror.core.errors import EosMirrorError
    from eosmirror.driver.run import run_in_process
    from eosmirror.spark import job

    topic = create_topic(source_conf, unique("src"))
    produce(source_conf, topic, 10)
    m = mirror(unique("m"), [topic], **MINUTELY)
    path = write_mirror_file(tmp_path / "mirrors.yaml", m, max_records_per_partition=5, **MINUTELY)
    assert job.run(m.name, _job_args(path), run_in_process)[0] == 0
    ok = lag.report(m)
    assert ok.status == core_lag.OK and ok.last_run.status == "ok" and ok.last_run.records == 5
    # Records below the progress are deleted: the next run refuses (on_truncation: fail) and says so.
    admin = AdminClient(source_conf)
    admin.delete_records([TopicPartition(topic, 0, 8)])[TopicPartition(topic, 0, 8)].result(30)
    try:
        job.run(m.name, _job_args(path), run_in_process)
        raise AssertionError("the run should have refused to skip deleted records")
    except EosMirrorError:
        pass
    failed = lag.report(m)
    assert failed.status == core_lag.ERROR and failed.alerting, failed
    assert failed.alerts()[0].startswith(f"mirror {m.name}: ERROR: the last run (") and "failed:" in failed.alerts()[0]


def test_cli_prints_the_same_figures_as_json_and_a_table(source_conf, target_conf, unique, tmp_path):
    topic = create_topic(source_conf, unique("src"), partitions=2)
    seed_sequence(source_conf, topic, 2, 12)
    m = mirror(unique("m"), [topic], max_records_per_partition=4, max_lag_seconds=3600)
    assert run(m)["status"] == "ok"
    path = write_mirror_file(tmp_path / "mirrors.yaml", m, max_records_per_partition=4, max_lag_seconds=3600)
    out = cli("lag", m.name, "--json", "--config", str(path))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    expected = lag.report(m)
    (shown,) = doc["mirrors"]
    assert (shown["mirror"], shown["status"], shown["record_lag"]) == (m.name, expected.status, 16)
    assert [p["record_lag"] for p in shown["partitions"]] == [p.record_lag for p in expected.partitions] == [8, 8]
    assert [p["progress"] for p in shown["partitions"]] == [4, 4] and doc["alerting"] == []
    table = cli("lag", m.name, "--config", str(path))
    assert table.returncode == 0, table.stderr
    assert m.name in table.stdout and "record lag" in table.stdout and f"{topic}[1]" in table.stdout
    assert "ok (3600 s)" in table.stdout


def test_unreachable_mirror_is_reported_as_error_not_a_crash(unique, tmp_path):
    from eosmirror.core import config

    raw = {"name": unique("m"), "source": {"config": {"bootstrap.servers": "127.0.0.1:1", "socket.timeout.ms": 2000}},
           "target": {"local": "target"}, "topics": ["x"]}
    mirrors = config.parse({"mirrors": [raw]}, tmp_path / "m.yaml")
    started = time.monotonic()
    (status,) = lag.report_all(mirrors)
    assert status.status == core_lag.ERROR and "could not be read" in status.reason
    assert time.monotonic() - started < 120


def test_consumer_groups_synced_to_the_target_show_their_lag_and_the_cli_shows_it(
        source_conf, target_conf, unique, tmp_path):
    from eosmirror.driver import groups
    from tests.support.groups import commit_offsets

    topic = create_topic(source_conf, unique("src"), partitions=3)
    seed_sequence(source_conf, topic, 3, 20)
    group = unique("app")
    commit_offsets(source_conf, group, topic, {0: 5, 1: 10, 2: 15})
    m = mirror(unique("m"), [topic], groups={})
    assert run(m)["status"] == "ok"
    assert lag.report(m).groups == ()          # nothing synced to the target yet
    report = groups.move_groups(m, groups.GroupMoveOptions(groups=(group,)))
    assert groups.exit_code(report) == 0, report
    status = lag.report(m)
    # The group resumes at 5, 10 and 15 on the target; the target's ends count the mirror's commit
    # markers too (20 records and at least one marker per partition), as record lag always does.
    from confluent_kafka import Consumer, TopicPartition

    probe = Consumer({**target_conf, "group.id": unique("probe")})
    ends = [probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(3)]
    probe.close()
    assert min(ends) > 20, ends
    expected = sum(end - at for end, at in zip(ends, (5, 10, 15)))
    assert status.groups == (core_lag.GroupLag(group, "EMPTY", 3, expected),) and status.groups_error is None
    path = write_mirror_file(tmp_path / "mirrors.yaml", m, groups={})
    doc = json.loads(cli("lag", m.name, "--json", "--config", str(path)).stdout)
    assert doc["mirrors"][0]["groups"] == [{"group": group, "state": "EMPTY", "partitions": 3, "record_lag": expected}]
    table = cli("lag", m.name, "--config", str(path)).stdout
    assert "consumer groups on the target:" in table and group in table
