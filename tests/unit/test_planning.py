import pytest

from eosmirror import planning
from eosmirror.errors import DataLossError
from eosmirror.planning import PartitionObservation as Obs


def obs(**kw):
    base = dict(source_topic="s", target_topic="t", partition=0, log_start=0, last_stable=100, start_from_offset=0)
    base.update(kw)
    return Obs(**base)


def test_slot_of_a_partition_depends_only_on_partition_and_slot_count():
    before = {(t, p): planning.slot_for(t, p, 3) for t in ["a", "b"] for p in range(8)}
    after = {(t, p): planning.slot_for(t, p, 3) for t in ["a", "b", "c", "zz"] for p in range(16)}
    assert all(after[k] == v for k, v in before.items())  # new topics/partitions move nothing


def test_partitions_of_a_topic_spread_over_all_slots():
    assert {planning.slot_for("orders", p, 4) for p in range(4)} == {0, 1, 2, 3}


def test_progress_wins_over_recovered_and_start_from():
    assert planning.plan_partition(obs(progress=40, recovered=30, start_from_offset=90), 2).start == 40
    plan = planning.plan_partition(obs(recovered=30, start_from_offset=90), 2)
    assert (plan.start, plan.origin) == (30, planning.ORIGIN_RECOVERED)
    plan = planning.plan_partition(obs(start_from_offset=90), 2)
    assert (plan.start, plan.end, plan.origin) == (90, 100, planning.ORIGIN_START_FROM)


def test_end_is_bounded_by_lso_until_and_max_records():
    assert planning.plan_partition(obs(progress=10), 1).end == 100
    assert planning.plan_partition(obs(progress=10, until_offset=50), 1).end == 50
    assert planning.plan_partition(obs(progress=10, until_offset=-1), 1).end == 100   # no record at/after until
    assert planning.plan_partition(obs(progress=10), 1, max_records=5).end == 15
    assert planning.plan_partition(obs(progress=60, until_offset=50), 1).pending == 0  # old interval: no-op


def test_truncated_progress_fails_loudly_naming_the_loss():
    with pytest.raises(DataLossError, match=r"offsets 10\.\.39 were deleted.*up to 30 records"):
        planning.plan_partition(obs(progress=10, log_start=40), 1)


def test_expired_progress_recovered_below_log_start_also_fails():
    with pytest.raises(DataLossError):
        planning.plan_partition(obs(recovered=10, log_start=40), 1)


def test_never_mirrored_partition_starts_at_log_start_without_loss():
    plan = planning.plan_partition(obs(start_from_offset=0, log_start=40), 1)
    assert (plan.start, plan.lost) == (40, 0)


def test_skip_to_log_start_is_explicit_and_counted():
    plan = planning.plan_partition(obs(progress=10, log_start=40), 1, on_truncation="skip_to_log_start")
    assert (plan.start, plan.lost, plan.origin) == (40, 30, planning.ORIGIN_TRUNCATED)


def test_progress_beyond_source_end_means_recreated_or_lost_topic():
    with pytest.raises(DataLossError, match="beyond the source's end offset"):
        planning.plan_partition(obs(progress=150), 1)


def test_plan_run_lists_every_slot_even_empty_ones():
    slots = planning.plan_run([obs(partition=p) for p in range(3)], 5, "eosmirror", "m")
    assert [s.slot for s in slots] == [0, 1, 2, 3, 4]
    assert sum(len(s.partitions) for s in slots) == 3
    assert slots[1].transactional_id == "eosmirror.m.1"
    for s in slots:
        assert all(p.slot == s.slot for p in s.partitions)
