"""The pure half of migrate/reset: MM2's offsets format, audit records, checks, translation below the switch."""

import json

import pytest

from eosmirror.core import migration
from eosmirror.core.generation import STATE_KEY
from eosmirror.core.migration import AuditRecord, PartitionChange, Refusal
from eosmirror.core.offsetsync import BeforeFirstSync, OffsetSync, PartitionSyncs


def key(alias, topic, partition, connector="MirrorSourceConnector"):
    return json.dumps([connector, {"cluster": alias, "partition": partition, "topic": topic}]).encode()


def test_mm2_offsets_last_record_wins_tombstones_delete_other_connectors_and_aliases_ignored():
    records = [(key("A", "orders", 0), b'{"offset":5}'), (key("A", "orders", 0), b'{"offset":9}'),
               (key("A", "orders", 1), b'{"offset":3}'), (key("A", "orders", 1), None),
               (key("B", "orders", 0), b'{"offset":100}'),
               (key("A", "orders", 2, connector="MirrorCheckpointConnector"), b'{"offset":7}'),
               (b"not json", b"{}")]
    assert migration.mm2_offsets(records, "A") == {("orders", 0): 9}


def test_audit_record_round_trips_and_has_its_own_key():
    change = PartitionChange("orders", "A.orders", 0, None, 10, 7)
    record = AuditRecord(action="migrate", mirror="m", origin="mm2:A", who="user:x", at_ms=1, partitions=(change,))
    assert AuditRecord.decode(record.encode()) == record
    assert migration.is_audit_key(record.key("abc")) and not migration.is_audit_key(STATE_KEY)
    assert record.key("a") != record.key("b")   # compaction keeps every record


def test_origins_and_reset_targets_parse_or_refuse_clearly():
    assert migration.parse_origin("group:legacy-copier", None) == ("group", "legacy-copier")
    assert migration.parse_origin("mm2", "dc1") == ("mm2", "dc1")
    assert migration.parse_origin("mm2:east", "dc1") == ("mm2", "east")
    with pytest.raises(Refusal, match="mm2:<alias>"):
        migration.parse_origin("mm2", None)
    with pytest.raises(Refusal, match="group:<consumer group>"):
        migration.parse_origin("kafka", None)
    assert migration.parse_reset_targets(["latest"]) == ("latest", {})
    assert migration.parse_reset_targets(["a.b:0=5", "a.b:1=7"]) == ("offsets", {("a.b", 0): 5, ("a.b", 1): 7})
    with pytest.raises(Refusal, match="<source topic>:<partition>=<offset>"):
        migration.parse_reset_targets(["a.b:x=5"])


def test_new_progress_must_lie_in_the_source_range():
    change = PartitionChange("t", "t", 0, None, 3, 0)
    migration.check_in_source_range([change], {("t", 0): 0}, {("t", 0): 3})
    with pytest.raises(Refusal, match="deleted before eosmirror could copy"):
        migration.check_in_source_range([change], {("t", 0): 4}, {("t", 0): 9})
    with pytest.raises(Refusal, match=r"outside .* \[0, 2\]"):
        migration.check_in_source_range([change], {("t", 0): 0}, {("t", 0): 2})


def test_counts_that_differ_refuse_as_at_least_once():
    migration.check_counts({("t", 0): (5, 5)}, "MirrorMaker 2")
    with pytest.raises(Refusal, match="at-least-once"):
        migration.check_counts({("t", 0): (5, 6)}, "MirrorMaker 2")


def test_moved_lists_what_changed_between_two_looks():
    assert migration.moved({"a": 1, "b": 2}, {"a": 1, "b": 3, "c": 0}) == {"b": (2, 3), "c": (None, 0)}


def test_a_migration_sync_makes_later_offsets_exact_and_earlier_ones_before_first():
    history = PartitionSyncs()
    history.add(OffsetSync("t", 0, "t", source_start=10, source_end=10, target_base=7))   # the migration
    history.add(OffsetSync("t", 0, "t", source_start=10, source_end=14, target_base=7, runs=((10, 2), (13, 1))))
    assert history.translate(10) == 7 and history.translate(13) == 9 and history.translate(14) == 10
    with pytest.raises(BeforeFirstSync) as caught:
        history.translate(9)
    assert caught.value.first == 10
    record = AuditRecord("migrate", "m", "mm2:A", "u", 1, (PartitionChange("t", "t", 0, None, 10, 7),))
    assert migration.taken_over_at([record], "t", 0) is record and migration.taken_over_at([record], "t", 1) is None
    reset = AuditRecord("reset", "m", "offsets", "u", 2, (PartitionChange("t", "t", 0, 14, 12, 10),))
    assert migration.taken_over_at([record, reset], "t", 0) is record        # the last migration
    assert migration.last_change([record, reset], "t", 0) == (reset, reset.partitions[0])   # the last of both
    assert migration.last_change([record, reset], "t", 1) is None
    # The one the offset map restarts at (a later forward reset does not restart it).
    assert migration.last_change([record, reset], "t", 0, new=10) == (record, record.partitions[0])
    assert migration.last_change([record, reset], "t", 0, new=11) is None


def test_target_end_continues_after_the_one_run_of_source_records_that_matches_the_tail():
    assert migration.parse_origin("target-end", None) == ("target-end", "100")
    assert migration.parse_origin("target-end:5", None) == ("target-end", "5")
    source = [(0, ("a",)), (1, ("b",)), (3, ("c",)), (4, ("d",)), (6, ("e",))]   # 2, 5: markers / aborted
    assert migration.continuation([("b",), ("c",)], source, "t[0]") == 4
    assert migration.continuation([("e",)], source, "t[0]") == 7
    with pytest.raises(Refusal, match="not a run of consecutive"):
        migration.continuation([("b",), ("d",)], source, "t[0]")      # a gap in the copy
    with pytest.raises(Refusal, match="occur 2 times"):
        migration.continuation([("x",)], [(0, ("x",)), (1, ("x",))], "t[0]")


def test_mm2_running_reads_the_last_status_of_source_tasks():
    def status(state):
        return json.dumps({"state": state, "trace": None, "worker_id": "w", "generation": 1}).encode()

    records = [(b"status-task-MirrorSourceConnector-0", status("RUNNING")),
               (b"status-task-MirrorSourceConnector-1", status("RUNNING")),
               (b"status-task-MirrorSourceConnector-1", status("UNASSIGNED")),
               (b"status-connector-MirrorHeartbeatConnector", status("RUNNING"))]
    assert migration.mm2_running(records) == ["status-task-MirrorSourceConnector-0"]
