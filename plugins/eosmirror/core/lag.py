"""How far behind a mirror is: samples (per source partition: high watermark, LSO, progress, record lag, time lag,
last commit) and a Burrow-like evaluation over a window of them giving each partition and the mirror one
status (FOREIGN, ERROR, STOPPED, STALLED, LAGGING, OK) and the SLO's breaches. Pure. The definitions: docs/lag.md.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable, Mapping

from eosmirror.core import bandwidth
from eosmirror.core.config import CRON_PRESETS
from eosmirror.core.runreport import Report, RunFailure

OK, LAGGING, STALLED, STOPPED, ERROR, FOREIGN = "OK", "LAGGING", "STALLED", "STOPPED", "ERROR", "FOREIGN"
SEVERITY = (OK, LAGGING, STALLED, STOPPED, ERROR, FOREIGN)   # least to most severe
ALERTING = (STALLED, STOPPED, ERROR, FOREIGN)
SAMPLE_KEY = b"sample"
RUN_KEY = b"run"
OBSERVED_KEY = b"observed"


@dataclass(frozen=True)
class PartitionSample:
    source_topic: str
    partition: int
    high_watermark: int
    last_stable: int
    progress: int | None          # None: the mirror never committed this partition
    log_start: int = 0
    oldest_pending_ms: int | None = None   # timestamp of the oldest committed record not yet mirrored
    last_commit_ms: int | None = None
    # Records on the target partition the mirror did not write (core/foreign.py), and the first one's offset.
    foreign: int = 0
    foreign_at: int | None = None

    @property
    def record_lag(self) -> int:
        position = self.progress if self.progress is not None else self.log_start
        return max(0, self.last_stable - max(position, self.log_start))

    def time_lag_ms(self, now_ms: int) -> int:
        if self.record_lag == 0 or self.oldest_pending_ms is None:
            return 0
        return max(0, now_ms - self.oldest_pending_ms)

    @property
    def label(self) -> str:
        return f"{self.source_topic}[{self.partition}]"


@dataclass(frozen=True)
class RunOutcome:
    """What one mirror run ended with, recorded on the lag topic by the run itself."""

    run_id: str
    status: str                  # "ok" or "failed"
    finished_ms: int
    records: int = 0
    seconds: float = 0.0
    error: str | None = None
    transactions: int = 0                   # committed transactions of every slot
    mean_transaction_seconds: float = 0.0   # begin to commit, averaged over them
    max_transaction_seconds: float = 0.0    # the longest one (compare with max_transaction_seconds)
    copied_bytes: int = 0                   # key + value + headers of the records copied
    # The bandwidth cap (core/bandwidth.py): the rate the slots that copied measured inside their
    # transactions (sum of each slot's bytes / transaction seconds) and the cap in force for those slots
    # (the sum of their shares; a slot that copied mostly at the catch-up rate counts that). None: uncapped.
    rate_bytes_per_second: float = 0.0
    cap_bytes_per_second: float | None = None

    def encode(self) -> bytes:
        return json.dumps({"v": 1, **asdict(self)}, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> "RunOutcome":
        return cls.from_value(json.loads(raw))

    @classmethod
    def from_value(cls, value: dict[str, Any]) -> "RunOutcome":
        """From its JSON object: keys it does not know are ignored, keys it lacks take their defaults
        (outcomes and samples of releases before or after this one)."""
        return cls(run_id=str(value["run_id"]), status=str(value["status"]), finished_ms=int(value["finished_ms"]),
                   records=int(value.get("records", 0)), seconds=float(value.get("seconds", 0.0)),
                   error=value.get("error"), transactions=int(value.get("transactions", 0)),
                   mean_transaction_seconds=float(value.get("mean_transaction_seconds", 0.0)),
                   max_transaction_seconds=float(value.get("max_transaction_seconds", 0.0)),
                   copied_bytes=int(value.get("copied_bytes", 0)),
                   rate_bytes_per_second=float(value.get("rate_bytes_per_second", 0.0)),
                   cap_bytes_per_second=value.get("cap_bytes_per_second"))

    @classmethod
    def of_result(cls, result: Report, finished_ms: int) -> "RunOutcome":
        """The outcome of a run from its report (a run that stopped before its slots: its failure)."""
        if isinstance(result, RunFailure):
            return cls(run_id=result.run_id or "?", status="failed", finished_ms=finished_ms, error=result.error)
        transactions = sum(s.transactions for s in result.slots)
        total = sum(s.transaction_seconds for s in result.slots)
        return cls(run_id=result.run_id or "?", status="ok" if result.ok else "failed", finished_ms=finished_ms,
                   records=result.records, seconds=result.seconds, error="; ".join(result.errors) or None,
                   transactions=transactions,
                   mean_transaction_seconds=round(total / transactions, 3) if transactions else 0.0,
                   max_transaction_seconds=max((s.max_transaction_seconds for s in result.slots), default=0.0),
                   copied_bytes=result.bytes, **_cap_figures(result.slots))


def _cap_figures(slots: Iterable[Any]) -> dict[str, Any]:
    """The measured rate and the cap in force of the slots that copied (``SlotResult``s)."""
    rate, cap, capped = 0.0, 0.0, False
    for s in slots:
        if not s.bytes or s.transaction_seconds <= 0:
            continue
        rate += s.bytes / s.transaction_seconds
        mostly_catching_up = s.catch_up_bytes_per_second is not None and s.catch_up_seconds * 2 > s.transaction_seconds
        share = s.catch_up_bytes_per_second if mostly_catching_up else s.cap_bytes_per_second
        if share is not None:
            cap, capped = cap + share, True
    return {"rate_bytes_per_second": round(rate, 1), "cap_bytes_per_second": round(cap, 1) if capped else None}


@dataclass(frozen=True)
class SourceObservation:
    """The source's last stable offsets a run observed when it planned (key ``observed`` on the lag
    topic, one record per run): what a promotion reports as known to exist when the source is gone."""

    time_ms: int
    ends: tuple[tuple[str, int, int], ...]   # (source topic, partition, last stable offset)

    def encode(self) -> bytes:
        return json.dumps({"v": 1, "t": self.time_ms, "e": [list(e) for e in self.ends]},
                          separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> "SourceObservation":
        value = json.loads(raw)
        return cls(time_ms=int(value["t"]), ends=tuple((str(t), int(p), int(e)) for t, p, e in value["e"]))

    @classmethod
    def of_result(cls, result: Report) -> "SourceObservation | None":
        """From a run's plan (None: a run that stopped before planning, or a plan without source ends)."""
        if isinstance(result, RunFailure):
            return None
        ends = tuple((p.source_topic, p.partition, p.source_end) for p in result.plan if p.source_end >= 0)
        if not ends:
            return None
        started = dt.datetime.fromisoformat(result.started_at) if result.started_at else None
        return cls(int(started.timestamp() * 1000) if started else 0, ends)


@dataclass(frozen=True)
class MirrorSample:
    mirror: str
    time_ms: int
    partitions: tuple[PartitionSample, ...]
    last_run: RunOutcome | None = None
    last_success_ms: int | None = None

    def encode(self) -> bytes:
        """One record per mirror and evaluation on the lag topic (short keys: 7 days of them are kept)."""
        return json.dumps({"v": 1, "m": self.mirror, "t": self.time_ms, "ok": self.last_success_ms,
                           "run": asdict(self.last_run) if self.last_run else None,
                           "p": [[p.source_topic, p.partition, p.high_watermark, p.last_stable, p.progress,
                                  p.log_start, p.oldest_pending_ms, p.last_commit_ms]
                                 + ([p.foreign, p.foreign_at] if p.foreign else []) for p in self.partitions]},
                          separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> "MirrorSample":
        value = json.loads(raw)
        run = value.get("run")
        return cls(mirror=value["m"], time_ms=int(value["t"]), last_success_ms=value.get("ok"),
                   last_run=RunOutcome.from_value(run) if run else None,
                   partitions=tuple(PartitionSample(*row) for row in value["p"]))


@dataclass(frozen=True)
class Policy:
    """What the evaluation needs besides the samples (all durations in ms)."""

    lag_interval_ms: int                      # how often samples are taken (the lag DAG's schedule)
    mirror_interval_ms: int | None = None     # the mirror's schedule; None = manual runs only
    max_lag_seconds: float | None = None      # the SLO on the time lag

    @property
    def cover_ms(self) -> int:
        """How long a window must span before STALLED/LAGGING can be said: one mirror run at least."""
        return max(self.mirror_interval_ms or 0, self.lag_interval_ms)

    @property
    def window_ms(self) -> int:
        return 2 * self.cover_ms


@dataclass(frozen=True)
class PartitionStatus:
    source_topic: str
    partition: int
    status: str
    reason: str
    record_lag: int
    time_lag_seconds: float
    high_watermark: int
    last_stable: int
    progress: int | None
    last_commit_ms: int | None
    breach: bool

    @property
    def label(self) -> str:
        return f"{self.source_topic}[{self.partition}]"


@dataclass(frozen=True)
class GroupLag:
    """A consumer group on the target (synced there by the mirror's groups section): how far its
    committed offsets are behind the target's last stable offsets, over the partitions it committed."""

    group: str
    state: str           # the coordinator's state; ACTIVE = members consume on the target now
    partitions: int      # mirrored target partitions the group has a committed offset for
    record_lag: int      # sum of (target last stable offset - committed), each at least 0


def group_lags(committed: Mapping[str, Mapping[tuple[str, int], int]], ends: Mapping[tuple[str, int], int],
               states: Mapping[str, str]) -> tuple[GroupLag, ...]:
    """Each group with a committed offset on a mirrored target partition, sorted by name."""
    out = []
    for group in sorted(committed):
        offsets = {tp: o for tp, o in committed[group].items() if tp in ends}
        if offsets:
            out.append(GroupLag(group=group, state=states.get(group, "UNKNOWN"), partitions=len(offsets),
                                record_lag=sum(max(0, ends[tp] - o) for tp, o in offsets.items())))
    return tuple(out)


@dataclass(frozen=True)
class CapStatus:
    """The bandwidth cap against the last run's measured rate. ``limiting``: the cap, not the source, sets
    the pace - the rate is within bandwidth.AT_CAP_TOLERANCE of the cap while the record lag did not fall
    over the evaluation window. ``reaches_time_lag_seconds``: at that rate, how long a record written now
    waits to be copied (the backlog in bytes, record lag × the last run's mean record size, ÷ the cap): the
    time lag the mirror reaches, which keeps growing while the source writes faster than the cap."""

    cap_bytes_per_second: float
    rate_bytes_per_second: float
    at_cap: bool
    lag_falling: bool | None          # None: one sample only, the trend is not known yet
    limiting: bool
    reaches_time_lag_seconds: float | None
    text: str


def cap_status(run: RunOutcome | None, lags: list[int]) -> CapStatus | None:
    """``lags``: the mirror's record lag in the window's samples, oldest first (the current one last)."""
    if run is None or run.cap_bytes_per_second is None or run.cap_bytes_per_second <= 0:
        return None
    cap, rate = run.cap_bytes_per_second, run.rate_bytes_per_second
    held = bandwidth.at_cap(rate, cap)
    falling = None if len(lags) < 2 else lags[-1] < lags[0]
    limiting = held and falling is False
    mean = run.copied_bytes / run.records if run.records else 0.0
    backlog = lags[-1] * mean if lags else 0.0
    reaches = bandwidth.drain_seconds(backlog, cap) if held else None
    figures = f"the last run copied {rate:,.0f} bytes/s, its cap is {cap:,.0f} bytes/s"
    if limiting:
        text = (f"the cap, not the source, limits this mirror: {figures} and the record lag did not fall "
                f"({lags[0]} -> {lags[-1]}); at the cap a record written now is copied in about {reaches:.0f} s "
                f"({lags[-1]} records x {mean:,.0f} bytes / {cap:,.0f} bytes/s), a time lag that grows while the "
                f"source writes faster than the cap")
    elif held and falling is None:
        text = f"{figures}: at the cap; one lag sample so far, so whether the cap limits the mirror is not known"
    elif held:
        text = f"{figures}: at the cap, but the record lag falls: the mirror is catching up"
    else:
        text = f"{figures}: the source, not the cap, sets the pace"
    return CapStatus(cap_bytes_per_second=cap, rate_bytes_per_second=rate, at_cap=held, lag_falling=falling,
                     limiting=limiting, reaches_time_lag_seconds=round(reaches, 1) if reaches is not None else None,
                     text=text)


@dataclass(frozen=True)
class MirrorStatus:
    mirror: str
    time_ms: int
    status: str
    reason: str
    record_lag: int
    time_lag_seconds: float
    last_run: RunOutcome | None
    last_success_ms: int | None
    last_commit_ms: int | None      # the least recently committed partition's last commit
    max_lag_seconds: float | None
    samples_in_window: int
    partitions: tuple[PartitionStatus, ...] = field(default_factory=tuple)
    groups: tuple[GroupLag, ...] = field(default_factory=tuple)   # mirrors with a groups section
    groups_error: str | None = None    # why the groups' lag could not be read (the mirror's figures stand)
    cap: CapStatus | None = None       # mirrors with a bandwidth cap: does it limit the mirror (cap_status)

    @property
    def breached(self) -> tuple[PartitionStatus, ...]:
        return tuple(p for p in self.partitions if p.breach)

    @property
    def alerting(self) -> bool:
        return self.status in ALERTING or bool(self.breached)

    def alerts(self) -> list[str]:
        """One sentence per problem, naming the mirror, the partitions, the figure and the threshold."""
        out = []
        if self.breached:
            worst = max(self.breached, key=lambda p: p.time_lag_seconds)
            out.append(f"mirror {self.mirror}: time lag SLO max_lag_seconds={_num(self.max_lag_seconds)} breached "
                       f"on {_labels(self.breached)} (worst {worst.label}: {worst.time_lag_seconds:.1f} s, "
                       f"{worst.record_lag} offsets behind)")
        if self.status in ALERTING:
            bad = [p for p in self.partitions if p.status == self.status]
            out.append(f"mirror {self.mirror}: {self.status}: {self.reason}"
                       + (f" (partitions {_labels(bad)})" if bad else ""))
        return out

    def to_json(self) -> dict[str, Any]:
        """The figures `eosmirror lag --json`, the page and the metrics all show."""
        value = asdict(self)
        value["alerts"] = self.alerts()
        value["alerting"] = self.alerting
        return value


def _num(value: float | None) -> str:
    return "none" if value is None else (str(int(value)) if float(value).is_integer() else str(value))


def _labels(parts: Iterable[PartitionStatus], most: int = 10) -> str:
    names = [p.label for p in parts]
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def window(history: Iterable[MirrorSample], current: MirrorSample, policy: Policy) -> list[MirrorSample]:
    """The samples the evaluation looks at: those of the last ``policy.window_ms``, ending with ``current``."""
    since = current.time_ms - policy.window_ms
    earlier = sorted((s for s in history if since <= s.time_ms < current.time_ms), key=lambda s: s.time_ms)
    return earlier + [current]


def _mirror_problem(current: MirrorSample, policy: Policy) -> tuple[str, str] | None:
    """(status, reason) that applies to every partition: a failed last run, or no run for too long."""
    run = current.last_run
    if run is not None and run.status != "ok":
        return ERROR, f"the last run ({run.run_id}) failed: {run.error or 'see its log'}"
    if policy.mirror_interval_ms:
        limit = 2 * policy.mirror_interval_ms
        if current.last_success_ms is None:
            return STOPPED, "no successful run on record"
        age = current.time_ms - current.last_success_ms
        if age > limit:
            return STOPPED, (f"no successful run for {age / 1000:.0f} s (more than 2 schedule intervals, "
                             f"{limit / 1000:.0f} s)")
    return None


def _foreign(part: PartitionSample) -> tuple[str, str] | None:
    """FOREIGN: the target partition holds records the mirror did not write; runs refuse until an operator decides."""
    if not part.foreign:
        return None
    return FOREIGN, (f"{part.foreign} record(s) on its target partition were not written by the mirror (the first at "
                     f"offset {part.foreign_at}); runs refuse until an operator decides (docs/failing-loudly.md)")


def _partition_trend(series: list[tuple[int, PartitionSample]], policy: Policy) -> tuple[str, str]:
    """(status, reason) of one partition from its samples in the window, oldest first."""
    first_ms, _ = series[0]
    last_ms, last = series[-1]
    covered = last_ms - first_ms >= policy.cover_ms
    # STALLED looks at the shortest tail of the window that still spans one mirror interval, so
    # it is said as soon as a run should have moved the progress and did not.
    tail: list[tuple[int, PartitionSample]] = []
    if covered:
        start_ms = max(t for t, _ in series if t <= last_ms - policy.cover_ms)
        tail = [(t, s) for t, s in series if t >= start_ms]
    if tail and all(s.record_lag > 0 for _, s in tail) and len({s.progress for _, s in tail}) == 1:
        return STALLED, (f"progress stayed at {last.progress} for {(last_ms - tail[0][0]) / 1000:.0f} s "
                         f"with {last.record_lag} offsets to copy")
    lags = [s.record_lag for _, s in series]
    if covered and all(b >= a for a, b in zip(lags, lags[1:])) and lags[-1] > lags[0]:
        return LAGGING, f"record lag grew from {lags[0]} to {lags[-1]} over {(last_ms - first_ms) / 1000:.0f} s"
    return OK, ""


def evaluate(history: Iterable[MirrorSample], current: MirrorSample, policy: Policy) -> MirrorStatus:
    """The mirror's status at ``current.time_ms`` from the samples of the window ending there."""
    samples = window(history, current, policy)
    mirror_problem = _mirror_problem(current, policy)
    # Each partition's series in one pass over the window: a scan per partition grows with the square of
    # the partitions.
    series_of: dict[tuple[str, int], list[tuple[int, PartitionSample]]] = {}
    for sample in samples:
        for p in sample.partitions:
            series_of.setdefault((p.source_topic, p.partition), []).append((sample.time_ms, p))
    statuses = []
    for part in current.partitions:
        series = series_of.get((part.source_topic, part.partition), [])
        status, reason = _foreign(part) or mirror_problem or _partition_trend(series, policy)
        time_lag = part.time_lag_ms(current.time_ms) / 1000
        statuses.append(PartitionStatus(
            source_topic=part.source_topic, partition=part.partition, status=status, reason=reason,
            record_lag=part.record_lag, time_lag_seconds=round(time_lag, 3), high_watermark=part.high_watermark,
            last_stable=part.last_stable, progress=part.progress, last_commit_ms=part.last_commit_ms,
            breach=policy.max_lag_seconds is not None and time_lag > policy.max_lag_seconds))
    worst = max(statuses, key=lambda p: SEVERITY.index(p.status), default=None)
    status = worst.status if worst else (mirror_problem[0] if mirror_problem else OK)
    reason = worst.reason if worst else (mirror_problem[1] if mirror_problem else "")
    commits = [p.last_commit_ms for p in current.partitions if p.last_commit_ms is not None]
    lags = [sum(p.record_lag for p in sample.partitions) for sample in samples]
    return MirrorStatus(
        mirror=current.mirror, time_ms=current.time_ms, status=status, reason=reason,
        record_lag=sum(p.record_lag for p in statuses),
        time_lag_seconds=max((p.time_lag_seconds for p in statuses), default=0.0),
        last_run=current.last_run, last_success_ms=current.last_success_ms,
        last_commit_ms=min(commits) if len(commits) == len(current.partitions) and commits else None,
        max_lag_seconds=policy.max_lag_seconds, samples_in_window=len(samples), partitions=tuple(statuses),
        cap=cap_status(current.last_run, lags))


def with_run_history(sample: MirrorSample, runs: Iterable[RunOutcome]) -> MirrorSample:
    """``sample`` with its last run and last success taken from the recorded run outcomes (and the
    partitions' last commits: every successful run commits every partition it plans)."""
    ordered = sorted(runs, key=lambda r: r.finished_ms)
    successes = [r.finished_ms for r in ordered if r.status == "ok"]
    successes += [p.last_commit_ms for p in sample.partitions if p.last_commit_ms]
    return replace(sample, last_run=ordered[-1] if ordered else sample.last_run,
                   last_success_ms=max(successes) if successes else sample.last_success_ms)


def schedule_interval_ms(cron: str | None) -> int | None:
    """The shortest gap between two firings of a cron expression (over a day), or None when manual."""
    if not cron:
        return None
    import datetime as dt

    from croniter import croniter

    it = croniter(CRON_PRESETS.get(cron.strip(), cron), dt.datetime(2026, 1, 5))
    times = [it.get_next(dt.datetime) for _ in range(60)]
    return int(min((b - a).total_seconds() for a, b in zip(times, times[1:])) * 1000)
