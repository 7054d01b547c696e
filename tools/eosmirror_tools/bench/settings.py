"""What one benchmark run measures: record counts, size classes, slot sweep, where outputs go."""

from __future__ import annotations

import datetime as dt
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from eosmirror import paths

DEFAULT_RECORDS = 2_000_000
QUICK_RECORDS = 20_000
RECORDS_ENV = "BENCH_RECORDS"
PARTITIONS = 8
KEY_BYTES = 16
HEADER = ("bench", b"1")   # one header per record, as the data set asks

# The configuration kinds, in the order they run. Tests and --only use these names.
QUIET_SHARE = 0.05                  # others' CPU above this: the run is not quiet, no verdict is given

KINDS = ("ceiling", "raw", "jvmcopier", "eosmirror", "served", "mm2", "translation", "rereads", "scale", "cap", "storm",
         "distance")


@dataclass(frozen=True)
class SizeClass:
    """One record shape of the data set: ``records`` records of ``value_bytes`` over 8 partitions."""

    name: str
    value_bytes: int
    records: int

    @property
    def record_bytes(self) -> int:
        """Key + value + header bytes: the same sum eosmirror's run report counts as ``bytes``."""
        return KEY_BYTES + self.value_bytes + len(HEADER[0]) + len(HEADER[1])

    @property
    def slug(self) -> str:
        return self.name.lower()


def size_classes(records: int, names: tuple[str, ...] = ("200B", "2KB")) -> list[SizeClass]:
    """200-byte values (N records) and 2 KB values (N/10 records: about the same bytes per partition)."""
    shapes = {"200B": SizeClass("200B", 200, records), "2KB": SizeClass("2KB", 2048, max(records // 10, 1))}
    unknown = [n for n in names if n not in shapes]
    if unknown:
        raise ValueError(f"unknown size class {unknown[0]!r}; known: {', '.join(shapes)}")
    return [shapes[n] for n in names]


def _run_id() -> str:
    # Time first (runs sort by age in var/bench), then random: two runs in one second never collide.
    return dt.datetime.now().strftime("%m%d%H%M%S") + uuid.uuid4().hex[:4]


@dataclass
class BenchSettings:
    records: int = DEFAULT_RECORDS
    sizes: tuple[str, ...] = ("200B", "2KB")
    slot_sweep: tuple[int, ...] = (1, 2, 4)          # eosmirror exactly_once, 200B class only
    main_slots: int = 2                              # the slots of the headline eosmirror runs
    master: str = "local[2]"
    kinds: tuple[str, ...] = KINDS
    quick: bool = False
    keep_topics: bool = False                        # leave the topics for inspection
    profile: bool = False                            # also write pyinstrument profiles
    mm2_properties: dict[str, str] = field(default_factory=dict)   # extra/overriding MM2 settings
    mm2_defaults_too: bool = True                    # MM2 also at its defaults, beside the tuned rows
    transaction_duration_ms: int = 3000              # ProducerPerformance's default transaction length
    mirror_transaction_seconds: float = 30.0         # eosmirror's max_transaction_seconds default; the JVM copier's too
    rtts: tuple[int, ...] = (0, 25, 100)             # the distance section's round trips to the source (ms)
    out_dir: Path = field(default_factory=lambda: paths.build_dir("bench"))
    run_id: str = field(default_factory=_run_id)
    storm_partitions: int | None = None              # --only storm: the partitions (default 5,000; quick 50)

    @property
    def size_classes(self) -> list[SizeClass]:
        return size_classes(self.records, self.sizes)

    @property
    def work_dir(self) -> Path:
        """var/bench/runs/<run id>: mirror files, result JSONs and logs of this run."""
        return paths.under_home("bench", "runs", self.run_id)

    @property
    def mm2_dir(self) -> Path:
        return paths.under_home("bench", "mm2")

    def copy_timeout(self, records: int) -> float:
        """Upper bound for one copy; generous (a 2-core machine shared with other work), never hit normally."""
        return 180.0 + records / 5_000

    def topic_prefix(self, config_slug: str) -> str:
        # Hyphens only: the prefix is used verbatim inside MM2's and eosmirror's topic regexes.
        return f"bench-{self.run_id}-{config_slug}"


def records_from_env(default: int) -> int:
    raw = os.environ.get(RECORDS_ENV)
    if not raw:
        return default
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        raise SystemExit(f"{RECORDS_ENV}={raw!r} is not a whole number of records") from None
    if value < 100:
        raise SystemExit(f"{RECORDS_ENV}={value}: use at least 100 records")
    return value
