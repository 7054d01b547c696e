"""Follow runs (slot/follow.py, the copier's step F, the config and the job's options): the decisions,
against the scripted fakes of test_slot_copier (no brokers; the hand-over on real brokers is
tests/integration/test_follow.py)."""

from __future__ import annotations

import argparse
import datetime as dt

import pytest

from eosmirror.core.errors import ClusterUnreachableError, ConfigError, FencedError
from eosmirror.slot import follow
from eosmirror.slot.copier import SlotCopier
from eosmirror.slot.faults import Faults
from eosmirror.slot.slotstate import PartitionCopy, PartitionTask
from eosmirror.spark import job
from tests.support.configs import error_of, one
from tests.support.fakes import FENCED, SRC, TGT, FakeIO, slot_task, values


class GrowingIO(FakeIO):
    """The source grows by ``arrivals[n]`` records after the n-th committed transaction; the source's
    last stable offset is its length. ``newer_generation_after``: check_generation fails from then on."""

    def __init__(self, clock, initial, arrivals, fail=None):
        super().__init__(clock, {SRC: values(initial)}, per_consume=100, fail=fail)
        self.arrivals, self.stable_reads = list(arrivals), 0
        self.newer_generation = False
        commit = self.producer.commit_transaction

        def commit_then_grow(*timeout):
            commit(*timeout)
            if self.arrivals:
                grown = len(self.consumer.source[SRC]) + self.arrivals.pop(0)
                self.consumer.source[SRC] = values(grown)

        self.producer.commit_transaction = commit_then_grow

    def source_stable_offsets(self, partitions):
        self.stable_reads += 1
        return {k: len(self.consumer.source[k]) for k in partitions}

    def check_generation(self):
        if self.newer_generation:
            raise FencedError("the mirror moved to generation 2")


def follow_task(end, seconds):
    return slot_task(end=end).__class__(**{**slot_task(end=end).__dict__, "follow_until": 50_000.0 + 1000.0 + seconds})


def run(io, task):
    return SlotCopier(task, faults=Faults([]), io=io).run()


def test_a_follow_run_copies_what_arrives_after_its_bound_and_is_handed_over(wall):
    # 5 records below the bound; 4 and then 3 arrive while it follows; the next run fences it at the
    # commit of the 5th transaction (its open transaction is aborted by the broker).
    io = GrowingIO(wall, 5, [4, 3, 0, 0], fail={"commit_transaction": [None, None, None, None, FENCED]})
    result = run(io, follow_task(end=5, seconds=600))
    assert (result.status, result.follow_end, result.error) == ("handed-over", "handed-over", None)
    assert io.target.values(TGT) == values(12) and io.target.progress == {TGT: 12}
    assert result.records == 12 and result.transactions == 4 and io.stable_reads >= 1


def test_fenced_by_a_newer_generation_while_following_stays_fenced(wall):
    io = GrowingIO(wall, 3, [2], fail={"commit_transaction": [None, None, FENCED]})
    task = follow_task(end=3, seconds=600)
    copier = SlotCopier(task, faults=Faults([]), io=io)
    start = copier._start

    def start_then_replan():
        start()
        io.newer_generation = True   # the slots are re-planned after this slot started

    copier._start = start_then_replan
    result = copier.run()
    assert (result.status, result.error_type) == ("fenced", "FencedError") and io.target.progress == {TGT: 5}


def test_a_follow_run_without_a_next_run_ends_at_its_bound_ok(wall):
    io = GrowingIO(wall, 3, [1, 1])
    result = run(io, follow_task(end=3, seconds=5))
    assert (result.status, result.follow_end) == ("follow-bound", "follow-bound")
    assert io.target.values(TGT) == values(5) and io.target.progress == {TGT: 5}
    assert 3 <= result.follow_seconds <= 6   # the bound counts from the run's start, not the follow's
    # Idle rounds still commit a progress-only transaction (how an idle follower learns it was fenced),
    # one per max_transaction_seconds at most.
    assert result.transactions >= 4


def test_an_idle_follower_learns_of_the_hand_over_from_its_progress_transaction(wall):
    io = GrowingIO(wall, 2, [], fail={"commit_transaction": [None, None, FENCED]})
    result = run(io, follow_task(end=2, seconds=600))
    assert (result.status, result.records) == ("handed-over", 2) and io.target.progress == {TGT: 2}


def test_a_follower_taking_over_with_its_bounded_ranges_complete_follows_in_its_first_transaction(wall):
    # The hand-over: the previous run's follower already copied past this run's bound (progress 5,
    # end 5) and 3 records wait. The first transaction copies them; no progress-only bounded
    # transaction comes first (it delayed the hand-over by one transaction). Fenced at the second.
    io = GrowingIO(wall, 8, [], fail={"commit_transaction": [None, FENCED]})
    io.target.progress[TGT] = 5
    result = run(io, follow_task(end=5, seconds=600))
    assert (result.status, result.records, result.transactions) == ("handed-over", 3, 1)
    assert io.target.progress == {TGT: 8}


def test_a_follower_whose_source_stops_answering_fails_loudly(wall):
    io = GrowingIO(wall, 2, [1] * 100)

    def unreachable(partitions):
        raise ClusterUnreachableError("source: no answer to ListOffsets within 30 s")

    io.source_stable_offsets = unreachable
    result = run(io, follow_task(end=2, seconds=600))
    assert (result.status, result.error_type) == ("failed", "ClusterUnreachableError")
    assert "no answer" in result.error and io.target.progress == {TGT: 2}


def test_a_follower_that_reads_nothing_while_the_source_has_more_fails_as_stalled(wall, monkeypatch):
    # The source says 10 more records are stable, but the consumer never gets them.
    monkeypatch.setenv("EOSMIRROR_STALL_SECONDS", "20")
    io = GrowingIO(wall, 2, [])
    io.source_stable_offsets = lambda partitions: {k: 12 for k in partitions}
    result = run(io, follow_task(end=2, seconds=600))
    assert (result.status, result.error_type) == ("failed", "ClusterUnreachableError")
    assert "no records for 20 s" in result.error and io.target.progress == {TGT: 2}


def test_an_idle_caught_up_follower_is_not_stalled(wall, monkeypatch):
    monkeypatch.setenv("EOSMIRROR_STALL_SECONDS", "20")
    io = GrowingIO(wall, 2, [])
    result = run(io, follow_task(end=2, seconds=120))
    assert (result.status, result.follow_end) == ("follow-bound", "follow-bound") and io.stable_reads >= 10


def partition_copy(committed, end):
    return PartitionCopy(PartitionTask("src", "tgt", 0, start=0, end=end, had_progress=True), committed)


def test_open_ends_let_a_range_run_on_and_closing_them_ends_at_the_committed_progress():
    done, behind = partition_copy(10, 10), partition_copy(4, 10)
    follow.open_ends([done, behind])
    assert (done.end, done.done, behind.done) == (follow.OPEN_END, False, False)
    done.next = 25   # a follow transaction copied 10..24
    assert done.reached == 25 and not done.is_complete()
    done.commit()
    follow.close_ends([done, behind])
    assert (done.end, done.done) == (25, True)
    assert (behind.end, behind.done) == (10, False)   # never below the bounded end: it was not reached


def test_caught_up_compares_what_was_reached_with_the_stable_offsets():
    a = partition_copy(10, 10)
    follow.open_ends([a])
    assert follow.caught_up([a], {("src", 0): 10}) is True
    assert follow.caught_up([a], {("src", 0): 11}) is False
    a.position = 11   # the consumer skipped a transaction marker
    assert follow.caught_up([a], {("src", 0): 11}) is True
    assert follow.caught_up([a], {}) is True   # a partition the answer left out waits for nothing known


def test_stop_reasons():
    assert follow.stop_reason(100.0, 100.0, 0, None) == "follow-bound"
    assert follow.stop_reason(99.0, 100.0, 10, 10) == "byte-budget"
    assert follow.stop_reason(99.0, 100.0, 9, 10) is None


# --- config and options ------------------------------------------------------------------------------

def test_follow_is_off_by_default_and_bounded_by_twice_the_schedule_interval():
    assert one().follow is False and one().follow_bound_seconds is None
    m = one(follow=True, max_transaction_seconds=0.5, airflow={"schedule": "*/5 * * * *"})
    assert (m.max_transaction_seconds, m.follow_bound_seconds) == (0.5, 600.0)
    assert one(follow=True, follow_max_seconds=90).follow_bound_seconds == 90.0
    assert one(follow=True, airflow={"schedule": "0 9,17 * * *"}).follow_bound_seconds == 2 * 16 * 3600


@pytest.mark.parametrize("fields, field, hint", [
    ({"max_transaction_seconds": 0.5}, "max_transaction_seconds", "set `follow: true`"),
    ({"follow": True, "delivery": "at_least_once"}, "follow", "exactly_once"),
    ({"follow": True, "airflow": {"schedule": None}}, "follow_max_seconds", "explicit bound"),
    ({"follow": True, "follow_max_seconds": 1}, "follow_max_seconds", "from 10.0"),
    ({"follow": "yes"}, "follow", "true or false"),
])
def test_follow_config_errors_name_the_field_and_the_fix(fields, field, hint):
    text = error_of(**fields)
    assert f"`{field}`" in text and hint in text


def args(**given):
    return argparse.Namespace(**{"follow_seconds": None, "follow_until": None, **given})


def test_follow_options_of_the_job():
    assert job.follow_until(args()) is None
    assert job.follow_until(args(follow_until="2026-11-25T10:00:00Z")) == dt.datetime(2026, 11, 25, 10,
                                                                                      tzinfo=dt.timezone.utc)
    soon = job.follow_until(args(follow_seconds=60))
    assert 55 < (soon - dt.datetime.now(dt.timezone.utc)).total_seconds() <= 60
    for bad, words in ((args(follow_seconds=60, follow_until="2026-11-25T10:00:00Z"), "give one"),
                       (args(follow_seconds=0), "from 0 to"), (args(follow_until="tomorrow"), "--follow-until")):
        with pytest.raises(ConfigError, match=words):
            job.follow_until(bad)


# --- which Airflow runs follow -------------------------------------------------------------------------

END = dt.datetime(2026, 11, 25, 10, 5, tzinfo=dt.timezone.utc)


class DagRun:
    def __init__(self, run_type):
        self.run_type, self.conf = run_type, {}


def context(run_type="scheduled", **params):
    return {"dag_run": DagRun(run_type), "data_interval_end": END, "params": params}


@pytest.mark.parametrize("ctx, now_after_end, follows, why", [
    (context(), 30, True, "latest scheduled interval"),
    (context(), 299, True, "latest scheduled interval"),
    (context(), 300, False, "catch-up run of a past interval"),        # the next interval has ended too
    (context("backfill"), 30, False, "backfill runs never follow"),
    (context("manual"), 30, False, "manual runs never follow"),
    (context(until="2026-11-25T10:00:00Z"), 30, False, "explicit `until`"),
    (context(dry_run=True), 30, False, "dry run"),
])
def test_only_a_scheduled_run_of_the_latest_interval_follows(ctx, now_after_end, follows, why):
    from eosmirror.airflow.tasks import resolve_follow_until

    m = one(follow=True, max_transaction_seconds=0.5, airflow={"schedule": "*/5 * * * *"})
    bound, reason = resolve_follow_until(m, ctx, now=END + dt.timedelta(seconds=now_after_end))
    assert why in reason
    assert bound == ((END + dt.timedelta(seconds=600)).isoformat() if follows else None)


def test_a_mirror_without_follow_never_follows_and_follow_refuses_catchup():
    from eosmirror.airflow.tasks import resolve_follow_until

    assert resolve_follow_until(one(), context(), now=END)[0] is None
    text = error_of(follow=True, airflow={"catchup": True})
    assert "`airflow.catchup`" in text and "overlap" in text and "catchup: false" in text


def test_a_follow_mirrors_dag_lets_the_next_run_start_while_the_previous_follows():
    from eosmirror.airflow.dags import build_mirror_dag

    follower = build_mirror_dag(one(name="f1", follow=True, max_transaction_seconds=0.5), None)
    bounded = build_mirror_dag(one(name="b1"), None)
    assert (follower.max_active_runs, bounded.max_active_runs) == (2, 1)


def test_a_follow_run_needs_exactly_once_and_writes():
    from eosmirror.driver.run import RunOptions

    following = RunOptions(follow_until=END)
    job.check_follow(one(), following)
    job.check_follow(one(delivery="at_least_once"), RunOptions())
    with pytest.raises(ConfigError, match="need delivery exactly_once"):
        job.check_follow(one(delivery="at_least_once"), following)
    with pytest.raises(ConfigError, match="cannot follow"):
        job.check_follow(one(), RunOptions(follow_until=END, dry_run=True))


def test_a_follow_run_in_progress_is_neither_stalled_nor_stopped_without_a_recorded_outcome():
    """A follow run records its outcome only when it ends (up to 2 schedule intervals later); meanwhile
    its commits of every partition count as successes and its progress moves with the source, so the
    lag evaluation's rules (core/lag.py) keep it OK. A follower that stopped committing is STOPPED."""
    from eosmirror.core import lag
    from eosmirror.core.lag import MirrorSample, PartitionSample, Policy

    minute, t0 = 60_000, 1_800_000_000_000
    policy = Policy(lag_interval_ms=minute, mirror_interval_ms=5 * minute)

    def sample(m, progress, lso, commit_m):
        p = PartitionSample("orders", 0, lso, lso, progress, oldest_pending_ms=t0 + m * minute - 1000,
                            last_commit_ms=t0 + commit_m * minute)
        return lag.with_run_history(MirrorSample("m", t0 + m * minute, (p,)), [])

    # 12 minutes (over 2 intervals) with no recorded run: progress follows the source 1 s behind.
    following = [sample(m, 1000 * m, 1000 * m + 20, m) for m in range(13)]
    assert [lag.evaluate(following[:i], s, policy).status for i, s in enumerate(following)] == [lag.OK] * 13
    # The same mirror whose follower stopped committing at minute 0.
    stuck = [sample(m, 0, 1000 * m + 20, 0) for m in range(13)]
    assert lag.evaluate(stuck[:-1], stuck[-1], policy).status == lag.STOPPED


def test_a_slow_follow_transaction_is_logged_with_its_steps(caplog):
    task = slot_task(end=5).__class__(**{**slot_task(end=5).__dict__, "max_transaction_seconds": 0.2})
    with caplog.at_level("WARNING", logger="eosmirror.slot.follow"):
        follow.warn_if_slow(task, [0.0, 0.2, 0.25, 0.3, 0.35, 0.4, 0.8])   # 0.8 s <= 2 x 0.2 + 0.5
        assert caplog.records == []
        follow.warn_if_slow(task, [0.0, 0.2, 1.4, 1.45, 1.5, 1.55, 1.6])
    assert "took 1.60 s (copy 0.20, flush 1.20, target ends 0.05, offset syncs 0.05, send progress 0.05, " \
           "commit 0.05)" in caplog.text


def test_a_follower_logs_how_long_after_its_fence_it_followed_and_committed(wall, caplog):
    # The hand-over's gap, per slot: following started once, and the first transactions, each with
    # its distance from the fence (the previous run's last commit came just before that fence).
    io = GrowingIO(wall, 5, [1] * 6, fail={"commit_transaction": [None] * 5 + [FENCED]})
    with caplog.at_level("INFO", logger="eosmirror.slot.follow"):
        result = run(io, follow_task(end=5, seconds=600))
    assert result.status == "handed-over"
    lines = [r.getMessage() for r in caplog.records]
    assert len([m for m in lines if "following" in m and "after the fence (assign" in m]) == 1
    first = [m for m in lines if " committed " in m and " s after the fence (copy " in m]
    # Transaction 1 copied the bounded range; the follow transactions among the first 3 are logged.
    assert [m.split(":")[1].split()[1] for m in first] == ["2", "3"]
