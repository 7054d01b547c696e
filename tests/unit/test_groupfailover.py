"""Consumer-group failover/failback: exact translation both ways, refusals, decisions, selection."""

import struct

import pytest

from eosmirror.core import checkpoints
from eosmirror.core import groupfailover as gs
from eosmirror.core.checkpoints import Checkpoint
from eosmirror.core.offsetsync import OffsetSync, PartitionSyncs
from tests.support.syncs import mirrored


@pytest.mark.parametrize("seed", range(20))
def test_failover_resumes_at_the_copy_of_the_next_unconsumed_record_for_every_position(seed):
    syncs, copied, targets = mirrored(seed, start=50, target_start=7)
    for committed in range(50, 351):
        t = gs.failover(committed, syncs)
        assert t.outcome == gs.EXACT
        following = [tgt for src, tgt in zip(copied, targets) if src >= committed]
        # the first record a target consumer reads is the copy of the first source record at or after C
        assert t.offset == (following[0] if following else targets[-1] + 1), committed


def test_failover_refuses_positions_outside_the_mirrored_range_with_counts():
    syncs, _, _ = mirrored(1, start=50)
    assert gs.failover(40, syncs) == gs.Translation(gs.BEFORE_RANGE, records=10)
    assert gs.failover(360, syncs) == gs.Translation(gs.WAITING, records=10)
    assert gs.failover(5, None).outcome == gs.NOT_MIRRORED
    assert gs.failover(5, PartitionSyncs()).outcome == gs.NOT_MIRRORED


@pytest.mark.parametrize("seed", range(20))
def test_failback_resumes_on_the_source_right_after_the_last_record_processed_on_the_target(seed):
    syncs, copied, targets = mirrored(seed, start=20, target_start=3)
    for committed_target in targets:
        # the group processed every target record below T: on the source it resumes at the record copied to T
        assert gs.failback(committed_target, syncs) == gs.Translation(gs.EXACT, copied[targets.index(committed_target)])
    assert gs.failback(targets[-1] + 1, syncs) == gs.Translation(gs.EXACT, syncs.progress)
    assert gs.failback(targets[-1] + 4, syncs) == gs.Translation(gs.BEYOND_MIRROR, records=3)
    assert gs.failback(0, syncs) == gs.Translation(gs.BEFORE_RANGE, records=3)


@pytest.mark.parametrize("seed", range(10))
def test_failover_then_failback_is_the_identity_on_consumed_positions(seed):
    syncs, copied, _ = mirrored(seed)
    for source in copied:
        assert gs.failback(gs.failover(source, syncs).offset, syncs).offset == source


def test_failback_between_runs_with_foreign_target_records_goes_to_the_next_copy():
    # two transactions; 5 foreign records were produced to the target between them
    syncs = PartitionSyncs([OffsetSync("t", 0, "t", 0, 10, 0, ((0, 10),)),
                            OffsetSync("t", 0, "t", 10, 20, 15, ((12, 8),))])
    assert gs.failback(12, syncs) == gs.Translation(gs.EXACT, 12)
    assert gs.failback(15, syncs) == gs.Translation(gs.EXACT, 12)
    assert gs.failback(23, syncs) == gs.Translation(gs.EXACT, 20)


def test_failback_with_only_empty_syncs():
    syncs = PartitionSyncs([OffsetSync("t", 0, "t", 0, 4, 9, ())])
    assert gs.failback(9, syncs) == gs.Translation(gs.EXACT, 4)
    assert gs.failback(8, syncs).outcome == gs.BEFORE_RANGE


@pytest.mark.parametrize("current, allow, expected", [
    (None, False, gs.WRITE), (10, False, gs.UNCHANGED), (5, False, gs.WRITE),
    (15, False, gs.REWIND_REFUSED), (15, True, gs.WRITE)])
def test_decide_never_moves_backwards_unless_allowed(current, allow, expected):
    assert gs.decide(gs.Translation(gs.EXACT, 10), current, allow) == expected


@pytest.mark.parametrize("seed", range(10))
def test_failback_past_the_last_copy_is_exact_when_the_target_holds_no_data_record_there(seed):
    syncs, copied, targets = mirrored(seed, start=20, target_start=3)
    end = gs.copies_end(syncs)
    assert end == targets[-1] + 1
    # A consumer that read to the end commits past the mirror's last commit marker: no data in between.
    markers_only = gs.LogRead(start=end, reached=end + 3, data_offsets=())
    assert gs.failback(end + 1, syncs, markers_only) == gs.Translation(gs.EXACT, syncs.progress)
    assert gs.failback(end + 3, syncs, markers_only) == gs.Translation(gs.EXACT, syncs.progress)
    # Records someone else produced to the target are reported with their count (not offsets).
    foreign = gs.LogRead(start=end, reached=end + 10, data_offsets=(end + 2, end + 5))
    assert gs.failback(end + 2, syncs, foreign) == gs.Translation(gs.EXACT, syncs.progress)
    assert gs.failback(end + 3, syncs, foreign) == gs.Translation(gs.BEYOND_MIRROR, records=1)
    assert gs.failback(end + 10, syncs, foreign) == gs.Translation(gs.BEYOND_MIRROR, records=2)
    # Unread (the read stopped short of the committed offset) or read from elsewhere: never EXACT.
    assert gs.failback(end + 11, syncs, foreign) == gs.Translation(gs.BEYOND_MIRROR, records=11)
    assert gs.failback(end + 2, syncs, gs.LogRead(start=end + 1, reached=end + 9)).outcome == gs.BEYOND_MIRROR
    assert gs.failback(end + 2, syncs).outcome == gs.BEYOND_MIRROR


def test_a_backward_move_across_markers_only_is_no_move_and_a_real_one_stays_refused():
    # the group sits at 92 on the target (past the last copy at 89 and two markers), failover gives 90
    committed = {("orders", 0): 100, ("orders", 1): 100, ("orders", 2): 60}
    current = {("dc1.orders", 0): 92, ("dc1.orders", 1): 92, ("dc1.orders", 2): 92}
    plan = gs.plan_group("g", "EMPTY", gs.FAILOVER, committed, current, simple_syncs(), {"orders": "dc1.orders"},
                         allow_rewind=False)
    assert [p.decision for p in plan.partitions] == [gs.REWIND_REFUSED] * 3
    assert gs.backward_ranges([plan]) == {("dc1.orders", 0): (90, 92), ("dc1.orders", 1): (90, 92),
                                          ("dc1.orders", 2): (50, 92)}
    gs.settle_equivalent([plan], {("dc1.orders", 0): gs.LogRead(90, 92),               # two markers
                                  ("dc1.orders", 1): gs.LogRead(90, 92, (91,)),        # a foreign record
                                  ("dc1.orders", 2): gs.LogRead(50, 92, tuple(range(50, 90)))})
    assert [p.decision for p in plan.partitions] == [gs.UNCHANGED, gs.REWIND_REFUSED, gs.REWIND_REFUSED]
    assert plan.writes() == {} and plan.left() == {gs.REWIND_REFUSED: 2}


def test_failback_tail_ranges_read_each_partition_once_to_the_furthest_group():
    syncs = simple_syncs()     # 90 copies per partition: target offsets 0..89, last copy ends at 90
    ranges = gs.failback_tail_ranges([{("dc1.orders", 0): 95, ("dc1.orders", 1): 40},
                                      {("dc1.orders", 0): 92, ("dc1.orders", 2): 90, ("dc1.orders", 3): 91},
                                      {("dc1.other", 0): 500}], syncs)
    assert ranges == {("dc1.orders", 0): (90, 95), ("dc1.orders", 3): (90, 91)}


def test_a_failback_that_leaves_partitions_says_how_many_and_why():
    from eosmirror.core import report
    from eosmirror.driver.groups import exit_code

    tails = {("dc1.orders", 1): gs.LogRead(90, 100, (90, 91, 92)), ("dc1.orders", 2): gs.LogRead(90, 100)}
    plan = gs.plan_group("g", "EMPTY", gs.FAILBACK, {("dc1.orders", 0): 40, ("dc1.orders", 1): 99,
                                                     ("dc1.orders", 2): 99}, {}, simple_syncs(),
                         {"dc1.orders": "orders"}, allow_rewind=False, tails=tails)
    assert plan.writes() == {("orders", 0): 50, ("orders", 2): 100}
    assert plan.left() == {gs.BEYOND_MIRROR: 1}
    caught_up = gs.plan_group("h", "EMPTY", gs.FAILBACK, {("dc1.orders", 2): 99}, {("orders", 2): 100},
                              simple_syncs(), {"dc1.orders": "orders"}, allow_rewind=False, tails=tails)
    assert caught_up.left() == {} and caught_up.partitions[0].decision == gs.UNCHANGED

    def result(direction, *plans):
        return {"mirror": "m", "direction": direction, "dry_run": False, "read_from": "T", "written_to": "S",
                "checkpoints_topic": "c", "groups": [{**p.as_dict(), "written": bool(p.writes()), "error": None,
                                                      "left": p.left()} for p in plans]}

    text = report.groups_table(result(gs.FAILBACK, plan, caught_up))
    assert "wrote 2 partition(s); LEFT 1 partition(s) unmoved: 1 with target records that are not copies" in text
    assert "3 target records after the mirrored range are not copies" in text
    assert "group h (state EMPTY where written): nothing to write" in text
    assert exit_code(result(gs.FAILBACK, plan, caught_up)) == 4
    assert exit_code(result(gs.FAILBACK, caught_up)) == 0
    waiting = gs.plan_group("w", "EMPTY", gs.FAILOVER, {("orders", 0): 120}, {}, simple_syncs(),
                            {"orders": "dc1.orders"}, allow_rewind=False)
    assert "): LEFT 1 partition(s) unmoved: 1 waiting for" in report.groups_table(result(gs.FAILOVER, waiting))
    assert exit_code(result(gs.FAILOVER, waiting)) == 0   # failover on a schedule: waiting is normal


def simple_syncs():
    return {("dc1.orders", p): PartitionSyncs([OffsetSync("dc1.orders", p, "orders", 0, 100, 0, ((10, 90),))])
            for p in range(4)}


def test_plan_group_failover_reports_every_outcome():
    committed = {("orders", 0): 50, ("orders", 1): 120, ("orders", 2): 5, ("orders", 3): 60}
    current = {("dc1.orders", 3): 70}
    plan = gs.plan_group("g", "EMPTY", gs.FAILOVER, committed, current, simple_syncs(),
                         {"orders": "dc1.orders"}, allow_rewind=False)
    by = {p.partition: p for p in plan.partitions}
    assert (by[0].outcome, by[0].decision, by[0].new_offset) == (gs.EXACT, gs.WRITE, 40)
    assert (by[1].outcome, by[1].records) == (gs.WAITING, 20)
    assert by[2].outcome == gs.EXACT and by[2].new_offset == 0     # inside the leading gap: the first copy
    assert (by[3].decision, by[3].current, by[3].new_offset) == (gs.REWIND_REFUSED, 70, 50)
    assert plan.writes() == {("dc1.orders", 0): 40, ("dc1.orders", 2): 0}
    assert plan.count(gs.WAITING) == 1 and plan.count(gs.REWIND_REFUSED) == 1


def test_plan_group_failback_reads_target_topics_and_writes_source_topics():
    plan = gs.plan_group("g", "DEAD", gs.FAILBACK, {("dc1.orders", 0): 40}, {}, simple_syncs(),
                         {"dc1.orders": "orders"}, allow_rewind=False)
    assert plan.writes() == {("orders", 0): 50}


@pytest.mark.parametrize("state", ["STABLE", "PREPARING_REBALANCE", "COMPLETING_REBALANCE", "ASSIGNING"])
def test_an_active_group_is_skipped_whole(state):
    plan = gs.plan_group("g", state, gs.FAILOVER, {("orders", 0): 50}, {}, simple_syncs(),
                         {"orders": "dc1.orders"}, allow_rewind=True)
    assert plan.skipped and plan.writes() == {}
    assert plan.as_dict()["partitions"][0]["new_offset"] == 40   # still reported


def test_group_selection_include_exclude_own_and_subset():
    from eosmirror.core.config import DEFAULT_GROUP_EXCLUDES

    groups = ["orders-app", "billing", "console-consumer-123", "connect-sink", "__internal", "eosmirror.m1",
              "eosmirror-m1-sync-reader.reader", "my-progress"]
    assert gs.select_groups(groups, [".*"], DEFAULT_GROUP_EXCLUDES, never=["my-progress"]) == ["billing", "orders-app"]
    assert gs.select_groups(groups, ["orders-.*"], DEFAULT_GROUP_EXCLUDES) == ["orders-app"]
    assert gs.select_groups(groups, [".*"], DEFAULT_GROUP_EXCLUDES, only=["billing", "connect-sink"]) == ["billing"]


def test_checkpoint_encoding_is_mm2s_schema_byte_for_byte():
    cp = Checkpoint("grp", "dc1.orders", 3, upstream_offset=1234, downstream_offset=987, metadata="m")
    # KEY_SCHEMA: group STRING, topic STRING, partition INT32 (STRING = int16 length + UTF-8)
    assert cp.key() == b"\x00\x03grp" + b"\x00\x0adc1.orders" + b"\x00\x00\x00\x03"
    # HEADER_SCHEMA version INT16 = 0, then VALUE_SCHEMA_V0: upstreamOffset INT64, offset INT64, metadata STRING
    assert cp.value() == (b"\x00\x00" + (1234).to_bytes(8, "big") + (987).to_bytes(8, "big") + b"\x00\x01m")
    assert Checkpoint.decode(cp.key(), cp.value()) == cp
    assert Checkpoint("g", "t", 0, 0, 0).value()[-2:] == b"\x00\x00"   # empty metadata: length 0
    assert struct.unpack(">q", Checkpoint("g", "t", 0, 2**40, 1).value()[2:10])[0] == 2**40
    assert checkpoints.checkpoints_topic("dc1") == "dc1.checkpoints.internal"


def test_the_report_table_says_what_happened_to_every_partition():
    from eosmirror.core import report

    plan = gs.plan_group("g", "EMPTY", gs.FAILOVER, {("orders", 0): 50, ("orders", 1): 120, ("orders", 2): 5,
                                                     ("orders", 3): 60}, {("dc1.orders", 3): 70}, simple_syncs(),
                         {"orders": "dc1.orders"}, allow_rewind=False)
    active = gs.plan_group("busy", "STABLE", gs.FAILOVER, {("orders", 0): 50}, {}, simple_syncs(),
                           {"orders": "dc1.orders"}, allow_rewind=False)
    text = report.groups_table({
        "mirror": "m", "direction": "failover", "dry_run": True, "read_from": "S", "written_to": "T",
        "checkpoints_topic": "dc1.checkpoints.internal", "groups_not_found": ["ghost"],
        "groups": [{**plan.as_dict(), "written": False, "error": None},
                   {**active.as_dict(), "written": False, "error": None}]})
    assert "dry run: nothing written" in text and "would write 2 partition(s)" in text
    assert "waiting for the mirror: 20 offsets" in text and "refused: would move backwards" in text
    assert "orders[0] -> dc1.orders" in text and "SKIPPED: active" in text and "group ghost: not found" in text


class _Run:
    def __init__(self, conf):
        self.conf = conf


def _mirror():
    from tests.support.configs import one

    return one(groups={"allow_rewind": False})


def test_group_params_are_validated_and_unknown_conf_keys_refused_by_name():
    from eosmirror.airflow.grouptasks import group_options
    from eosmirror.core.errors import ConfigError

    options = group_options(_mirror(), {"params": {"direction": "failback", "dry_run": True, "allow_rewind": False,
                                                    "groups": ["a", "b"]}, "dag_run": _Run({"direction": "failback"})})
    assert (options.direction, options.dry_run, options.allow_rewind, options.groups) == (
        "failback", True, None, ("a", "b"))
    with pytest.raises(ConfigError, match="unknown key.*allow_rewinds"):
        group_options(_mirror(), {"params": {}, "dag_run": _Run({"allow_rewinds": True})})
    with pytest.raises(ConfigError, match="direction 'sideways'"):
        group_options(_mirror(), {"params": {"direction": "sideways"}})
    with pytest.raises(ConfigError, match="Param `groups`"):
        group_options(_mirror(), {"params": {"groups": "g1"}})


def test_failover_after_a_way_back_moves_a_group_through_the_map_of_its_next_record():
    """A partition of the old source A after promote, reverse, switch back and resume: A's own records
    [0, 10) copied forward to B [0, 10); A's diverged records [10, 13) never reached B; the reverse mirror
    copied B's own records [10, 18) onto A [15, 23); the forward mirror resumed at A 24 -> B 19 and copied
    A [24, 29) to B [19, 24). Each group resumes on B with the record it would read next on A."""
    forward = PartitionSyncs([OffsetSync("t", 0, "t", 0, 10, 0, ((0, 10),)),
                              OffsetSync("t", 0, "t", 24, 29, 19, ((24, 5),))])
    reverse = PartitionSyncs([OffsetSync("t", 0, "t", 10, 18, 15, ((10, 8),))])
    expected = {5: (5, "forward"), 10: (10, "reverse"), 15: (10, "reverse"), 17: (12, "reverse"),
                22: (17, "reverse"), 23: (19, "forward"), 26: (21, "forward")}
    for on_a, (on_b, via) in expected.items():
        got = gs.failover_after_way_back(on_a, forward, reverse)
        assert (got.outcome, got.offset, got.via) == (gs.EXACT, on_b, via), (on_a, got)
    # The forward map alone sends a group inside the reverse copies past B's own records it never read.
    assert gs.failover(17, forward).offset == 19
    # Without a way back nothing changes.
    assert gs.failover_after_way_back(17, forward, None) == gs.failover(17, forward)
