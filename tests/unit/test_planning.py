import pytest

from eosmirror.core import planning
from eosmirror.core.errors import DataLossError
from eosmirror.core.planning import PartitionObservation as Obs


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


# --- start_from applies only to a topic's first mirroring --------------------------------------------

def test_start_from_applies_to_a_topic_the_mirror_never_copied():
    # start_from: latest resolved to the end: nothing old is copied, on the topic's first mirroring only
    plan = planning.plan_partition(obs(start_from_offset=100, log_start=0), 2)
    assert (plan.start, plan.end, plan.origin) == (100, 100, planning.ORIGIN_START_FROM)


def test_a_partition_added_to_a_mirrored_topic_is_copied_from_its_first_offset_whatever_start_from_says():
    # the acceptance run's loss: p2 added with 216 committed records, start_from: latest resolved to 216
    plan = planning.plan_partition(obs(partition=2, last_stable=216, start_from_offset=216, topic_mirrored=True), 2)
    assert (plan.start, plan.end, plan.pending, plan.origin, plan.lost) == (0, 216, 216, planning.ORIGIN_NEW_PARTITION, 0)
    # a timestamp start_from is ignored the same way
    plan = planning.plan_partition(obs(last_stable=50, start_from_offset=30, topic_mirrored=True), 2)
    assert (plan.start, plan.origin) == (0, planning.ORIGIN_NEW_PARTITION)


def test_progress_and_recovered_positions_still_win_in_a_mirrored_topic():
    assert planning.plan_partition(obs(progress=40, topic_mirrored=True, start_from_offset=100), 1).start == 40
    plan = planning.plan_partition(obs(recovered=30, topic_mirrored=True, start_from_offset=100), 1)
    assert (plan.start, plan.origin) == (30, planning.ORIGIN_RECOVERED)


def test_records_deleted_from_a_new_partition_before_the_mirror_copied_them_are_a_truncation():
    with pytest.raises(DataLossError, match=r"partition 3 was added to s after the mirror began copying.*"
                                            r"offsets 0\.\.24 were deleted.*up to 25 records"):
        planning.plan_partition(obs(partition=3, log_start=25, start_from_offset=100, topic_mirrored=True), 1)


def test_skip_to_log_start_on_a_new_partition_counts_the_loss_and_keeps_its_origin():
    plan = planning.plan_partition(obs(log_start=25, start_from_offset=100, topic_mirrored=True), 1,
                                   on_truncation="skip_to_log_start")
    # origin stays "new-partition": the slot must not expect committed progress for it
    assert (plan.start, plan.end, plan.lost, plan.origin) == (25, 100, 25, planning.ORIGIN_NEW_PARTITION)


def test_max_records_bounds_a_new_partition_from_its_first_offset():
    plan = planning.plan_partition(obs(start_from_offset=100, topic_mirrored=True), 1, max_records=10)
    assert (plan.start, plan.end) == (0, 10)


def test_plan_run_mixes_first_mirroring_and_new_partitions():
    observations = [obs(source_topic="old", target_topic="old", partition=0, progress=100),
                    obs(source_topic="old", target_topic="old", partition=1, start_from_offset=100,
                        topic_mirrored=True),
                    obs(source_topic="fresh", target_topic="fresh", partition=0, start_from_offset=100)]
    plans = {(p.target_topic, p.partition): p for s in planning.plan_run(observations, 2, "eosmirror", "m")
             for p in s.partitions}
    assert [(k, plans[k].start, plans[k].origin) for k in sorted(plans)] == [
        (("fresh", 0), 100, planning.ORIGIN_START_FROM),
        (("old", 0), 100, planning.ORIGIN_PROGRESS),
        (("old", 1), 0, planning.ORIGIN_NEW_PARTITION)]


def test_a_topic_counts_as_mirrored_when_any_partition_has_progress_or_an_offset_sync():
    from eosmirror.core.offsetsync import OffsetSync, PartitionSyncs
    from eosmirror.driver.observe import mirrored_topics
    from eosmirror.driver.topics import TopicPair

    pairs = [TopicPair("a", "a", 3, "ida"), TopicPair("b", "x.b", 2, "idb"), TopicPair("c", "c", 1, "idc")]
    committed = {("a", 0): object()}                                       # progress of a's partition 0
    syncs = {("x.b", 1): PartitionSyncs([OffsetSync("x.b", 1, "b", 0, 5, 0, ((0, 5),))])}  # b's progress expired
    assert mirrored_topics(pairs, committed, syncs) == {"a", "x.b"}        # c: never copied -> start_from
    assert mirrored_topics(pairs, {}, {}) == set()


def test_an_unsettled_answer_in_a_mirrored_topic_stops_the_plan_and_names_the_fence(caplog, monkeypatch):
    from eosmirror.core import settle
    from eosmirror.core.errors import ProgressUnavailableError
    from eosmirror.driver import observe
    from tests.support.configs import one

    m = one()
    target = type("Target", (), {"label": "target"})()
    monkeypatch.setattr(observe, "holders", lambda mirror, cluster: "eos.m1.0 (Ongoing, open for 20 s)")
    stuck = settle.Outcome(settle.STUCK, [settle.Look(0.0, 2), settle.Look(16.0, 2)], 15.0, 60.0)
    observe._refuse_unsettled(m, set(), {"a.x"}, target)   # nothing pending: nothing to say
    with pytest.raises(ProgressUnavailableError) as refused:
        observe._refuse_unsettled(m, {("a.x", 3), ("a.y", 0)}, {"a.x"}, target, stuck)
    text = str(refused.value)
    assert "1 partition(s)" in text and "a.x[3]" in text and "eosmirror fence m1" in text and "not offset 0" in text
    # The refusal says why it stopped waiting and who can hold the transaction, before "fence".
    assert "none settled in the last 15 s" in text
    assert text.index("eos.m1.0 (Ongoing") < text.index("eosmirror fence m1")
    # A topic's first mirroring goes on (the slots read the settled start after fencing), and says so once.
    caplog.set_level("WARNING", logger="eosmirror")
    observe._refuse_unsettled(m, {("a.y", 0), ("a.y", 1)}, {"a.x"}, target, stuck)
    assert [r.getMessage().count("not stable") for r in caplog.records] == [1]


def test_a_follower_committing_beside_the_plan_is_not_mistaken_for_a_truncated_source(monkeypatch):
    """A follow run commits its progress ten times a second while the next run plans: the last
    stable offsets were read beside the progress, so a progress read a moment later can be beyond
    them (soak at 9b819b2: "progress 738124 is beyond the source's end offset 737743", the run failed).
    observe reads them again after the progress; a progress still beyond them is the loud error."""
    import threading

    from eosmirror.driver import observe
    from eosmirror.driver.topics import TopicPair
    from eosmirror.kafka.progress import Progress
    from tests.support.configs import one

    lso = {"now": 737_743}
    lock = threading.Lock()

    def list_offsets_of(source, specs):
        kind = type(next(iter(specs.values()))).__name__.lower()
        with lock:
            value = 0 if "earliest" in kind else lso["now"]
        return dict.fromkeys(specs, value)

    def read_settled(target, partitions, group, settle_seconds, bound_seconds):
        with lock:
            lso["now"] = 738_200        # the follower read on and committed 738,124 meanwhile
        return {("t", 0): Progress(offset=738_124, source_topic="t", source_topic_id="id")}, set(), None

    monkeypatch.setattr(observe, "list_offsets_of", list_offsets_of)
    monkeypatch.setattr(observe.progress, "read_settled", read_settled)
    monkeypatch.setattr(observe, "_start_from", lambda mirror, source, tps, earliest, stable: dict.fromkeys(tps, 0))
    pairs = [TopicPair("t", "t", 1, "id")]
    target = type("Target", (), {"label": "target"})()
    got = observe.observe(one(), pairs, source=None, target=target, target_topic_ids={"t": "tid"})
    assert [(o.progress, o.last_stable) for o in got] == [(738_124, 738_200)]
    planning.plan_partition(got[0], 2)                      # plans; before the fix: DataLossError

    assert observe.progress_beyond({("t", 0): 10}, {("t", 0): Progress(offset=11)}, pairs)
    assert not observe.progress_beyond({("t", 0): 11}, {("t", 0): Progress(offset=11)}, pairs)
