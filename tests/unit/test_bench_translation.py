"""The translation-cost benchmark's measurements (no broker needed)."""

from eosmirror_tools.bench import translation


def test_a_fresh_process_reports_its_own_peak_rss_not_its_parents():
    """ru_maxrss survives execve on Linux: a spawned reader would report the writer's RSS at the fork."""
    ballast = bytearray(256 * 1024 * 1024)
    ballast[::4096] = b"\1" * len(range(0, len(ballast), 4096))   # touch every page: resident
    result = translation.in_fresh_process(dict)
    assert result["peak_rss_mb"] < 150, result
    assert translation.peak_rss_mb() >= 256
