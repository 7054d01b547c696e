"""The disaster-recovery state records (core/mirrorstate.py) and the switchover's quiet wait, without brokers
(the transition table: test_transitions.py)."""

import pytest

from eosmirror.core import mirrorstate as ms
from eosmirror.core.errors import ConfigError
from eosmirror.driver.switchover import SwitchoverOptions, wait_quiet

POINTS = [ms.PartitionPoint("orders", "orders", 0, target_end=120, progress=100, observed_end=130, observed_ms=9_000),
          ms.PartitionPoint("orders", "orders", 1, target_end=51, progress=50, observed_end=50, observed_ms=9_500),
          ms.PartitionPoint("orders", "orders", 2, target_end=0, progress=None, observed_end=None, observed_ms=None)]


def test_the_state_record_reads_back_as_written():
    state = ms.MirrorState(ms.Phase.PROMOTED, 10_000, "airflow:manual__1", tuple(POINTS), "source did not answer")
    assert ms.MirrorState.decode(state.encode()) == state
    assert b'"v":1' in state.encode() and b'"phase":"promoted"' in state.encode()


def test_the_loss_report_counts_what_was_observed_and_says_what_is_unknown():
    report = ms.LossReport(tuple(POINTS), promoted_ms=10_000)
    assert [p.known_missing for p in POINTS] == [30, 0, 0]
    assert report.total == 30 and [p.label for p in report.unobserved] == ["orders[2]"]
    text = "\n".join(report.lines())
    assert "orders[0]: progress 100, source end 130 observed 1.0 s before the promotion: up to 30" in text
    assert "source offsets 100..129" in text
    assert "orders[2]: progress None, source end never observed: unknown" in text
    assert "records written to the source after each partition's observation are unknown" in text
    assert "1 partition(s) were never observed" in text


def test_the_quiet_wait_restarts_while_partitions_move_and_names_them_when_it_gives_up():
    now = [0.0]
    ends = iter([{("t", 0): 5}, {("t", 0): 6}, {("t", 0): 6}, {("t", 0): 6}, {("t", 0): 6}, {("t", 0): 6},
                 {("t", 0): 6}, {("t", 0): 6}])
    said = []
    got, moving = wait_quiet(lambda: next(ends), SwitchoverOptions(wait_s=60, quiet_s=3), said.append,
                             clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert got == {("t", 0): 6} and moving == [] and now[0] >= 3.6     # quiet 3 s counted after the last move
    assert said and "t[0] 5 -> 6" in said[0]

    now[0] = 0.0
    counter = iter(range(1000))
    got, moving = wait_quiet(lambda: {("t", 1): next(counter)}, SwitchoverOptions(wait_s=5, quiet_s=2), said.append,
                             clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert got is None and moving and moving[0].startswith("t[1] ")


def test_switchover_options_out_of_range_are_refused_naming_the_fix():
    with pytest.raises(ConfigError, match="must be longer than the quiet time"):
        SwitchoverOptions(wait_s=5, quiet_s=10).check("m")
    with pytest.raises(ConfigError, match="quiet seconds must be in"):
        SwitchoverOptions(wait_s=5, quiet_s=0).check("m")


def test_a_run_records_the_source_ends_it_planned_against():
    from eosmirror.core import lag
    from eosmirror.core.planning import PartitionPlan
    from eosmirror.core.runreport import RunFailure, RunReport, RunStatus

    plan = [PartitionPlan("orders", "orders", k, start=10, end=20, origin="progress", slot=0, available=20,
                          source_end=20 + k) for k in range(2)]
    report = RunReport(mirror="m", run_id="r", status=RunStatus.OK, dry_run=False, delivery="exactly_once",
                       started_at="2026-11-28T00:00:00+00:00", finished_at="2026-11-28T00:00:01+00:00", source="s",
                       target="t", generation=1, generation_changed=False, topic_sync="", plan=plan)
    assert RunReport.from_dict(report.to_dict()).plan == plan     # source_end travels with the report
    observed = lag.SourceObservation.of_result(report)
    assert observed is not None and observed.ends == (("orders", 0, 20), ("orders", 1, 21))
    assert observed.time_ms == 1_795_824_000_000
    assert lag.SourceObservation.decode(observed.encode()) == observed
    assert lag.SourceObservation.of_result(RunFailure(mirror="m", run_id="r", error="boom")) is None
