"""Group failback after a reverse, across both offset maps (core/groupwayback.py; which moves take it:
driver/groupwayback.find): every case on one worked partition whose logs are written out below, so each
expected offset can be checked by eye.

Old source A, partition 0 (offsets: what lies there)
  0..9    a0..a9, copied by m
  10 11   diverged records d0 d1 (never on B)
  12      a transaction marker
  13 14   diverged records d2 d3;   old_source_end = 15 (m's progress at the promotion: 10)
  15      the abort marker of the transaction the killed producer left open
  16..19  m__reverse's copies of b0..b3, 20 its marker
  21..23  m__reverse's copies of b4..b6, 24 its marker
New primary B, partition 0
  0..4    copies of a0..a4, 5 marker (m's first transaction)
  6..10   copies of a5..a9, 11 marker;  the promotion point target_end = 12
  12..15  b0..b3 (produced on B after the promotion), 16 marker
  17..19  b4..b6, 20 marker;  B's end 21 = m__reverse's progress
"""

from dataclasses import replace
from pathlib import Path

import pytest

from eosmirror.core import config, report
from eosmirror.core import groupfailover as gf
from eosmirror.core import groupwayback as wb
from eosmirror.core import migration as mg
from eosmirror.core import mirrorstate as ms
from eosmirror.core.mirrorstate import PartitionPoint
from eosmirror.core.offsetsync import BOUNDARY_SLOT, OffsetSync, PartitionSyncs
from eosmirror.core.syncscan import Need
from eosmirror.driver import groupwayback
from eosmirror.kafka.cluster import Cluster

TP = ("t", 0)
POINT = PartitionPoint("t", "t", 0, target_end=12, progress=10, old_source_end=15)
FORWARD = PartitionSyncs([OffsetSync("t", 0, "t", 0, 5, 0, ((0, 5),)), OffsetSync("t", 0, "t", 5, 10, 6, ((5, 5),))])
REVERSE = PartitionSyncs([
    OffsetSync("t", 0, "t", 12, 12, 16, (), slot=BOUNDARY_SLOT),          # `reverse` set m__reverse's start
    OffsetSync("t", 0, "t", 12, 17, 16, ((12, 4),)),
    OffsetSync("t", 0, "t", 17, 21, 21, ((17, 3),)),
])
BEFORE_POINT = gf.LogRead(11, 12, ())                 # B [end of m's copies, target_end): only the marker
DIVERGED = gf.LogRead(10, 15, (10, 11, 13, 14))       # A [progress, old_source_end), read_committed
MAPS = wb.PartitionMaps(point=POINT, forward=FORWARD, reverse=REVERSE, before_point=BEFORE_POINT,
                        diverged=DIVERGED, side="t.diverged.m[0]")


@pytest.mark.parametrize("committed, offset, via", [
    (0, 0, wb.FORWARD_MAP),       # read nothing on B: a0 next
    (3, 3, wb.FORWARD_MAP),       # inside the forward-copied range: processed a0..a2, a3 next
    (5, 5, wb.FORWARD_MAP),       # between the forward mirror's runs (its marker): a5 next
    (10, 9, wb.FORWARD_MAP),      # the last copy (a9, at B 10) not processed yet
    (11, 16, wb.REVERSE_MAP),     # every copy processed, only the marker left before the promotion point: b0 next
    (12, 16, wb.REVERSE_MAP),     # at the promotion point: b0 (the first record produced on B) next
    (14, 18, wb.REVERSE_MAP),     # inside the B-produced range: processed b0 b1, b2 next
    (16, 21, wb.REVERSE_MAP),     # between m__reverse's runs (B's marker): b4 next
    (21, 24, wb.REVERSE_MAP),     # at the end of what m__reverse copied: the next copy lands after A's 24
])
def test_each_position_moves_through_the_map_that_holds_its_next_record(committed, offset, via):
    assert wb.translate(committed, MAPS) == gf.Translation(gf.EXACT, offset, via=via)


def test_beyond_what_the_reverse_mirror_copied_waits_and_says_so():
    assert wb.translate(23, MAPS) == gf.Translation(gf.WAITING, records=2, via=wb.REVERSE_MAP)
    plan = wb.plan_group("g", "EMPTY", {TP: 23}, {}, {TP: MAPS}, {"t": "t"}, allow_rewind=False)
    assert plan.writes() == {} and plan.left() == {gf.WAITING: 1}
    shown = report.groups_table({
        "mirror": "m", "direction": "failback", "dry_run": True, "read_from": "target", "written_to": "source",
        "checkpoints_topic": "target.checkpoints.internal", "way_back": {
            "forward": "m", "reverse": "m__reverse", "state": "reversed since ...", "promotion": "promoted at ..."},
        "groups": [{**plan.as_dict(), "written": False, "error": None, "left": plan.left()}]})
    assert "waiting for m__reverse: 2 offsets of the new primary not copied back yet; run m__reverse first" in shown
    assert "through both offset maps" in shown and " map " in shown, shown


def test_a_record_on_b_before_the_promotion_point_that_is_no_copy_keeps_the_forward_map():
    # someone wrote a record at B 11 before the promotion: a group at 11 has it next, which neither
    # mirror copied: the forward map answers (m's progress), the reverse map is not used
    maps = wb.PartitionMaps(point=POINT, forward=FORWARD, reverse=REVERSE, before_point=gf.LogRead(11, 12, (11,)))
    assert wb.translate(11, maps) == gf.Translation(gf.EXACT, 10, via=wb.FORWARD_MAP)
    # not read (the driver reads only where a group committed in it): never guessed to be the same position
    unread = wb.PartitionMaps(point=POINT, forward=FORWARD, reverse=REVERSE)
    assert wb.translate(11, unread).via == wb.FORWARD_MAP


def test_a_partition_created_on_the_new_primary_after_the_promotion_has_only_the_reverse_map():
    reverse = PartitionSyncs([OffsetSync("n", 0, "n", 0, 0, 0, (), slot=BOUNDARY_SLOT),
                              OffsetSync("n", 0, "n", 0, 6, 0, ((0, 5),))])
    assert wb.translate(2, wb.PartitionMaps(reverse=reverse)) == gf.Translation(gf.EXACT, 2, via=wb.REVERSE_MAP)
    assert wb.translate(2, wb.PartitionMaps()).outcome == gf.NOT_MIRRORED


def test_the_plan_counts_the_diverged_records_it_passes_over_from_the_read_not_from_offsets():
    plan = wb.plan_group("g", "EMPTY", {TP: 14}, {}, {TP: MAPS}, {"t": "t"}, allow_rewind=False)
    (p,) = plan.partitions
    assert (p.new_offset, p.decision, p.via) == (18, gf.WRITE, wb.REVERSE_MAP)
    # offsets 10..14 are five, but 12 is a marker: four records
    assert p.diverged == {"records": 4, "first_offset": 10, "last_offset": 14, "diverged": 4,
                          "side_topic": "t.diverged.m[0]"}
    # a group that had read d0 d1 on A before the disaster passes over only d2 d3
    plan = wb.plan_group("g", "EMPTY", {TP: 14}, {TP: 12}, {TP: MAPS}, {"t": "t"}, allow_rewind=False)
    assert plan.partitions[0].diverged["records"] == 2 and plan.partitions[0].diverged["first_offset"] == 13
    # a forward-map move stays before the divergence: it passes over none
    assert wb.plan_group("g", "EMPTY", {TP: 3}, {}, {TP: MAPS}, {"t": "t"}, False).partitions[0].diverged is None


def test_an_active_group_is_skipped_whole_and_a_backward_move_is_refused_unless_allowed():
    active = wb.plan_group("g", "STABLE", {TP: 14}, {}, {TP: MAPS}, {"t": "t"}, allow_rewind=False)
    assert active.skipped and active.writes() == {}
    ahead = wb.plan_group("g", "EMPTY", {TP: 14}, {TP: 30}, {TP: MAPS}, {"t": "t"}, allow_rewind=False)
    assert ahead.partitions[0].decision == gf.REWIND_REFUSED and ahead.writes() == {}
    assert ahead.left() == {gf.REWIND_REFUSED: 1}
    allowed = wb.plan_group("g", "EMPTY", {TP: 14}, {TP: 30}, {TP: MAPS}, {"t": "t"}, allow_rewind=True)
    assert allowed.writes() == {TP: 18}
    there = wb.plan_group("g", "EMPTY", {TP: 14}, {TP: 18}, {TP: MAPS}, {"t": "t"}, allow_rewind=False)
    assert there.partitions[0].decision == gf.UNCHANGED and there.partitions[0].diverged["records"] == 0


def test_the_reads_asked_for_are_only_those_the_positions_need():
    committed = [{TP: 3, ("t", 1): 20}, {TP: 11}, {("n", 0): 4}]
    points = {TP: POINT, ("t", 1): PartitionPoint("t", "t", 1, 12, 10, old_source_end=10)}
    cycles = wb.reversed_cycles(committed, points)
    forward, reverse = wb.sync_needs(committed, cycles)
    assert forward == {TP: Need(target_offset=3)}                      # only positions below a point
    assert reverse == {TP: Need(source_offset=12), ("t", 1): Need(source_offset=20),
                       ("n", 0): Need(source_offset=4)}
    # B is read between m's last copy and the point only where a group committed there
    assert wb.before_point_ranges(committed, cycles, {TP: FORWARD}) == {TP: (11, 12)}
    assert wb.before_point_ranges([{TP: 3}], cycles, {TP: FORWARD}) == {}
    # A's diverged range, from A's log start when retention removed some of it since
    assert wb.diverged_ranges(committed, points, {}) == {TP: (10, 15), ("t", 1): (10, 10)}
    assert wb.diverged_ranges(committed, points, {("t", 0): 13})[TP] == (13, 15)


def test_both_commands_take_the_way_back_while_the_forward_mirror_is_reversed(monkeypatch):
    """`groups sync m --direction failback` and `groups sync m__reverse` (failover) find the same way
    back, built from the forward mirror (its configured progress group, its clusters); any other move,
    or a mirror in another state that was never resumed, keeps its own map (driver/groupwayback.find)."""
    file = config.parse({"mirrors": [
        {"name": "dr", "source": {"local": "source"}, "target": {"local": "target"}, "topics": ["orders"],
         "groups": {}, "progress_group": "custom"},
        {"name": "pre", "source": {"local": "source"}, "target": {"local": "target"}, "topics": ["orders"],
         "replication_policy": "prefix", "source_alias": "dc1"}]}, Path("m.yaml"))
    phase = {"now": ms.Phase.REVERSED}
    asked = []

    def read_state(cluster, mirror, group):
        asked.append((cluster.role, mirror, group))
        return ms.MirrorState(phase["now"], 5, "cli:ops", (POINT,), note="promoted at X; divergence 4")

    monkeypatch.setattr(groupwayback.state, "read_mirror_state", read_state)
    monkeypatch.setattr(groupwayback.state, "read_audit", lambda cluster, mirror, group: [])
    monkeypatch.setattr(groupwayback.topics, "resolve", lambda mirror, cluster: [
        type("Pair", (), {"source": "t", "target": "t", "partitions": 1})()])
    monkeypatch.setattr(Cluster, "resolve", classmethod(
        lambda cls, role, ref, name: Cluster.from_settings(role, {"bootstrap.servers": "x:1"}, f"{role} of {name}")))
    by_failback = groupwayback.find(file.get("dr"), gf.FAILBACK)
    by_reverse = groupwayback.find(file.get("dr__reverse"), gf.FAILOVER)
    for way in (by_failback, by_reverse):
        assert (way.forward.name, way.reverse.name, way.new.label, way.old.label) == (
            "dr", "dr__reverse", "target of dr", "source of dr")
        assert way.points == {TP: POINT} and way.topic_map == {"t": "t"}
        assert way.checkpoints_topic == "target.checkpoints.internal"
    assert asked == [("target", "dr", "custom")] * 2              # m's state, read with m's own group
    assert groupwayback.find(file.get("dr"), gf.FAILOVER) is None                 # the forward mirror's failover
    assert groupwayback.find(file.get("dr__reverse"), gf.FAILBACK) is None       # the reverse mirror's failback
    assert groupwayback.find(file.get("pre"), gf.FAILBACK) is None               # no reverse for a prefix mirror
    phase["now"] = ms.Phase.PROMOTED
    assert groupwayback.find(file.get("dr"), gf.FAILBACK) is None                # not reversed (yet), never resumed

    # After a resume (mirroring again): the failback of m keeps the way back, from the audit records
    # (m's `resume` on B, m__reverse's `reverse` on A); the retired reverse mirror's failover does not.
    audits = {("target", "dr"): [mg.AuditRecord("resume", "dr", "switch back", "ops", 200, (
                  mg.PartitionChange("t", "t", 0, 10, 25, 21),))],
              ("source", "dr__reverse"): [mg.AuditRecord("reverse", "dr__reverse", "promotion", "ops", 100, (
                  mg.PartitionChange("t", "t", 0, None, 12, 16),))]}
    monkeypatch.setattr(groupwayback.state, "read_audit",
                        lambda cluster, mirror, group: audits.get((cluster.role, mirror), []))
    phase["now"] = ms.Phase.MIRRORING
    way = groupwayback.find(file.get("dr"), gf.FAILBACK)
    assert way.cycles == {TP: (wb.Cycle(12, 21),)} and way.points == {}       # the resume's points are no promotion
    assert way.cycles_of([{TP: 14, ("t", 1): 3}]) == {TP: (wb.Cycle(12, 21),), ("t", 1): ()}
    assert groupwayback.find(file.get("dr__reverse"), gf.FAILOVER) is None
    phase["now"] = ms.Phase.RESUMING                                            # both commands, as while reversed
    assert groupwayback.find(file.get("dr__reverse"), gf.FAILOVER).cycles == {TP: (wb.Cycle(12, 21),)}
    # reversed a second time (promotion point 12 in this fake state): the first cycle's stretch stays,
    # the one under way follows it
    phase["now"] = ms.Phase.REVERSED
    assert groupwayback.find(file.get("dr"), gf.FAILBACK).cycles_of([{TP: 30}]) == {
        TP: (wb.Cycle(12, 21), wb.Cycle(POINT.target_end))}


def test_the_table_says_what_each_move_passes_over_and_where_it_is():
    plan = wb.plan_group("g", "EMPTY", {TP: 14}, {}, {TP: MAPS}, {"t": "t"}, allow_rewind=False)
    unsaved = wb.plan_group("g", "EMPTY", {TP: 14}, {}, {TP: replace(MAPS, side=None)}, {"t": "t"}, False)
    way = {"forward": "m", "reverse": "m__reverse", "state": "reversed", "promotion": "promoted at ..."}
    for p, where in ((plan, "a copy of each is in t.diverged.m[0]"),
                     (unsaved, "they stay only in the old source's log (`eosmirror reverse m --divergence copy`")):
        shown = report.groups_table({"mirror": "m__reverse", "direction": "failover", "dry_run": False,
                                     "read_from": "target", "written_to": "source", "checkpoints_topic": "c",
                                     "way_back": way, "groups": [{**p.as_dict(), "written": True, "error": None,
                                                                  "left": p.left()}]})
        assert ("t[0]: passes over 4 of the 4 diverged record(s) (old source offsets 10..14), never on the new "
                "primary; " + where) in shown, shown


# After `eosmirror resume m` the same partition goes on (module doc above): the switch back at B 21
# (m__reverse's progress = B's end), the resume moved m's progress on A to 25 (after the reverse's
# marker at 24) with the sync "A 25 -> B 21"; then m copied A 25..27 to B 21..23, its marker at 24.
RESUMED = PartitionSyncs(FORWARD.syncs + [OffsetSync("t", 0, "t", 25, 25, 21, (), slot=BOUNDARY_SLOT),
                                          OffsetSync("t", 0, "t", 25, 28, 21, ((25, 3),))])
ONE_CYCLE = (wb.Cycle(12, 21),)                # [P, b0): the reverse audit's start, the resume's target end
AFTER = wb.PartitionMaps(forward=RESUMED, reverse=REVERSE, cycles=ONE_CYCLE, before_point=gf.LogRead(11, 12, ()))


@pytest.mark.parametrize("committed, offset, via", [
    (3, 3, wb.FORWARD_MAP),       # before the promotion point, on a copy: a3 next, as before the resume
    (10, 9, wb.FORWARD_MAP),      # the last copy before the promotion not processed yet
    (11, 16, wb.REVERSE_MAP),     # every copy processed, only m's marker before P: b0 next (on A at 16)
    (12, 16, wb.REVERSE_MAP),     # stale at P: b0 next, never the forward mirror's A 25 (the skip)
    (14, 18, wb.REVERSE_MAP),     # stale inside B's own records: b2 next
    (20, 24, wb.REVERSE_MAP),     # B's last marker before the switch back: A after m__reverse's last copy
    (21, 25, wb.FORWARD_MAP),     # at b0: the resume's sync, A 25 (the first record A received after it)
    (22, 26, wb.FORWARD_MAP),     # inside the forward copies after the resume
    (24, 28, wb.FORWARD_MAP),     # past the last copy, only its marker between: m's progress
])
def test_after_the_resume_b_s_own_records_keep_the_reverse_map_and_the_rest_the_forward_one(committed, offset, via):
    assert wb.translate(committed, AFTER) == gf.Translation(gf.EXACT, offset, via=via)


def test_the_plain_failback_skips_what_a_stale_group_never_read_after_the_resume():
    """What this rule prevents: m's own map alone sends the group at B 14 to A 25 ("between two runs"),
    passing over b2..b6 (A 18..23) that it never read."""
    assert gf.failback(14, RESUMED) == gf.Translation(gf.EXACT, 25)
    assert wb.translate(14, AFTER).offset == 18


def test_past_m_s_copies_after_the_resume_a_record_that_is_no_copy_is_reported():
    tail = wb.PartitionMaps(forward=RESUMED, reverse=REVERSE, cycles=ONE_CYCLE, before_point=gf.LogRead(24, 26, (25,)))
    assert wb.translate(26, tail) == gf.Translation(gf.BEYOND_MIRROR, records=1, via=wb.FORWARD_MAP)
    # a record written on B before the promotion (B 11, no copy): the forward map below P, not the
    # forward copies after b0 (they are another stretch)
    foreign = replace(AFTER, before_point=gf.LogRead(11, 12, (11,)))
    assert wb.translate(11, foreign) == gf.Translation(gf.EXACT, 10, via=wb.FORWARD_MAP)


def test_a_way_back_whose_start_is_not_recorded_moves_only_what_lies_on_a_copy():
    unknown = replace(AFTER, cycles=(wb.Cycle(None, 21),))
    assert wb.translate(3, unknown) == gf.Translation(gf.EXACT, 3, via=wb.FORWARD_MAP)
    assert wb.translate(14, unknown) == gf.Translation(wb.UNRECORDED, records=7)
    assert wb.translate(11, unknown).outcome == wb.UNRECORDED
    assert wb.translate(22, unknown) == gf.Translation(gf.EXACT, 26, via=wb.FORWARD_MAP)
    plan = wb.plan_group("g", "EMPTY", {TP: 14}, {}, {TP: unknown}, {"t": "t"}, allow_rewind=False)
    assert plan.writes() == {} and plan.left() == {wb.UNRECORDED: 1}
    shown = report.groups_table({
        "mirror": "m", "direction": "failback", "dry_run": False, "read_from": "target", "written_to": "source",
        "checkpoints_topic": "target.checkpoints.internal", "way_back": {
            "forward": "m", "reverse": "m__reverse", "state": "mirroring since ...", "promotion": "1 way back(s)"},
        "groups": [{**plan.as_dict(), "written": False, "error": None, "left": plan.left()}]})
    assert "7 offsets of the new primary went back by m__reverse, whose start there is not recorded" in shown, shown
    assert "`eosmirror history m__reverse` shows no `reverse` before the resume" in shown, shown


def test_the_cycles_come_from_the_audit_records_in_the_order_they_were_written():
    # reverse at P=12 (t=100), resume b0=21 (t=200), promoted again and reversed at P=30 (t=300)
    assert wb.cycles_from_audits([(200, 21)], [(100, 12), (300, 30)], resuming=False) == (wb.Cycle(12, 21),)
    # a second cycle resumed too; a promotion right after a resume has P == the previous b0: times decide
    assert wb.cycles_from_audits([(200, 21), (400, 40)], [(100, 12), (300, 21)], resuming=False) == (
        wb.Cycle(12, 21), wb.Cycle(21, 40))
    # resuming, its progress not moved yet: the newest reverse's cycle is open
    assert wb.cycles_from_audits([(200, 21)], [(100, 12), (300, 30)], resuming=True) == (
        wb.Cycle(12, 21), wb.Cycle(30))
    assert wb.cycles_from_audits([], [(100, 12)], resuming=True) == (wb.Cycle(12),)
    # a resume without a reverse before it (or one past its end): not recorded, never guessed
    assert wb.cycles_from_audits([(200, 21)], [], resuming=False) == (wb.Cycle(None, 21),)
    assert wb.cycles_from_audits([(200, 21)], [(100, 25)], resuming=False) == (wb.Cycle(None, 21),)
    assert wb.cycles_from_audits([(200, 21)], [(300, 12)], resuming=False) == (wb.Cycle(None, 21),)


def test_two_cycles_each_stretch_through_its_own_map():
    """Cycle 1 [12, 21) resumed; m then copied B 21..23 (marker 24); promoted at P=25, reversed again:
    m__reverse's second start B 25 -> A 30 (A's end then), B's records 25..27 copied to A 30..32."""
    reverse = PartitionSyncs(REVERSE.syncs + [OffsetSync("t", 0, "t", 25, 25, 30, (), slot=BOUNDARY_SLOT),
                                              OffsetSync("t", 0, "t", 25, 28, 30, ((25, 3),))])
    maps = wb.PartitionMaps(forward=RESUMED, reverse=reverse, cycles=(wb.Cycle(12, 21), wb.Cycle(25)),
                            before_point=gf.LogRead(11, 25, (12, 13, 14, 15, 17, 18, 19, 21, 22, 23)))
    assert [wb.translate(x, maps).offset for x in (3, 11, 14, 21, 23, 24, 26)] == [3, 16, 18, 25, 27, 30, 31]
    assert [wb.translate(x, maps).via for x in (14, 22, 24, 26)] == [wb.REVERSE_MAP, wb.FORWARD_MAP] + [wb.REVERSE_MAP] * 2
    assert wb.sync_needs([{TP: 14}, {TP: 22}], {TP: maps.cycles}) == (
        {TP: Need(target_offset=22)}, {TP: Need(source_offset=14)})
    assert wb.before_point_ranges([{TP: 11}, {TP: 24}], {TP: maps.cycles}, {TP: RESUMED}) == {TP: (11, 25)}
