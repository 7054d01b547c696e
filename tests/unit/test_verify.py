from eosmirror.offsetsync import OffsetSync, PartitionSyncs
from eosmirror.readers import Record
from eosmirror.verify import _compare_compacted

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
