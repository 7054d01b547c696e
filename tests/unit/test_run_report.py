"""The typed run report (core/runreport.py): its JSON keeps the keys of the untyped reports before
it, and reports without a version (older releases, still in XCom) read as they are."""

import copy
import json

import pytest

from eosmirror.core import report as reports
from eosmirror.core import runreport
from eosmirror.core.runreport import FollowEnd, RunFailure, RunReport, RunStatus, SlotResult, SlotStatus
from tests.run_reports import OLD_FAILURE, OLD_PLACEHOLDER_SLOTS, OLD_REPORT


def test_an_old_report_without_a_version_reads_and_writes_back_the_same_keys_and_values():
    found = runreport.from_dict(copy.deepcopy(OLD_REPORT))
    assert isinstance(found, RunReport) and found.ok and found.status is RunStatus.OK
    assert (found.records, found.bytes, found.generation, found.target_bootstrap) == (15, 75, 1, "127.0.0.1:43092")
    assert [s.status for s in found.slots] == [SlotStatus.COMMITTED, SlotStatus.COMMITTED]
    part = found.slots[0].partitions[1]
    assert (part.source_topic, part.partition, part.target_from, part.target_to, part.records) == ("orders", 2, 0, 5, 5)
    assert [(p.partition, p.slot, p.pending) for p in found.plan] == [(0, 0, 5), (2, 0, 5), (1, 1, 5)]
    assert found.steps["slots"] == 0.598 and found.topics[0].partitions == 3
    written = found.to_dict()
    assert written.pop("report_version") == runreport.REPORT_VERSION
    assert written == OLD_REPORT   # every key and value as the old release wrote it


def test_old_placeholder_slots_and_an_old_failure_read():
    found = RunReport.from_dict({**OLD_REPORT, "slots": OLD_PLACEHOLDER_SLOTS})
    assert [s.status for s in found.slots] == [SlotStatus.DRY_RUN, SlotStatus.NOTHING_TO_DO, SlotStatus.FAILED]
    assert found.slots[2].error_type == "SparkTaskFailed" and found.slots[0].executor == {}
    failure = runreport.from_dict(OLD_FAILURE)
    assert isinstance(failure, RunFailure) and not failure.ok and failure.exit_code == 2
    assert {k: v for k, v in failure.to_dict().items() if k != "report_version"} == OLD_FAILURE


def test_a_report_crosses_a_process_boundary_as_a_versioned_result_line():
    found = RunReport.from_dict(OLD_REPORT)
    found.slots[1].status, found.slots[1].follow_end = SlotStatus.HANDED_OVER, FollowEnd.HANDED_OVER
    line = reports.result_line(found)
    assert json.loads(line[len(reports.RESULT_MARKER):])["report_version"] == 1
    assert '"status":"handed-over"' in line and '"follow_end":"handed-over"' in line   # the same strings
    assert reports.parse_result_line(line) == found
    assert reports.parse_result_line("a log line") is None


def test_a_newer_report_version_is_refused_not_misread():
    with pytest.raises(ValueError, match="newer than this eosmirror reads"):
        runreport.from_dict({**OLD_REPORT, "report_version": runreport.REPORT_VERSION + 1})


def test_the_statuses_are_the_strings_of_the_wire_and_which_end_a_run_well():
    assert {s.value for s in SlotStatus} == {"pending", "committed", "nothing-to-do", "dry-run", "handed-over",
                                            "follow-bound", "failed", "fenced"}
    assert {s.value for s in SlotStatus if s.ok} == {"committed", "nothing-to-do", "dry-run", "handed-over",
                                                     "follow-bound"}
    assert {e.value for e in FollowEnd} == {"handed-over", "follow-bound", "byte-budget"}


def test_a_slot_that_never_ran_is_built_by_one_constructor():
    slot = SlotResult.not_started(3, "eosmirror.m1.3", SlotStatus.FAILED, "the client is gone", "ClientGone")
    assert (slot.records, slot.partitions, slot.executor, slot.attempt_pid) == (0, [], {}, 0)
    assert SlotResult.from_dict(slot.to_dict()) == slot
