"""The bandwidth cap of a mirror (``max_bytes_per_second``, ``catch_up_bytes_per_second``): pure.

A slot copies at most its share of the mirror's cap: a token bucket over the bytes of the records it
produces (key + value + header names and values, the bytes the record loop counts; the batch framing a
broker adds is not counted). The copy loop (slot/recordloop.py) asks the bucket how many records it may
consume next and how long to wait; the clock is injected, so everything here is tested without time
passing and without brokers.

What holds:
  * over any interval, a slot produces at most ``rate * interval + burst + one record`` bytes: a record is
    never split, so one record may overdraw the bucket, and the debt is paid back before the next batch;
  * the bucket starts empty (no burst at a run's start) and holds at most ``burst`` =
    ``BURST_SECONDS * rate`` while the loop does not copy (flush and commit, an idle source);
  * waiting never runs past the transaction's deadline (the loop ends the transaction there and commits
    what it copied: a slot that cannot finish a chunk in ``max_transaction_seconds`` at the cap commits
    it in several smaller transactions and counts them, ``CapState.cut_transactions``).

"Far behind" (the catch-up rate): the newest record of the last batch a slot copied is older than
``catch_up_lag_seconds`` (record timestamps, the time lag docs/lag.md measures). The slot switches back to
``max_bytes_per_second`` once a batch's newest record is younger.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

# The bucket holds at most this many seconds of its rate: small enough that a burst after an idle
# moment adds 4 % to a 5 s window, large enough that a batch is more than a few records.
BURST_SECONDS = 0.2
# The floor of a cap (the config refuses less): one small record per second. At run time a slot's
# share must also carry the largest record its topics allow (``max.message.bytes``) once a second.
MIN_BYTES_PER_SECOND = 1024
# What one slot can carry at most: one Python process, one producer. The fastest slot measured copied
# ~90 MB/s (2 KB records on loopback, docs/results.md); a share above 1 GB/s (8 Gbit/s) never binds,
# so it is refused as a mistake (a missing or extra digit).
SLOT_CEILING_BYTES_PER_SECOND = 1_000_000_000
# A slot's measured rate within this fraction of its cap counts as "at the cap" (docs/lag.md).
AT_CAP_TOLERANCE = 0.05


class TokenBucket:
    """Bytes a slot may produce now: refilled at ``rate`` bytes per second up to ``burst``, spent per
    record; the balance may go below zero by one record (a record is never split)."""

    def __init__(self, rate: float, clock: Callable[[], float], burst_seconds: float = BURST_SECONDS):
        if rate <= 0:
            raise ValueError("rate must be positive")
        self._clock = clock
        self._burst_seconds = burst_seconds
        self.rate = float(rate)
        self.burst = self.rate * burst_seconds
        self._balance = 0.0     # starts empty: no burst when a run starts
        self._at = clock()

    def _refill(self) -> None:
        now = self._clock()
        if now > self._at:
            self._balance = min(self.burst, self._balance + (now - self._at) * self.rate)
        self._at = now

    @property
    def balance(self) -> float:
        self._refill()
        return self._balance

    def spend(self, size: int) -> None:
        """``size`` bytes were produced (even more than the balance: the debt is waited out)."""
        self._refill()
        self._balance -= size

    def wait_seconds(self, need: float = 0.0) -> float:
        """How long until the balance reaches ``min(need, burst)`` (0.0: now). ``need`` is at most the
        burst, so a need larger than the bucket is never waited for for ever."""
        self._refill()
        target = min(max(need, 0.0), self.burst)
        missing = target - self._balance
        # A shortfall below a millionth of a byte is rounding: waiting it out would not move a clock.
        return 0.0 if missing <= 1e-6 else missing / self.rate

    def set_rate(self, rate: float) -> None:
        """Change the rate from now on (what was earned so far at the old rate is kept, up to the new burst)."""
        if rate <= 0:
            raise ValueError("rate must be positive")
        self._refill()
        self.rate = float(rate)
        self.burst = self.rate * self._burst_seconds
        self._balance = min(self._balance, self.burst)


@dataclass(frozen=True)
class SlotCap:
    """What a slot's task carries: its share of the mirror's cap and of the catch-up rate (bytes per
    second; None: not capped in that mode) and when the catch-up rate applies."""

    bytes_per_second: float | None
    catch_up_bytes_per_second: float | None = None
    catch_up_lag_seconds: float = 300.0

    @property
    def capped(self) -> bool:
        return self.bytes_per_second is not None or self.catch_up_bytes_per_second is not None

    def rate(self, far_behind: bool) -> float | None:
        """The rate in force: the catch-up rate while far behind (when one is set), else the cap."""
        if far_behind and self.catch_up_bytes_per_second is not None:
            return self.catch_up_bytes_per_second
        return self.bytes_per_second


class Throttle:
    """One slot's cap in the copy loop: the bucket, the rate in force (cap or catch-up), the mean record
    size (how many records the next batch may hold) and what the report says about it."""

    def __init__(self, cap: SlotCap, clock: Callable[[], float]):
        self.cap = cap
        self._clock = clock
        # Until a batch shows how old the records are, the slower of the rates set is in force.
        self.far_behind = cap.catch_up_bytes_per_second is not None and (
            cap.bytes_per_second is None or cap.catch_up_bytes_per_second < cap.bytes_per_second)
        self.mean_record = 0.0     # bytes, a moving mean over the batches produced
        self.waited = 0.0          # seconds spent waiting on the cap
        self.catch_up_seconds = 0.0
        self._since = clock()
        rate = cap.rate(self.far_behind)
        self.bucket: TokenBucket | None = TokenBucket(rate, clock) if rate is not None else None

    def batch_records(self, most: int) -> int:
        """How many records the next consume may return (at least 1; ``most`` when not capped now)."""
        if self.bucket is None or self.mean_record <= 0:
            return most if self.bucket is None else 1
        return max(1, min(most, int(self.bucket.balance / self.mean_record)))

    def wait_seconds(self) -> float:
        """How long to wait before the next batch: the debt, and then one mean record's bytes."""
        if self.bucket is None:
            return 0.0
        return self.bucket.wait_seconds(self.mean_record)

    def waited_for(self, seconds: float) -> None:
        self.waited += seconds

    def produced(self, size: int, records: int) -> None:
        """A batch of ``records`` records, ``size`` bytes in all, was produced."""
        if records <= 0:
            return
        mean = size / records
        self.mean_record = mean if self.mean_record <= 0 else 0.8 * self.mean_record + 0.2 * mean
        if self.bucket is not None:
            self.bucket.spend(size)

    def observe_age(self, newest_record_ms: int, now_ms: int) -> bool:
        """A batch copied records whose newest was written at ``newest_record_ms``: far behind or not
        (``catch_up_lag_seconds``), and the rate switched if that changed. True: the rate changed."""
        if newest_record_ms < 0 or self.cap.catch_up_bytes_per_second is None:
            return False
        far = (now_ms - newest_record_ms) / 1000 > self.cap.catch_up_lag_seconds
        if far == self.far_behind:
            return False
        now = self._clock()
        if self.far_behind:
            self.catch_up_seconds += now - self._since
        self._since, self.far_behind = now, far
        rate = self.cap.rate(far)
        if rate is None:
            self.bucket = None
        elif self.bucket is None:
            self.bucket = TokenBucket(rate, self._clock)
        else:
            self.bucket.set_rate(rate)
        return True

    @property
    def rate(self) -> float | None:
        return self.bucket.rate if self.bucket is not None else None

    def catch_up_total(self) -> float:
        return self.catch_up_seconds + (self._clock() - self._since if self.far_behind else 0.0)


def source_queue(cap: SlotCap | None, message_max_bytes: int) -> dict[str, int]:
    """Source consumer defaults of a capped slot. librdkafka prefetches up to queued.max.messages.kbytes (64 MB)
    ahead of the loop: a capped slot would read its source at full speed until that queue is full. Two seconds
    of the slot's faster rate keeps its source reads close to the cap (at least 1 MiB, and above the consumer's
    ``message.max.bytes``, which librdkafka requires of ``fetch.max.bytes`` and bounds by this queue). None for
    a slot capped only while far behind: caught up, it copies uncapped."""
    if cap is None or cap.bytes_per_second is None:
        return {}
    fastest = max(r for r in (cap.bytes_per_second, cap.catch_up_bytes_per_second) if r is not None)
    return {"queued.max.messages.kbytes": max(1024, int(2 * fastest / 1024), message_max_bytes // 1024 + 1)}


def slot_share(bytes_per_second: int | None, working_slots: int) -> float | None:
    """A slot's share of a mirror's rate: split evenly over the slots that hold partitions this run (a
    slot with none copies nothing, so its share would be lost)."""
    if bytes_per_second is None:
        return None
    return bytes_per_second / max(1, working_slots)


def share_problem(field: str, bytes_per_second: int | None, working_slots: int, largest_record: int,
                  topic: str) -> str | None:
    """Why a slot's share of ``field`` cannot work with the largest record its topics allow (``topic``'s
    max.message.bytes, ``largest_record``), or None. One record per second is the floor: below it a
    single record of that size overdraws a slot's bucket for more than a second."""
    share = slot_share(bytes_per_second, working_slots)
    if share is None or share >= largest_record:
        return None
    return (f"{bytes_per_second} bytes/s split over {working_slots} slot(s) is {share:.0f} bytes/s per slot, below "
            f"one record per second of the largest record target topic {topic} allows (max.message.bytes "
            f"{largest_record}); raise `{field}` to at least {largest_record * working_slots}, use fewer slots, "
            f"or lower max.message.bytes of the source topic")


def at_cap(rate: float, cap: float) -> bool:
    """A measured ``rate`` counts as held by ``cap`` (within AT_CAP_TOLERANCE of it)."""
    return cap > 0 and rate >= cap * (1 - AT_CAP_TOLERANCE)


def drain_seconds(backlog_bytes: float, rate: float) -> float | None:
    """At ``rate`` bytes per second, how long until a record produced now is copied (the time lag it
    will have): the backlog in front of it divided by the rate. None: no rate."""
    return backlog_bytes / rate if rate > 0 else None
