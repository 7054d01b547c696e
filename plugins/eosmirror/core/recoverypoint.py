"""The recovery point a mirror held over a past period: percentiles of the time lag of its recorded lag samples.

Time lag is what a failover at that instant would lose (the age of the oldest committed source record the target
does not hold yet), so its percentiles over the last hour and day are the mirror's recovery point as a disaster
recovery plan states it. The samples are those the ``eosmirror_lag`` DAG records, one per ``lag.schedule``: with
one-minute samples an hour holds 60, so its p99 is its worst sample; a peak shorter than the sampling interval
can fall between two samples (the soak sampler of docs/recovery-point.md samples every second).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

from eosmirror.core.lag import MirrorSample

WINDOWS_MS = (("last hour", 3_600_000), ("last day", 86_400_000))


@dataclass(frozen=True)
class RecoveryPoint:
    window: str                      # "last hour", "last day"
    samples: int
    p50_seconds: float | None        # None: no sample in the window
    p99_seconds: float | None
    max_seconds: float | None


def time_lag_seconds(sample: MirrorSample) -> float:
    """The mirror's time lag when the sample was taken: its most lagging partition's."""
    return max((p.time_lag_ms(sample.time_ms) for p in sample.partitions), default=0) / 1000


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an ascending, non-empty sequence (a value that was really seen)."""
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def recovery_points(samples: Iterable[MirrorSample], now_ms: int,
                    windows: Sequence[tuple[str, int]] = WINDOWS_MS) -> list[RecoveryPoint]:
    """One RecoveryPoint per window ending at ``now_ms`` (samples after ``now_ms`` are ignored)."""
    timed = [(s.time_ms, time_lag_seconds(s)) for s in samples if s.time_ms <= now_ms]
    out = []
    for name, span_ms in windows:
        ordered = sorted(lag for t, lag in timed if t > now_ms - span_ms)
        if not ordered:
            out.append(RecoveryPoint(name, 0, None, None, None))
            continue
        out.append(RecoveryPoint(name, len(ordered), percentile(ordered, 50), percentile(ordered, 99), ordered[-1]))
    return out
