"""One measured configuration, in the shape report.json stores it.

Two rates per configuration, because the systems start very differently:

  steady       the copy rate once copying runs: eosmirror's in-slot rate (records / longest slot),
               MirrorMaker 2 from the first record on the target to the N-th committed one, the raw
               loop's own loop time, ProducerPerformance's own send-loop rate
  end_to_end   N / wall time from process start (JVM, Spark, Python start-up included)

MB/s is records/s times the bytes of one record as the configuration wrote it (key + value +
header for copies; value only for ProducerPerformance, which writes no key and no header).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ConfigResult:
    key: str                  # unique, stable across runs: "<size>/<configuration>"
    kind: str                 # ceiling | raw | eosmirror | eosmirror-empty | mm2
    label: str                # what a person reads in the table
    size_class: str
    expected: int             # records the target must hold (0 for nothing-to-copy runs: see details)
    record_bytes: int
    delivery: str | None = None
    slots: int | None = None
    wall_seconds: float | None = None
    steady_seconds: float | None = None
    target_count: int | None = None
    offsets_on_target: int | None = None
    verified: bool = False
    peak_rss: dict[str, Any] = field(default_factory=dict)
    cpu: dict[str, Any] = field(default_factory=dict)    # measure.ChildProcess.cpu()
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    steady_rate_override: float | None = None   # a tool that times itself (ProducerPerformance)

    @property
    def records_per_second(self) -> float | None:
        if self.steady_rate_override is not None:
            return self.steady_rate_override
        if not self.expected or not self.steady_seconds:
            return None
        return self.expected / self.steady_seconds

    @property
    def end_to_end_records_per_second(self) -> float | None:
        if not self.expected or not self.wall_seconds:
            return None
        return self.expected / self.wall_seconds

    def _mb(self, rate: float | None) -> float | None:
        return None if rate is None else rate * self.record_bytes / 1e6

    def as_dict(self) -> dict[str, Any]:
        def r(value: float | None, digits: int = 1) -> float | None:
            return None if value is None else round(value, digits)

        return {
            "key": self.key, "kind": self.kind, "label": self.label, "size_class": self.size_class,
            "delivery": self.delivery, "slots": self.slots,
            "records": self.expected, "record_bytes": self.record_bytes,
            "records_per_second": r(self.records_per_second),
            "mb_per_second": r(self._mb(self.records_per_second), 2),
            "end_to_end_records_per_second": r(self.end_to_end_records_per_second),
            "end_to_end_mb_per_second": r(self._mb(self.end_to_end_records_per_second), 2),
            "wall_seconds": r(self.wall_seconds, 2), "steady_seconds": r(self.steady_seconds, 2),
            "peak_rss_mb": self.peak_rss.get("total_mb"), "peak_rss_by_role_mb": self.peak_rss.get("by_role_mb", {}),
            "cpu_seconds": self.cpu.get("program_seconds"),
            "cpu_seconds_per_million_records": r(self.cpu["program_seconds"] / self.expected * 1e6, 2)
            if self.cpu.get("program_seconds") is not None and self.expected else None,
            "cpu": self.cpu,
            "others_cpu_share": self.others_cpu_share,
            "brokers_restarted": bool(self.cpu.get("brokers_restarted")),
            "verified": self.verified, "target_count": self.target_count, "expected_count": self.expected_count,
            "offsets_on_target": self.offsets_on_target, "error": self.error, "details": self.details,
        }

    @property
    def others_cpu_share(self) -> float | None:
        """Share of the machine's CPU that work outside the measurement used meanwhile (0..1)."""
        import os

        window, other = self.cpu.get("wall_seconds"), self.cpu.get("other_seconds")
        if not window or other is None:
            return None
        return round(min(other / (window * (os.cpu_count() or 1)), 1.0), 3)

    @property
    def expected_count(self) -> int:
        """What the read_committed count on the target must be (an empty run copies nothing, but
        its target still holds the records of the run before it)."""
        return int(self.details.get("expected_target_count", self.expected))
