import pytest

from eosmirror.core.errors import EXIT_FAILED, EXIT_OK, EosMirrorError
from eosmirror.core.offsetsync import OffsetSync, PartitionSyncs
from eosmirror.driver import partitioncheck, verify
from eosmirror.driver.partitioncheck import _compare_compacted
from eosmirror.kafka.cluster import Cluster
from eosmirror.kafka.readers import Record

# Source offsets 0..3 were copied to target offsets 100..103.
SYNCS = PartitionSyncs([OffsetSync("t", 0, "s", 0, 4, 100, ((0, 4),))])


def rec(offset, key, value):
    return Record(offset, key, value, (), 0)


def compare(source, target):
    found = []
    _compare_compacted(source, target, SYNCS, found.append)
    return found


def test_records_dropped_by_either_side_s_compaction_are_accepted():
    source = [rec(0, b"a", b"1"), rec(1, b"b", b"1"), rec(2, b"b", b"2"), rec(3, b"a", b"2")]
    target = [rec(100, b"a", b"1"), rec(101, b"b", b"1"), rec(102, b"b", b"2"), rec(103, b"a", b"2")]
    assert compare(source, target) == []
    assert compare([source[0], source[2], source[3]], target) == []        # source dropped superseded b@1
    assert compare(source, [target[1], target[2], target[3]]) == []        # target dropped superseded a@100


def test_a_record_missing_on_one_side_without_a_later_same_key_record_is_a_difference():
    source = [rec(0, b"a", b"1"), rec(1, b"b", b"1"), rec(3, b"a", b"2")]
    target = [rec(100, b"a", b"1"), rec(103, b"a", b"2")]                    # b@1 lost
    assert [d for d in compare(source, target) if "no copy on the target" in d]
    extra = [rec(100, b"a", b"1"), rec(101, b"b", b"1"), rec(102, b"z", b"?"), rec(103, b"a", b"2")]
    assert [d for d in compare(source, extra) if "matches no source record" in d]


def test_different_content_at_the_translated_offset_is_a_difference():
    source = [rec(0, b"a", b"1")]
    assert compare(source, [rec(100, b"a", b"CHANGED")])


# --- foreign records, settled syncs, ranges no longer held (scripted logs, no broker) -------------------

def chain(*syncs):
    return PartitionSyncs([OffsetSync("t", 0, "s", *s) for s in syncs])


# Source 0..9 copied by two transactions: 0..4 -> target 0..4 (marker at 5), 5..9 -> target 6..10 (marker 11).
TWO = chain((0, 5, 0, ((0, 5),)), (5, 10, 6, ((5, 5),)))


def test_records_outside_every_synced_range_are_foreign_before_between_and_after():
    target = [rec(o, b"k", b"v") for o in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13]]
    mirrored, foreign = partitioncheck.split_foreign(target, TWO)
    assert [r.offset for r in mirrored] == [0, 1, 2, 3, 4, 6, 7, 8, 9, 10]
    assert [r.offset for r in foreign] == [5, 12, 13]
    moved = chain((0, 5, 3, ((0, 5),)))                     # the mirror's copies start at target offset 3
    assert [r.offset for r in partitioncheck.split_foreign([rec(o, None, b"") for o in range(9)], moved)[1]] == [0, 1, 2, 8]
    assert [r.offset for r in partitioncheck.split_foreign([rec(0, None, b"")], chain())[1]] == [0]


def test_the_foreign_summary_counts_where_each_lies_and_caps_the_list():
    foreign = [rec(o, None, b"x") for o in [5, 12] + list(range(100, 130))]
    line = partitioncheck.foreign_summary(foreign, TWO, 130)
    assert line.startswith("32 record(s) on the target that no offset sync of the mirror accounts for: "
                           "0 before the first mirrored record (target offset 0), 1 between mirrored records, "
                           "31 after the last one (the mirrored records end at 11, the target at 130)")
    assert "target offsets 5, 12, 100, " in line and "117, ... (12 more)" in line and "118" not in line


def test_only_syncs_committed_before_the_target_end_was_read_are_checked():
    assert [s.source_end for s in partitioncheck.settled(TWO, 11).syncs] == [5, 10]
    assert [s.source_end for s in partitioncheck.settled(TWO, 10).syncs] == [5]      # the second run came later
    assert partitioncheck.settled(None, 100).syncs == []


def test_exit_code_separates_differences_from_ranges_no_longer_checkable():
    clean = partitioncheck.PartitionCheck("s", "t", 0, (0, 10), records=10)
    gone = partitioncheck.PartitionCheck("s", "t", 1, (0, 10), records=5, unchecked=["source offsets 0..4 ..."], source_gone=5)
    bad = partitioncheck.PartitionCheck("s", "t", 2, (0, 10), differences=["x"], foreign=1)
    assert verify.exit_code([clean]) == EXIT_OK == 0
    assert verify.exit_code([clean, gone]) == verify.EXIT_INCOMPLETE == 3
    assert verify.exit_code([clean, gone, bad]) == EXIT_FAILED == 1
    text = verify.format_checks([clean, gone, bad])
    assert "OK WHERE CHECKABLE" in text and "not checkable: source offsets 0..4" in text
    assert text.endswith("1 partition(s) differ (1 foreign record(s) on the target); 5 mirrored offsets could not "
                         "be checked: deleted on the source or the target since they were copied")


SOURCE, TARGET = Cluster.from_settings("source", {"side": "s"}), Cluster.from_settings("target", {"side": "t"})


class Logs:
    """Scripted partitions: settings['side'] -> (log start, {offset: Record}); mimics readers' contract."""

    def __init__(self, source, target, source_low=0, target_low=0):
        self.logs = {"s": [source_low, source], "t": [target_low, target]}
        self.reads = []

    def watermarks(self, cluster, topic, partition, **kw):
        low, records = self.logs[cluster.settings["side"]]
        return low, (max(records) + 1 if records else low)

    def read_range(self, cluster, topic, partition, start, end, **kw):
        low, records = self.logs[cluster.settings["side"]]
        self.reads.append((cluster.settings["side"], start, end))
        if start < low:
            raise EosMirrorError("source: failed to read: _AUTO_OFFSET_RESET: Offset out of range")
        return [records[o] for o in sorted(records) if start <= o < end]


def scripted(monkeypatch, logs):
    monkeypatch.setattr(verify.readers, "watermarks", logs.watermarks)
    monkeypatch.setattr(verify.readers, "read_range", logs.read_range)

    def check(syncs=TWO, target_end=11):
        return verify.check_partition(SOURCE, TARGET, "s", "t", 0, syncs, None,
                                      target_end=target_end)
    return check


def source_log(offsets=range(10)):
    return {o: rec(o, b"k", str(o).encode()) for o in offsets}


def target_log(extra=()):
    copies = {t: rec(t, b"k", str(s).encode()) for s, t in zip(range(10), [0, 1, 2, 3, 4, 6, 7, 8, 9, 10])}
    return {**copies, **{o: rec(o, b"k", v) for o, v in extra}}


def test_a_clean_mirror_checks_every_record_and_nothing_is_foreign(monkeypatch):
    check = scripted(monkeypatch, Logs(source_log(), target_log()))()
    assert (check.ok, check.complete, check.records, check.foreign, check.source_range) == (True, True, 10, 0, (0, 10))


def test_a_duplicate_and_a_planted_record_after_the_mirrored_range_fail_naming_their_offsets(monkeypatch):
    logs = Logs(source_log(), target_log([(11, b"9"), (12, b"planted:ABORTED")]))
    check = scripted(monkeypatch, logs)(target_end=13)
    assert not check.ok and check.foreign == 2 and check.records == 10
    assert "2 after the last one" in check.differences[0] and "target offsets 11, 12." in check.differences[0]
    assert any("planted:ABORTED" in d for d in check.differences)


def test_a_record_before_the_first_copy_is_foreign(monkeypatch):
    later = chain((0, 5, 1, ((0, 5),)))
    target = {0: rec(0, b"k", b"early"), **{t: rec(t, b"k", str(t - 1).encode()) for t in range(1, 6)}}
    check = scripted(monkeypatch, Logs(source_log(range(5)), target))(later, 6)
    assert check.foreign == 1 and "1 before the first mirrored record (target offset 1)" in check.differences[0]


def test_a_range_deleted_on_the_source_is_reported_and_the_rest_still_checked(monkeypatch):
    logs = Logs(source_log(range(7, 10)), target_log(), source_low=7)
    check = scripted(monkeypatch, logs)()
    assert check.ok and not check.complete and (check.source_gone, check.records) == (7, 3)
    assert check.unchecked == ["source offsets 0..6 are no longer on the source (retention or delete-records on s): "
                               "7 mirrored offsets cannot be compared"]
    assert ("s", 7, 10) in logs.reads                         # never asked the source for what it no longer holds


def test_the_log_start_moving_during_the_read_is_asked_again(monkeypatch):
    logs = Logs(source_log(range(4, 10)), target_log(), source_low=0)
    real = logs.watermarks
    answers = iter([0])   # the first answer is stale: retention moved the log start to 4 meanwhile

    def stale_once(cluster, *a, **kw):
        low = next(answers, None) if cluster.settings["side"] == "s" else None
        return (low, 10) if low is not None else real(cluster, *a, **kw)
    logs.logs["s"][0] = 4
    monkeypatch.setattr(verify.readers, "watermarks", stale_once)
    monkeypatch.setattr(verify.readers, "read_range", logs.read_range)
    check = verify.check_partition(SOURCE, TARGET, "s", "t", 0, TWO, None,
                                   target_end=11)
    assert check.ok and check.source_gone == 4 and check.records == 6


def test_a_range_deleted_on_the_target_is_reported_and_its_source_records_are_not_compared(monkeypatch):
    target = {o: r for o, r in target_log().items() if o >= 6}
    check = scripted(monkeypatch, Logs(source_log(), target, target_low=6))()
    assert check.ok and not check.complete and (check.target_gone, check.records) == (5, 5)
    assert "target offsets 0..5 are no longer on the target" in check.unchecked[0]


def test_a_different_record_inside_the_mirrored_range_still_differs(monkeypatch):
    target = target_log()
    target[7] = rec(7, b"k", b"CHANGED")
    check = scripted(monkeypatch, Logs(source_log(), target))()
    assert not check.ok and check.foreign == 0 and "CHANGED" in check.differences[0]


def test_a_partition_never_mirrored_is_skipped_unless_the_target_holds_records(monkeypatch):
    check = scripted(monkeypatch, Logs({}, {}))
    assert check(chain(), 0) is None
    found = scripted(monkeypatch, Logs({}, {0: rec(0, None, b"x")}))(chain(), 1)
    assert found.foreign == 1 and "the mirror has copied no record into this partition" in found.differences[0]


def test_an_error_other_than_offset_out_of_range_is_not_retried(monkeypatch):
    logs = Logs(source_log(), target_log())

    def broken(cluster, *a, **kw):
        raise EosMirrorError("target: not authorized")
    monkeypatch.setattr(verify.readers, "watermarks", logs.watermarks)
    monkeypatch.setattr(verify.readers, "read_range", broken)
    with pytest.raises(EosMirrorError, match="not authorized"):
        verify.check_partition(SOURCE, TARGET, "s", "t", 0, TWO, None,
                               target_end=11)


def test_the_run_report_says_per_partition_what_was_copied_and_what_is_left():
    from eosmirror.core import report
    from tests.run_reports import report as run_report

    plan = {"target_topic": "s.t", "start": 3, "end": 10, "origin": "progress", "slot": 0}
    run = run_report(plan=[{**plan, "source_topic": "t", "partition": 0, "available": 20},
                           {**plan, "source_topic": "t", "partition": 1, "available": 5}],
                     slots=[{"slot": 0, "transactional_id": "x.0", "partitions": [
                         {"source_topic": "t", "target_topic": "s.t", "partition": 0, "start": 3, "end": 10,
                          "planned_end": 10, "records": 7, "record_age_ms": 1500, "target_from": 40, "target_to": 48},
                         {"source_topic": "t", "target_topic": "s.t", "partition": 1, "start": 5, "end": 5,
                          "planned_end": 5, "records": 0, "record_age_ms": None}]}])
    rows = report.partitions(run)
    assert [(r["partition"], r["from"], r["to"], r["records"], r["left"]) for r in rows] == [(0, 3, 10, 7, 10),
                                                                                          (1, 5, 5, 0, 0)]
    table = report.partitions_table(rows)
    assert "t[0] -> s.t" in table and "3..10" in table and "40..48" in table and "1.5 s" in table


def test_copies_committed_after_the_target_end_was_read_are_reported_not_left_out():
    from eosmirror.core.offsetsync import OffsetSync, PartitionSyncs
    from eosmirror.driver import topics
    from eosmirror.driver.verify import PartitionCheck, _report_committed_after, exit_code

    pair = topics.TopicPair("orders", "orders", 1, "id")
    early = OffsetSync("orders", 0, "orders", 0, 10, 0, ((0, 10),))
    late = OffsetSync("orders", 0, "orders", 10, 20, 11, ((10, 10),))
    # a partition whose every copy came after the end was read: it is reported, never silently left out
    checks: dict = {("orders", 0): None}
    _report_committed_after(checks, pair, 0, PartitionSyncs([early, late]), target_end=5)
    assert checks[("orders", 0)].unchecked and "source offsets 0..19 were committed after" in checks[("orders", 0)].unchecked[0]
    assert exit_code([checks[("orders", 0)]]) == 3
    # a partition checked up to its settled part: the later part is named
    checked = PartitionCheck("orders", "orders", 0, (0, 10), records=10)
    checks = {("orders", 0): checked}
    _report_committed_after(checks, pair, 0, PartitionSyncs([early, late]), target_end=11)
    assert checked.unchecked == ["source offsets 10..19 were committed after verify read the target's end (11): not "
                                 "checked (a run was committing; verify again once it has ended)"]
    # everything settled: nothing to say
    settled = PartitionCheck("orders", "orders", 0, (0, 20), records=20)
    checks = {("orders", 0): settled}
    _report_committed_after(checks, pair, 0, PartitionSyncs([early, late]), target_end=22)
    assert settled.unchecked == [] and exit_code([settled]) == 0
