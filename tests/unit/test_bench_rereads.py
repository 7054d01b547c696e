"""The re-reads benchmark's counting: first record received on the target vs the group's source position."""

from eosmirror_tools.bench import markdown, rereads

# Committed records of one source partition: offsets 3-4 hold an aborted transaction, 5 its marker,
# 2 and 8 commit markers.
OFFSETS = [0, 1, 6, 7, 9, 10]


def test_an_exact_translation_neither_rereads_nor_skips():
    assert rereads.count(OFFSETS, 6, 6) == (0, 0)
    # a position on an aborted record or a marker: the next record is the next committed one
    assert rereads.count(OFFSETS, 3, 6) == (0, 0)
    assert rereads.count(OFFSETS, 8, 9) == (0, 0)


def test_a_first_record_before_the_position_counts_the_records_received_again():
    assert rereads.count(OFFSETS, 9, 1) == (3, 0)     # receives 1, 6, 7 again
    assert rereads.count(OFFSETS, 11, 0) == (6, 0)    # at the end, the whole partition again


def test_a_first_record_after_the_position_counts_the_records_never_received():
    assert rereads.count(OFFSETS, 1, 7) == (0, 2)     # 1 and 6 never received
    assert rereads.count(OFFSETS, 6, None) == (0, 4)  # starts at the end: 6, 7, 9, 10 lost


def test_a_group_at_the_end_receiving_nothing_is_exact():
    assert rereads.count(OFFSETS, 11, None) == (0, 0)
    assert rereads.count([], 0, None) == (0, 0)


def test_score_maps_target_values_back_and_keeps_unsynced_groups_apart():
    source = {0: [(0, b"a"), (1, b"b"), (3, b"c"), (4, b"d")]}   # offset 2: a marker
    target = {0: [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]}
    wanted = {"exact": {0: 3}, "behind": {0: 4}, "missing": {0: 1}}
    result = rereads.score(source, target, wanted, {"exact": {0: 2}, "behind": {0: 1}})
    assert result["per_group"]["exact"]["rereads"] == 0
    assert result["per_group"]["behind"] == {"rereads": 2, "skips": 0, "max_rereads_per_partition": 2,
                                             "partitions_synced": 1}
    assert result["not_synced"] == ["missing"] and result["groups_synced"] == 2 and result["rereads"] == 2


def test_the_table_shows_a_system_that_did_not_sync_as_not_a_zero():
    section = {"systems": {"eosmirror": {"copy_seconds": 1.0, "sync_seconds": 0.5, "result": {
        "groups": 2, "groups_synced": 2, "not_synced": [], "rereads": 0, "skips": 0, "max_rereads_per_partition": 0}},
        "mm2": {"note": "budget of 90 s spent: 0 of 2 groups had all offsets"}}}
    table = markdown.rereads_table({"rereads": section})
    assert "| eosmirror (groups sync) | 2/2 | 0 | 0 | 0 |" in table
    assert "budget of 90 s spent" in table and "MirrorMaker 2" in table
    assert rereads.verified({"groups": 2, **section}) and not rereads.verified(
        {"groups": 3, **section})
