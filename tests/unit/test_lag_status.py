"""The lag evaluation over windows of samples: each status, the SLO breach, the transitions."""

from eosmirror.core import lag
from eosmirror.core.lag import MirrorSample, PartitionSample, Policy, RunOutcome

MIN = 60_000
T0 = 1_800_000_000_000
# Mirror runs every 5 minutes, samples every minute: STALLED/LAGGING need a window of 5 minutes.
POLICY = Policy(lag_interval_ms=MIN, mirror_interval_ms=5 * MIN, max_lag_seconds=120)


def part(progress, lso, pending_ms=None, partition=0, commit_ms=None, hw=None):
    return PartitionSample("orders", partition, hw if hw is not None else lso, lso, progress,
                           oldest_pending_ms=pending_ms, last_commit_ms=commit_ms)


def sample(minute, *parts, run_status="ok", success_minute=None):
    t = T0 + minute * MIN
    ok_minute = minute if success_minute is None else success_minute
    run = RunOutcome("r", run_status, T0 + ok_minute * MIN, error="boom" if run_status != "ok" else None)
    return MirrorSample("m", t, tuple(parts), last_run=run,
                        last_success_ms=None if ok_minute is False else T0 + ok_minute * MIN)


def series(points, policy=POLICY, **kw):
    """Evaluate each sample with every earlier one as history; returns the statuses in order."""
    samples = [sample(minute, *parts, **kw) for minute, parts in points]
    return [lag.evaluate(samples[:i], s, policy) for i, s in enumerate(samples)]


def test_caught_up_is_ok_with_zero_lags():
    status = lag.evaluate([], sample(0, part(100, 100, pending_ms=T0 - 10 * MIN)), POLICY)
    assert status.status == lag.OK and status.record_lag == 0 and status.time_lag_seconds == 0
    assert not status.alerting and status.alerts() == []


def test_record_lag_is_lso_minus_progress_and_time_lag_the_oldest_pending_age():
    p = part(40, 100, pending_ms=T0 - 30_000, hw=103)   # 3 offsets above the LSO: an open transaction
    status = lag.evaluate([], sample(0, p), POLICY)
    assert status.partitions[0].record_lag == 60 and status.partitions[0].time_lag_seconds == 30.0


def test_no_progress_counts_from_log_start():
    p = PartitionSample("orders", 0, 50, 50, None, log_start=20, oldest_pending_ms=T0)
    assert p.record_lag == 30


def test_lag_growing_over_a_window_that_covers_a_run_is_lagging():
    statuses = series([(m, [part(10 * m, 10 * m + 5 * (m + 1), pending_ms=T0 + m * MIN - 5_000)]) for m in range(6)])
    assert [s.status for s in statuses[:5]] == [lag.OK] * 5    # window not yet one mirror interval long
    assert statuses[5].status == lag.LAGGING and "grew from 5 to 30" in statuses[5].reason
    assert not statuses[5].alerting   # LAGGING alone does not alert; the SLO does


def test_lag_that_shrinks_once_in_the_window_is_ok():
    lags = [5, 10, 15, 4, 9, 14]
    statuses = series([(m, [part(100 * m, 100 * m + lag_)]) for m, lag_ in enumerate(lags)])
    assert statuses[-1].status == lag.OK


def test_progress_still_with_lag_is_stalled_but_only_with_lag():
    stalled = series([(m, [part(40, 100 + m)]) for m in range(6)])
    assert stalled[4].status == lag.OK and stalled[5].status == lag.STALLED
    assert stalled[5].alerting and "progress stayed at 40" in stalled[5].alerts()[0]
    idle = series([(m, [part(100, 100)]) for m in range(6)])
    assert idle[-1].status == lag.OK


def test_no_successful_run_for_two_intervals_is_stopped():
    late = lag.evaluate([], sample(11, part(100, 100), success_minute=0), POLICY)
    assert late.status == lag.STOPPED and "no successful run for 660 s" in late.reason
    recent = lag.evaluate([], sample(10, part(100, 100), success_minute=0), POLICY)
    assert recent.status == lag.OK
    never = lag.evaluate([], sample(0, part(0, 10), success_minute=False), POLICY)
    assert never.status == lag.STOPPED


def test_a_manual_mirror_is_never_stopped():
    manual = Policy(lag_interval_ms=MIN, mirror_interval_ms=None)
    assert lag.evaluate([], sample(100, part(5, 5), success_minute=0), manual).status == lag.OK


def test_failed_last_run_is_error_and_outranks_everything():
    status = lag.evaluate([], sample(30, part(0, 10), run_status="failed", success_minute=0), POLICY)
    assert status.status == lag.ERROR and "failed: boom" in status.reason
    assert status.alerts() == ["mirror m: ERROR: the last run (r) failed: boom (partitions orders[0])"]


def test_slo_breach_names_mirror_partitions_figure_and_threshold():
    parts = [part(0, 10, pending_ms=T0 - 200_000, partition=0), part(5, 5, partition=1),
             part(0, 3, pending_ms=T0 - 150_000, partition=2)]
    status = lag.evaluate([], sample(0, *parts), POLICY)
    assert status.status == lag.OK and status.alerting
    assert [p.label for p in status.breached] == ["orders[0]", "orders[2]"]
    assert status.alerts() == ["mirror m: time lag SLO max_lag_seconds=120 breached on orders[0], orders[2] "
                               "(worst orders[0]: 200.0 s, 10 offsets behind)"]
    assert status.time_lag_seconds == 200.0 and status.record_lag == 13


def test_transitions_ok_lagging_stalled_stopped_then_ok_again():
    """A mirror falls behind, stops copying, stops running, then catches up."""
    points = [(m, [part(10 * m, 20 * m + 5)]) for m in range(6)]                # lag grows: LAGGING
    points += [(m, [part(60, 200 + m)]) for m in range(6, 12)]                  # progress stuck
    samples = [sample(m, *p) for m, p in points]
    stopped = sample(13, part(60, 300), success_minute=2)                        # last success 11 min ago
    caught_up = sample(14, part(300, 300))
    results = [lag.evaluate(samples[:i], s, POLICY).status for i, s in enumerate(samples)]
    assert results[5] == lag.LAGGING and results[11] == lag.STALLED
    assert lag.evaluate(samples, stopped, POLICY).status == lag.STOPPED
    assert lag.evaluate(samples + [stopped], caught_up, POLICY).status == lag.OK


def test_mirror_status_is_its_worst_partition():
    history = [sample(m, part(40, 100 + m, partition=0), part(m, m + 1, partition=1)) for m in range(5)]
    status = lag.evaluate(history, sample(5, part(40, 105, partition=0), part(5, 6, partition=1)), POLICY)
    assert [p.status for p in status.partitions] == [lag.STALLED, lag.OK] and status.status == lag.STALLED


def test_samples_older_than_the_window_are_ignored():
    old = [sample(m, part(40, 100)) for m in range(-30, -20)]
    status = lag.evaluate(old, sample(0, part(40, 100)), POLICY)
    assert status.samples_in_window == 1 and status.status == lag.OK


def test_run_history_gives_last_run_and_last_success():
    s = sample(0, part(1, 1, commit_ms=T0 - 5))
    runs = [RunOutcome("a", "ok", T0 - 100), RunOutcome("b", "failed", T0 - 50, error="x")]
    merged = lag.with_run_history(s, runs)
    assert merged.last_run.run_id == "b" and merged.last_success_ms == T0 - 5


def test_sample_and_run_records_round_trip():
    s = sample(0, part(1, 3, pending_ms=T0 - 9, commit_ms=T0 - 1), part(2, 2, partition=1))
    assert MirrorSample.decode(s.encode()) == s
    run = RunOutcome("r1", "failed", T0, records=5, seconds=1.5, error="e")
    assert RunOutcome.decode(run.encode()) == run


def test_schedule_interval():
    assert lag.schedule_interval_ms("*/5 * * * *") == 5 * MIN
    assert lag.schedule_interval_ms("@hourly") == 60 * MIN
    assert lag.schedule_interval_ms(None) is None


def test_each_partition_is_judged_on_its_own_series_among_thousands_and_in_linear_time():
    """One pass over the window (it once scanned every sample for every partition: 3.5 s for one
    sample of 5,000 partitions, in the lag DAG's every call)."""
    import time

    n = 5_000

    def window_at(minute):   # partition 7 never moves with lag; the others keep up
        return [part(100 + minute if p != 7 else 50, 100 + minute if p != 7 else 90, partition=p) for p in range(n)]

    samples = [sample(minute, *window_at(minute)) for minute in range(6)]
    started = time.process_time()
    status = lag.evaluate(samples[:-1], samples[-1], POLICY)
    assert time.process_time() - started < 2.0
    assert [p.partition for p in status.partitions if p.status != lag.OK] == [7]
    assert status.partitions[7].status == lag.STALLED and status.status == lag.STALLED
