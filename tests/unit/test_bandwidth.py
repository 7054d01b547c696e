"""The bandwidth cap (core/bandwidth.py, issue #52 item 3) on an injected clock: the token bucket, the
throttle a slot keeps (catch-up rate, batch sizes), the split over slots, what the config and the driver
refuse, the copy loop held at the cap over fakes, and what the lag page says when the cap limits a mirror."""

from __future__ import annotations

import pytest
from confluent_kafka import Message

from eosmirror.core import bandwidth, lag
from eosmirror.core.bandwidth import SlotCap, Throttle, TokenBucket
from eosmirror.core.errors import ConfigError
from eosmirror.core.lag import RunOutcome
from eosmirror.core.planning import PartitionPlan, SlotPlan
from eosmirror.core.report import cap_line
from eosmirror.core.runreport import RunReport, RunStatus, SlotResult, SlotStatus
from eosmirror.driver.run import check_cap, slot_cap
from eosmirror.slot import recordloop
from eosmirror.slot.faults import Faults
from eosmirror.slot.recordloop import RecordLoop
from eosmirror.slot.slotstate import PartitionCopy, PartitionTask, SlotTask
from tests.support.configs import error_of, one
from tests.support.fakes import Clock


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# --- the token bucket ----------------------------------------------------------------------------------

def test_a_bucket_starts_empty_refills_at_its_rate_and_holds_at_most_its_burst():
    clock = FakeClock()
    bucket = TokenBucket(1000, clock)
    assert bucket.balance == 0 and bucket.wait_seconds(100) == pytest.approx(0.1)
    clock.now += 0.05
    assert bucket.balance == pytest.approx(50)
    clock.now += 60      # idle for a minute: only the burst is kept
    assert bucket.balance == pytest.approx(1000 * bandwidth.BURST_SECONDS)


def test_a_record_larger_than_the_balance_overdraws_and_the_debt_is_waited_out():
    clock = FakeClock()
    bucket = TokenBucket(1000, clock)
    bucket.spend(3000)                       # never split: the record goes, the bucket owes 3 s
    assert bucket.wait_seconds() == pytest.approx(3.0)
    clock.now += 2.0
    assert bucket.wait_seconds() == pytest.approx(1.0)
    clock.now += 1.0
    assert bucket.wait_seconds() == 0.0
    # a need above the burst is waited for only up to the burst, never for ever
    assert bucket.wait_seconds(10**9) == pytest.approx(bandwidth.BURST_SECONDS)


def test_over_any_interval_a_bucket_lets_through_at_most_rate_times_interval_plus_burst_and_one_record():
    clock = FakeClock()
    bucket, rate, record = TokenBucket(10_000, clock), 10_000, 700
    sent: list[tuple[float, int]] = []
    while clock.now < 160.0:                 # a loop that always has records to send
        wait = bucket.wait_seconds(record)
        if wait > 0:
            clock.now += wait
            continue
        bucket.spend(record)
        sent.append((clock.now, record))
    for start in range(100, 155):
        window = sum(size for at, size in sent if start <= at < start + 5)
        assert window <= rate * 5 + bucket.burst + record
    total = sum(size for _, size in sent)
    assert total == pytest.approx(rate * 60, rel=0.01)     # and it does not hold back more than the cap


def test_changing_the_rate_keeps_what_was_earned_up_to_the_new_burst():
    clock = FakeClock()
    bucket = TokenBucket(10_000, clock)
    clock.now += 1
    bucket.set_rate(1000)
    assert bucket.balance == pytest.approx(1000 * bandwidth.BURST_SECONDS)
    with pytest.raises(ValueError):
        bucket.set_rate(0)


# --- the throttle of a slot ------------------------------------------------------------------------------

def test_the_throttle_sizes_batches_to_the_bucket_and_learns_the_mean_record():
    clock = FakeClock()
    throttle = Throttle(SlotCap(10_000), clock)
    assert throttle.batch_records(5000) == 1          # no record seen yet: one, then the bucket's worth
    throttle.produced(1000, 1)
    clock.now += 0.15
    assert throttle.batch_records(5000) == 1          # 500 bytes: less than a record, still one
    clock.now += 10
    assert throttle.batch_records(5000) == 2          # the burst (2,000 bytes) holds two
    assert Throttle(SlotCap(None), clock).batch_records(5000) == 5000


def test_far_behind_switches_to_the_catch_up_rate_and_back():
    clock = FakeClock()
    throttle = Throttle(SlotCap(100_000, catch_up_bytes_per_second=20_000, catch_up_lag_seconds=60), clock)
    assert throttle.far_behind and throttle.rate == 20_000     # the slower rate until a batch shows the age
    now_ms = 10_000_000
    assert throttle.observe_age(now_ms - 1_000, now_ms) and throttle.rate == 100_000 and not throttle.far_behind
    assert not throttle.observe_age(now_ms - 2_000, now_ms)    # unchanged
    clock.now += 5
    assert throttle.observe_age(now_ms - 120_000, now_ms) and throttle.rate == 20_000
    clock.now += 7
    assert throttle.catch_up_total() == pytest.approx(7)
    assert not throttle.observe_age(-1, now_ms)                # no timestamp: no decision
    only_catch_up = Throttle(SlotCap(None, catch_up_bytes_per_second=5_000, catch_up_lag_seconds=60), clock)
    assert only_catch_up.rate == 5_000
    only_catch_up.observe_age(now_ms, now_ms)
    assert only_catch_up.rate is None and only_catch_up.wait_seconds() == 0.0


# --- split, config, driver checks ------------------------------------------------------------------------

def test_the_cap_is_split_over_the_slots_that_hold_partitions():
    assert bandwidth.slot_share(200_000, 2) == 100_000 and bandwidth.slot_share(None, 2) is None
    m = one(max_bytes_per_second=300_000, slots=4)
    plans = [SlotPlan(k, f"t.{k}", tuple(plan("a", k, k) for _ in range(1 if k < 3 else 0))) for k in range(4)]
    cap = slot_cap(m, plans)
    assert cap is not None and cap.bytes_per_second == 100_000 and cap.catch_up_bytes_per_second is None
    assert slot_cap(one(), plans) is None


def plan(topic: str, partition: int, slot: int) -> PartitionPlan:
    return PartitionPlan(topic, topic, partition, start=0, end=10, origin="progress", slot=slot)


def test_the_config_refuses_a_cap_below_the_floor_negative_not_a_number_or_above_what_the_slots_carry():
    assert one(max_bytes_per_second=200_000).max_bytes_per_second == 200_000
    assert "field `max_bytes_per_second`" in error_of(max_bytes_per_second=-5)
    assert "field `max_bytes_per_second`" in error_of(max_bytes_per_second=100)      # below 1 KiB/s
    assert "field `max_bytes_per_second`" in error_of(max_bytes_per_second="200KB")
    assert "field `catch_up_bytes_per_second`" in error_of(catch_up_bytes_per_second=1.5e5)
    text = error_of(max_bytes_per_second=10**11, slots=2)
    assert "field `max_bytes_per_second`" in text and "more than one slot can carry" in text
    assert "field `catch_up_lag_seconds`" in error_of(catch_up_lag_seconds=0)


def test_a_run_override_of_the_cap_is_checked_like_the_field():
    m = one(slots=2)
    assert m.with_bounds(max_bytes_per_second=50_000).max_bytes_per_second == 50_000
    with pytest.raises(ConfigError, match="--max-bytes-per-second .*field `max_bytes_per_second`"):
        m.with_bounds(max_bytes_per_second=-1)


def test_the_driver_refuses_a_share_below_one_record_per_second_of_the_largest_record_a_topic_allows():
    m = one(max_bytes_per_second=200_000, slots=2)
    slots = [SlotPlan(0, "t.0", (plan("small", 0, 0),)), SlotPlan(1, "t.1", (plan("big", 0, 1),))]
    check_cap(m, slots, {"small": 65_536, "big": 100_000})      # 100,000 per slot carries both
    with pytest.raises(ConfigError) as refused:
        check_cap(m, slots, {"small": 65_536, "big": 1_048_588})
    text = str(refused.value)
    assert refused.value.exit_code == 2
    assert "field `max_bytes_per_second`" in text and "big" in text and "2097176" in text


# --- the copy loop under the cap (fakes, the fake clock) -------------------------------------------------

class TimedConsumer:
    """Always has records of ``size`` bytes; returns as many as asked; consume costs 1 ms."""

    def __init__(self, clock: Clock, key: tuple[str, int], size: int) -> None:
        self.clock, self.key, self.size, self.offset = clock, key, size, 0

    def consume(self, num_messages, timeout):
        self.clock.now += 0.001
        batch = []
        for _ in range(num_messages):
            batch.append(Message(topic=self.key[0], partition=self.key[1], offset=self.offset,
                                 value=b"v" * self.size, timestamp=(1, 1_700_000_000_000)))
            self.offset += 1
        return batch

    def position(self, partitions):
        return partitions


class ClockedProducer:
    """Records when each record was produced; poll(timeout) lets the fake time pass."""

    def __init__(self, clock: Clock) -> None:
        self.clock, self.at = clock, []

    def produce(self, topic, value=None, key=None, partition=-1, **kwargs):
        self.at.append((self.clock.now, len(value)))

    def poll(self, timeout=0):
        self.clock.now += timeout
        return 0


def test_a_capped_loop_holds_its_rate_and_ends_its_transaction_at_the_deadline_with_the_range_unfinished(
        monkeypatch):
    clock = Clock()
    monkeypatch.setattr(recordloop, "time", clock)
    key = ("src", 0)
    task = SlotTask(mirror="m", slot=0, transactional_id="t", generation=1, delivery="exactly_once",
                    progress_group="g", partitions=(PartitionTask("src", "tgt", 0, 0, 10**9, True),),
                    source_conf={}, target_conf={}, cap=SlotCap(50_000))
    states = {key: PartitionCopy(task.partitions[0], 0)}
    throttle = Throttle(task.cap, clock.monotonic)
    producer = ClockedProducer(clock)
    loop = RecordLoop(task, TimedConsumer(clock, key, 1000), producer, Faults([]), throttle)
    started = clock.now
    copied = loop.copy(states, started + 10.0, 0)
    assert clock.now <= started + 10.0 + 0.01          # never past the deadline
    assert loop.cut_by_cap and not states[key].done
    assert copied == sum(size for _, size in producer.at)
    assert 50_000 * 10 * 0.95 <= copied <= 50_000 * 10 + throttle.bucket.burst + 1000
    for second in range(10):
        window = sum(size for at, size in producer.at if started + second <= at < started + second + 1)
        assert window <= 50_000 + throttle.bucket.burst + 1000, f"second {second}: {window} bytes"
    assert throttle.waited > 5


# --- reports and the lag page ----------------------------------------------------------------------------

def slot_result(slot: int, size: int, seconds: float, share: float | None, cut: int = 0) -> SlotResult:
    return SlotResult(slot=slot, transactional_id=f"t.{slot}", status=SlotStatus.COMMITTED, records=size // 1000,
                      bytes=size, transactions=3, transaction_seconds=seconds, cap_bytes_per_second=share,
                      throttled_seconds=4.0, cap_cut_transactions=cut)


def report_of(slots: list[SlotResult], cap: int | None = 200_000) -> RunReport:
    return RunReport(mirror="m", run_id="r", status=RunStatus.OK, dry_run=False, delivery="exactly_once",
                     started_at="", finished_at="", source="s", target="t", generation=1, generation_changed=False,
                     topic_sync="", records=sum(s.records for s in slots), bytes=sum(s.bytes for s in slots),
                     slots=slots, max_bytes_per_second=cap)


def test_the_run_report_says_what_the_cap_did():
    report = report_of([slot_result(0, 1_000_000, 10.0, 100_000, cut=2), slot_result(1, 990_000, 10.0, 100_000)])
    line = cap_line(report)
    assert "max_bytes_per_second 200,000" in line and "waited 8.0 s" in line and "2 transaction(s)" in line
    assert cap_line(report_of([], cap=None)) == ""
    outcome = RunOutcome.of_result(report, 0)
    assert outcome.rate_bytes_per_second == pytest.approx(199_000) and outcome.cap_bytes_per_second == 200_000
    assert RunOutcome.decode(outcome.encode()) == outcome


def test_the_lag_page_says_the_cap_limits_the_mirror_and_the_time_lag_it_reaches():
    run = RunOutcome(run_id="r", status="ok", finished_ms=0, records=1990, copied_bytes=1_990_000,
                     rate_bytes_per_second=199_000, cap_bytes_per_second=200_000)
    limited = lag.cap_status(run, [10_000, 12_000, 14_000])
    assert limited is not None and limited.limiting and limited.at_cap and limited.lag_falling is False
    assert limited.reaches_time_lag_seconds == pytest.approx(14_000 * 1000 / 200_000)
    assert "the cap, not the source, limits this mirror" in limited.text and "70 s" in limited.text
    catching_up = lag.cap_status(run, [14_000, 9_000])
    assert catching_up is not None and catching_up.at_cap and not catching_up.limiting
    slow_source = lag.cap_status(RunOutcome(run_id="r", status="ok", finished_ms=0, records=10, copied_bytes=10_000,
                                            rate_bytes_per_second=120_000, cap_bytes_per_second=200_000), [5, 9])
    assert slow_source is not None and not slow_source.limiting and "the source, not the cap" in slow_source.text
    assert lag.cap_status(RunOutcome(run_id="r", status="ok", finished_ms=0), [1, 2]) is None


def test_the_run_override_travels_to_spark_submit_and_the_run_server_as_a_job_argument():
    from eosmirror.spark import job, submit

    argv = submit.job_arguments("m", max_bytes_per_second=300_000)
    assert argv[argv.index("--max-bytes-per-second") + 1] == "300000"
    assert job.options_from(job.parser().parse_args(argv)).max_bytes_per_second == 300_000
    assert "--max-bytes-per-second" not in submit.job_arguments("m")


def test_a_capped_slot_prefetches_about_two_seconds_of_its_rate_from_the_source_unless_told_otherwise():
    from eosmirror.kafka import clients

    assert bandwidth.source_queue(SlotCap(5_000_000), 1_000_000) == {"queued.max.messages.kbytes": 9765}
    assert bandwidth.source_queue(SlotCap(100_000), 1_000_000) == {"queued.max.messages.kbytes": 1024}
    assert bandwidth.source_queue(SlotCap(100_000), 4_000_000)["queued.max.messages.kbytes"] == 3907
    assert bandwidth.source_queue(SlotCap(None, catch_up_bytes_per_second=100_000), 1_000_000) == {}
    assert bandwidth.source_queue(None, 1_000_000) == {}
    queue = bandwidth.source_queue(SlotCap(100_000), 1_000_000)
    conf = clients.source_consumer_config({"bootstrap.servers": "b:9092"}, {}, "g", "c", defaults=queue)
    assert conf["queued.max.messages.kbytes"] == 1024
    mine = clients.source_consumer_config({"bootstrap.servers": "b:9092"}, {"queued.max.messages.kbytes": 4096}, "g",
                                          "c", defaults=queue)
    assert mine["queued.max.messages.kbytes"] == 4096


def test_eosmirror_lag_and_the_page_show_a_cap_limited_mirror():
    from eosmirror.airflow import lagrender
    from eosmirror.core import lagview
    from eosmirror.core.lag import MirrorSample, PartitionSample, Policy

    run = RunOutcome(run_id="r", status="ok", finished_ms=0, records=1000, copied_bytes=1_000_000,
                     rate_bytes_per_second=198_000, cap_bytes_per_second=200_000)

    def sample(at_ms: int, stable: int) -> MirrorSample:
        return MirrorSample("m", at_ms, (PartitionSample("t", 0, stable, stable, 100, 0, at_ms - 30_000, at_ms),),
                            last_run=run)

    now = 10_000_000
    status = lag.evaluate([sample(now - 120_000, 4_100)], sample(now, 8_100), Policy(lag_interval_ms=60_000))
    assert status.cap is not None and status.cap.limiting and status.cap.reaches_time_lag_seconds == 40.0
    assert "m: CAP-LIMITED: the cap, not the source, limits this mirror" in lagview.mirrors_table([status], now)
    assert lagview.document([status], now)["mirrors"][0]["cap"]["limiting"] is True
    page = lagrender.mirror_page(status, [sample(now, 8_100)], "1h", now)
    assert "id='cap' data-limiting='true'" in page and "(cap-limited)" in lagrender.overview([status], now)
    text, _ = lagrender.metrics([status], now)
    assert b'eosmirror_cap_limited{mirror="m"} 1.0' in text


def test_a_lag_sample_decodes_run_outcomes_with_keys_it_does_not_know_or_lacks():
    import json

    from eosmirror.core.lag import MirrorSample

    run = RunOutcome(run_id="r", status="ok", finished_ms=5, copied_bytes=10, cap_bytes_per_second=100.0)
    raw = json.loads(MirrorSample("m", 1, (), last_run=run).encode())
    assert MirrorSample.decode(json.dumps(raw).encode()).last_run == run
    raw["run"]["from_a_later_release"] = 1
    for key in ("copied_bytes", "rate_bytes_per_second", "cap_bytes_per_second"):   # a sample from before the cap
        del raw["run"][key]
    assert MirrorSample.decode(json.dumps(raw).encode()).last_run == RunOutcome(run_id="r", status="ok", finished_ms=5)
