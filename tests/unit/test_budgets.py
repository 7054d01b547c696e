"""Budgets of waits on the source, in measured round trips (core/budgets.py)."""

from eosmirror.core import budgets
from eosmirror.core.runreport import SlotResult


def test_a_fixed_budget_is_a_floor_that_a_long_link_stretches():
    assert budgets.stretched(10.0, None, 100) == 10.0            # not measured: the fixed budget
    assert budgets.stretched(10.0, 0.001, budgets.ASK) == 10.0   # loopback: the floor
    assert budgets.stretched(1.0, 0.15, budgets.ASK) == budgets.SLACK * budgets.ASK * 0.15   # 150 ms: 3.6 s


def test_a_group_sync_needs_round_trips_per_batch_of_groups_read_at_once():
    few, many = budgets.group_sync_round_trips(5, 8), budgets.group_sync_round_trips(1000, 8)
    assert few == 2 * budgets.ASK + 2 * budgets.GROUP
    assert many == 2 * budgets.ASK + 2 * budgets.GROUP * 125
    # 1,000 groups 100 ms away: the promotion's 30 s bound (3 x 10 s) would give up on a source that answers
    assert budgets.stretched(30.0, 0.1, many) > 200


def test_a_slot_sums_its_step_times_and_the_report_keeps_them():
    result = SlotResult(slot=0, transactional_id="t")
    result.add_steps(("copy", "flush", "commit"), [10.0, 11.5, 11.75, 12.0])
    result.add_steps(("copy", "flush", "commit"), [20.0, 20.5, 20.5, 21.0])
    assert result.step_seconds == {"copy": 2.0, "flush": 0.25, "commit": 0.75}
    assert SlotResult.from_dict(result.to_dict()).step_seconds == result.step_seconds
