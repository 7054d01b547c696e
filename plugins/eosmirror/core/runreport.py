"""The run report, typed: what one run of one mirror did, per slot and per partition.

Inside a process the report is these dataclasses; it becomes JSON only where processes meet:
spark-submit's result line and ``--result-json`` file (which the run server relays over its socket
as the job's output), and the Airflow ``copy`` task's XCom. Slot results travel from a Spark
executor to the driver pickled, as dataclasses.

Wire shape invariants (XCom consumers, the lag page, tools/ and the docs read these keys):
- ``to_dict`` writes the same key names as the untyped reports before it, plus ``report_version``.
- ``from_dict`` reads a report without ``report_version`` (version 0: written by a release before
  this module, and still in XCom) exactly like version 1: the keys did not change, only the
  version was added. Keys it does not know are ignored; a key an older report lacks takes its
  default. ``REPORT_VERSION`` is bumped only when a key is removed or changes meaning; a reader
  refuses a newer version rather than misread it.
- Statuses are ``str`` enums: their JSON is the same strings as before ("committed", "ok", ...).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Mapping, Sequence, TypeVar, Union

from eosmirror.core.errors import EosMirrorError
from eosmirror.core.planning import PartitionPlan

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

REPORT_VERSION = 1
VERSION_KEY = "report_version"


class SlotStatus(str, Enum):
    """How a slot ended. ``PENDING`` only while it runs; the others are final."""

    PENDING = "pending"
    COMMITTED = "committed"
    NOTHING_TO_DO = "nothing-to-do"
    DRY_RUN = "dry-run"
    HANDED_OVER = "handed-over"    # a follow run fenced by the next run of its generation: its normal end
    FOLLOW_BOUND = "follow-bound"  # a follow run whose wall-clock bound passed: committed, ends well
    FAILED = "failed"
    FENCED = "fenced"              # a newer instance of the transactional id took over (not a hand-over)

    @property
    def ok(self) -> bool:
        """A run is ok only if every slot ended in one of these (slot/follow.py: a hand-over is ok)."""
        return self in _OK


_OK = frozenset({SlotStatus.COMMITTED, SlotStatus.NOTHING_TO_DO, SlotStatus.DRY_RUN, SlotStatus.HANDED_OVER,
                 SlotStatus.FOLLOW_BOUND})


class FollowEnd(str, Enum):
    """Why a follow run's slot stopped following (``SlotResult.follow_end``; slot/follow.py)."""

    HANDED_OVER = "handed-over"
    FOLLOW_BOUND = "follow-bound"
    BYTE_BUDGET = "byte-budget"


class RunStatus(str, Enum):
    OK = "ok"
    FAILED = "failed"


T = TypeVar("T", bound="DataclassInstance")


def _known(cls: type[T], value: Mapping[str, Any], **typed: Any) -> T:
    """``cls`` from the keys of ``value`` it has fields for (others ignored, missing ones default);
    ``typed`` replaces the nested or enum fields."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{**{k: v for k, v in value.items() if k in names}, **typed})


@dataclass
class PartitionResult:
    """One partition of a slot: source offsets [start, end) copied to target offsets [target_from, target_to)."""

    source_topic: str
    target_topic: str
    partition: int
    start: int
    end: int                         # the committed progress: where the next run starts
    planned_end: int
    records: int = 0
    bytes: int = 0
    complete: bool = False           # end reached the planned end
    target_from: int | None = None   # None: nothing written (or at_least_once without delivery offsets)
    target_to: int | None = None
    record_age_ms: int | None = None  # age of the newest record copied, when the slot reported

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> PartitionResult:
        return _known(cls, value)


@dataclass
class SlotResult:
    slot: int
    transactional_id: str
    status: SlotStatus = SlotStatus.PENDING
    records: int = 0
    bytes: int = 0
    transactions: int = 0
    aborts: int = 0
    transaction_seconds: float = 0.0
    max_transaction_seconds: float = 0.0
    seconds: float = 0.0
    copy_seconds: float = 0.0
    partitions: list[PartitionResult] = field(default_factory=list)
    error: str | None = None
    error_type: str | None = None
    source_commit_error: str | None = None
    follow_seconds: float = 0.0      # how long the slot followed after its bounded ranges (follow runs)
    follow_end: FollowEnd | None = None
    attempt_pid: int = 0
    executor: dict[str, str] = field(default_factory=dict)   # slotstate.executor_info() of a slot that ran
    # The bandwidth cap (core/bandwidth.py): the slot's share of max_bytes_per_second and of
    # catch_up_bytes_per_second (None: not capped), the seconds it waited on them, the seconds it copied
    # at the catch-up rate, and the transactions the cap ended at max_transaction_seconds with the chunk
    # unfinished (committed smaller, the chunk went on in the next one).
    cap_bytes_per_second: float | None = None
    catch_up_bytes_per_second: float | None = None
    throttled_seconds: float = 0.0
    catch_up_seconds: float = 0.0
    cap_cut_transactions: int = 0
    # Seconds per step, summed over the slot's start and its transactions (copy, flush, target ends, offset
    # syncs, send progress, commit): where a slot's time goes, e.g. what a long link to the source costs.
    step_seconds: dict[str, float] = field(default_factory=dict)

    @classmethod
    def not_started(cls, slot: int, transactional_id: str, status: SlotStatus, error: str | None = None,
                    error_type: str | None = None) -> SlotResult:
        """A slot that never ran a copier: a dry run, nothing planned for it, or its Spark task (or
        the run server's client) was gone. It copied nothing and ran nowhere."""
        return cls(slot=slot, transactional_id=transactional_id, status=status, error=error, error_type=error_type)

    def count_transaction(self, elapsed: float) -> None:
        self.transactions += 1
        self.transaction_seconds = round(self.transaction_seconds + elapsed, 3)
        self.max_transaction_seconds = round(max(self.max_transaction_seconds, elapsed), 3)

    def add_steps(self, names: Sequence[str], marks: Sequence[float]) -> None:
        """Add each step's time (``marks``: the monotonic times that start and end each of ``names``)."""
        for name, began, ended in zip(names, marks, marks[1:]):
            self.step_seconds[name] = round(self.step_seconds.get(name, 0.0) + max(0.0, ended - began), 4)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["status"] = self.status.value
        out["follow_end"] = self.follow_end.value if self.follow_end else None
        if self.cap_bytes_per_second is None and self.catch_up_bytes_per_second is None:
            for key in CAP_SLOT_KEYS:   # uncapped: the keys of reports before the cap, key for key
                del out[key]
        if not self.step_seconds:
            del out["step_seconds"]    # a slot that timed nothing (and older reports) keeps the keys it had
        return out

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> SlotResult:
        end = value.get("follow_end")
        return _known(cls, value, status=SlotStatus(value.get("status", SlotStatus.PENDING.value)),
                      follow_end=FollowEnd(end) if end else None,
                      partitions=[PartitionResult.from_dict(p) for p in value.get("partitions") or []],
                      executor=dict(value.get("executor") or {}),
                      step_seconds=dict(value.get("step_seconds") or {}))


CAP_SLOT_KEYS = ("cap_bytes_per_second", "catch_up_bytes_per_second", "throttled_seconds", "catch_up_seconds",
                 "cap_cut_transactions")
CAP_RUN_KEYS = ("max_bytes_per_second", "catch_up_bytes_per_second")


@dataclass(frozen=True)
class ReportTopic:
    source: str
    target: str
    partitions: int


def plan_dict(p: PartitionPlan) -> dict[str, Any]:
    entry = {"source_topic": p.source_topic, "target_topic": p.target_topic, "partition": p.partition,
             "start": p.start, "end": p.end, "pending": p.pending, "origin": p.origin, "slot": p.slot,
             "lost": p.lost, "available": p.available}
    if p.source_end >= 0:   # reports of earlier releases have none: they read back key for key
        entry["source_end"] = p.source_end
    return entry


@dataclass
class RunReport:
    """The report of a run that reached its slots (or its plan, for a dry run)."""

    mirror: str
    run_id: str
    status: RunStatus
    dry_run: bool
    delivery: str
    started_at: str
    finished_at: str
    source: str                      # cluster labels: never a secret
    target: str
    generation: int
    generation_changed: bool
    topic_sync: str
    until: str | None = None
    follow_until: str | None = None
    target_bootstrap: str = ""       # the first bootstrap server: names the target in asset URIs
    fenced_transactional_ids: list[str] = field(default_factory=list)
    topics: list[ReportTopic] = field(default_factory=list)
    records: int = 0
    bytes: int = 0
    seconds: float = 0.0
    slot_seconds_max: float = 0.0
    records_per_second: float = 0.0
    mb_per_second: float = 0.0
    plan: list[PartitionPlan] = field(default_factory=list)
    slots: list[SlotResult] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    steps: dict[str, float] = field(default_factory=dict)
    writers: list[str] = field(default_factory=list)   # who other than the mirror can write the target topics
    max_bytes_per_second: int | None = None        # the mirror's cap this run (None: none)
    catch_up_bytes_per_second: int | None = None   # its catch-up rate (None: none)

    @property
    def ok(self) -> bool:
        return self.status is RunStatus.OK

    @property
    def pending(self) -> int:
        """Offsets the plan had to read."""
        return sum(p.pending for p in self.plan)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {VERSION_KEY: REPORT_VERSION}
        for f in dataclasses.fields(self):
            out[f.name] = getattr(self, f.name)
        out.update(status=self.status.value, topics=[dataclasses.asdict(t) for t in self.topics],
                   plan=[plan_dict(p) for p in self.plan], slots=[s.to_dict() for s in self.slots],
                   fenced_transactional_ids=list(self.fenced_transactional_ids), errors=list(self.errors),
                   steps=dict(self.steps), writers=list(self.writers))
        if not self.writers:
            del out["writers"]   # only the mirror writes its target topics (and reports before target_guard)
        for key in CAP_RUN_KEYS:
            if out[key] is None:   # an uncapped mirror's report has the keys of reports before the cap
                del out[key]
        return out

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> RunReport:
        _check_version(value)
        # "pending" is derived from start and end; PartitionPlan computes it.
        plan = [_known(PartitionPlan, {k: v for k, v in p.items() if k != "pending"}) for p in value.get("plan") or []]
        return _known(cls, value, status=RunStatus(value["status"]),
                      topics=[_known(ReportTopic, t) for t in value.get("topics") or []], plan=plan,
                      slots=[SlotResult.from_dict(s) for s in value.get("slots") or []],
                      fenced_transactional_ids=list(value.get("fenced_transactional_ids") or []),
                      errors=list(value.get("errors") or []), steps=dict(value.get("steps") or {}),
                      writers=list(value.get("writers") or []))


@dataclass
class RunFailure:
    """A run that stopped before its slots reported: a configuration error, a refusal (truncation,
    a re-created topic, lost progress), an unreachable cluster. Nothing was copied by this run."""

    mirror: str
    error: str
    error_type: str = "EosMirrorError"
    exit_code: int = 1               # 2: configuration or arguments; never retried (errors.EXIT_CONFIG)
    run_id: str | None = None        # known once the run started: its lag record names it
    status: RunStatus = RunStatus.FAILED

    @classmethod
    def of(cls, mirror: str, exc: EosMirrorError, run_id: str | None = None) -> RunFailure:
        return cls(mirror=mirror, error=str(exc), error_type=type(exc).__name__, exit_code=exc.exit_code,
                   run_id=run_id)

    @property
    def ok(self) -> bool:
        return False

    def to_dict(self) -> dict[str, Any]:
        out = {VERSION_KEY: REPORT_VERSION, **dataclasses.asdict(self), "status": self.status.value}
        if self.run_id is None:   # the failure line never had a run id before it was typed
            del out["run_id"]
        return out

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> RunFailure:
        _check_version(value)
        return _known(cls, value, status=RunStatus.FAILED)


Report = Union[RunReport, RunFailure]


def from_dict(value: Mapping[str, Any]) -> Report:
    """A report read where processes meet (XCom, a result line or file): a run report if it has
    slots (every run that reached its slots, dry runs too), else a failure."""
    return RunReport.from_dict(value) if "slots" in value else RunFailure.from_dict(value)


def _check_version(value: Mapping[str, Any]) -> None:
    version = value.get(VERSION_KEY, 0)
    if not isinstance(version, int) or version > REPORT_VERSION:
        raise ValueError(f"run report version {version!r} is newer than this eosmirror reads ({REPORT_VERSION}): "
                         f"upgrade eosmirror where the report is read")
