"""The recovery point: time-lag percentiles of recorded lag samples over the last hour and day, and the page's
table of them."""

from eosmirror.airflow import lagrender
from eosmirror.core import lag, recoverypoint
from eosmirror.core.lag import MirrorSample, PartitionSample, Policy

NOW = 1_800_000_000_000
MINUTE = 60_000


def sample(at_ms, *lags_s):
    """A sample at ``at_ms`` whose partitions trail by ``lags_s`` seconds (0: caught up)."""
    parts = tuple(PartitionSample("t", i, 100, 100, 100 if s == 0 else 90, oldest_pending_ms=at_ms - int(s * 1000))
                  for i, s in enumerate(lags_s))
    return MirrorSample("m", at_ms, parts)


def test_a_samples_time_lag_is_its_most_lagging_partitions():
    assert recoverypoint.time_lag_seconds(sample(NOW, 0, 3.5, 1)) == 3.5
    assert recoverypoint.time_lag_seconds(sample(NOW, 0, 0)) == 0
    assert recoverypoint.time_lag_seconds(MirrorSample("m", NOW, ())) == 0


def test_percentiles_are_nearest_rank_over_each_window():
    # 100 samples in the last hour, lags 1..100 s (shuffled in time); 50 older ones of 500 s in the last day only;
    # one older than a day and one after now, which neither window counts.
    recent = [sample(NOW - (i * 7 % 100) * 35_000, i + 1) for i in range(100)]
    older = [sample(NOW - 2 * 3_600_000 - i * MINUTE, 500) for i in range(50)]
    ignored = [sample(NOW - 86_400_000 - MINUTE, 9999), sample(NOW + MINUTE, 9999)]
    hour, day = recoverypoint.recovery_points(recent + older + ignored, NOW)
    assert (hour.window, hour.samples, hour.p50_seconds, hour.p99_seconds, hour.max_seconds) == \
        ("last hour", 100, 50, 99, 100)
    assert (day.window, day.samples, day.p50_seconds, day.p99_seconds, day.max_seconds) == \
        ("last day", 150, 75, 500, 500)


def test_a_window_without_samples_says_so():
    hour, day = recoverypoint.recovery_points([sample(NOW - 2 * 3_600_000, 4)], NOW)
    assert (hour.samples, hour.p50_seconds, hour.p99_seconds, hour.max_seconds) == (0, None, None, None)
    assert (day.samples, day.p99_seconds) == (1, 4)


def test_the_mirror_page_shows_the_recovery_point_and_charts_only_its_range():
    samples = [sample(NOW - i * 10 * MINUTE, 2 + (i % 6)) for i in range(144)]   # a day at 10-minute samples
    status = lag.evaluate(samples[1:], samples[0], Policy(lag_interval_ms=10 * MINUTE))
    page = lagrender.mirror_page(status, samples, "1h", NOW)
    table = page.split("<table id='recovery-point'>")[1].split("</table>")[0]
    assert "<tr data-window='now'><td>now</td><td>-</td><td>-</td><td>-</td><td>2.0 s</td></tr>" in table
    assert "<tr data-window='last hour'><td>last hour</td><td>6</td><td>4.0 s</td><td>7.0 s</td><td>7.0 s</td>" in table
    assert "<tr data-window='last day'><td>last day</td><td>144</td><td>4.0 s</td><td>7.0 s</td><td>7.0 s</td>" in table
    assert "data-samples='7'" in page     # the 1h chart: the samples of the last hour, both ends included
    empty = lagrender.mirror_page(status, [], "24h", NOW)
    assert "<tr data-window='last day'><td>last day</td><td>0</td><td>-</td><td>-</td><td>-</td></tr>" in empty
