"""verify after the way back (core/migration.way_back_gaps, driver/partitioncheck.judge), scripted logs, no
broker: a forward mirror resumed after a switch back, and a reverse mirror prepared twice."""

from eosmirror.core.migration import AuditRecord, PartitionChange, WayBackGaps, way_back_gaps
from eosmirror.core.offsetsync import BOUNDARY_SLOT, OffsetSync, PartitionSyncs
from eosmirror.driver import partitioncheck
from eosmirror.kafka.readers import Record


def rec(offset, value):
    return Record(offset, b"k", value, (), 0)


def copy(start, end, base):
    return OffsetSync("t", 0, "t", start, end, base, ((start, end - start),))


def boundary(source, target, moved_from):
    return OffsetSync("t", 0, "t", source, source, target, (), slot=BOUNDARY_SLOT, moved_from=moved_from)


def audit(action, new, target_end, old=None):
    return AuditRecord(action, "m", "x", "cli:ops", 1, (PartitionChange("t", "t", 0, old, new, target_end),))


# The forward mirror: A 0..9 copied to B 0..9 before the promotion; B 10..14 produced on B (copied back to A
# 10..14 by the reverse mirror, A 10 and 11 being the divergence, so A 12..16); resumed at A 17 -> B 15;
# A 17..19 (produced on A after the switch back) copied to B 15..17.
FORWARD = PartitionSyncs([copy(0, 10, 0), boundary(17, 15, 10), copy(17, 20, 15)])
RESUMED = [audit("resume", 17, 15, old=10)]


def test_the_resume_leaves_the_new_primarys_records_and_what_came_back_out_of_the_comparison():
    gaps = way_back_gaps(RESUMED, "t", 0, FORWARD.ordered())
    assert gaps == WayBackGaps(own=((10, 15),), skipped=((10, 17),))
    source = [rec(o, f"a{o}".encode()) for o in range(0, 12)] + [rec(o, f"b{o - 12}".encode()) for o in range(12, 17)] \
        + [rec(o, f"d{o}".encode()) for o in range(17, 20)]
    target = [rec(o, f"a{o}".encode()) for o in range(0, 10)] + [rec(o, f"b{o - 10}".encode()) for o in range(10, 15)] \
        + [rec(15 + i, f"d{o}".encode()) for i, o in enumerate(range(17, 20))]

    def judge(gaps):
        return partitioncheck.judge("t", "t", 0, FORWARD, 18, 0, target, lambda start, end: (start, [
            r for r in source if start <= r.offset < end]), gaps=gaps)

    check = judge(gaps)
    assert check.ok and check.records == 13 and check.way_back_own == 5 and check.way_back_skipped == 7, check
    plain = judge(WayBackGaps())                  # without the way back's gaps: foreign records, a difference
    assert not plain.ok and plain.foreign == 5


def test_a_plain_reset_is_no_way_back_gap_and_a_record_written_after_the_resume_stays_foreign():
    assert way_back_gaps([audit("reset", 17, 15, old=10)], "t", 0, FORWARD.ordered()) == WayBackGaps()
    gaps = way_back_gaps(RESUMED, "t", 0, FORWARD.ordered())
    stray = [rec(o, b"a") for o in range(10)] + [rec(o, b"b") for o in range(10, 15)] + [
        rec(15, b"d17"), rec(16, b"d18"), rec(17, b"d19"), rec(18, b"someone else")]
    source = [rec(o, b"a") for o in range(10)] + [rec(17, b"d17"), rec(18, b"d18"), rec(19, b"d19")]
    check = partitioncheck.judge("t", "t", 0, FORWARD, 19, 0, stray, lambda start, end: (start, [
        r for r in source if start <= r.offset < end]), gaps=gaps)
    assert not check.ok and check.foreign == 1 and check.way_back_own == 5


def test_a_reverse_mirror_prepared_twice_has_the_old_sources_own_records_before_each_start():
    # B 10..14 -> A 20..24 (A 0..19 its own), switch back, resume; the next reverse at B 18 -> A 30.
    back = PartitionSyncs([boundary(10, 20, None), copy(10, 15, 20), boundary(18, 30, 15), copy(18, 19, 30)])
    records = [audit("reverse", 10, 20), audit("resume", 99, 99), audit("reverse", 18, 30, old=15)]
    assert way_back_gaps(records, "t", 0, back.ordered()) == WayBackGaps(own=((0, 20), (25, 30)), skipped=((15, 18),))
