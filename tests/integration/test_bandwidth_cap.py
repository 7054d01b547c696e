"""The bandwidth cap (``max_bytes_per_second``, issue #52 item 3) measured from outside on real brokers.

A 2-slot mirror capped at 200 KB/s copies about 15 s worth of 1 KB records; a sampler with its own
consumer reads the target's high watermarks five times a second. Over every 5 s window the bytes that
arrived stay within the cap + 10 % (a test on a loaded 2-core machine; the +-5 % over 60 s is the bench's
figure, `python -m eosmirror_tools.bench --only cap`), the copy does not starve below 60 % of the cap, and
read_committed consumers see exactly the source's records, once each. Transactions of 4 s cannot finish a
slot's range at its 100 KB/s share: the slots commit smaller transactions and the report counts them, each
well inside transaction.timeout.ms. A cap whose share cannot carry the largest record a topic allows is
refused before anything is fenced or copied. A follow run holds the cap too while the source writes faster
than it, and the next run takes over exactly once.
"""

from __future__ import annotations

import threading

import pytest

from eosmirror.core.errors import ConfigError
from eosmirror_tools.kit.caprate import EndSampler, active, windows
from tests.helpers import create_topic, mirror, producer, progress_of, read_all, run, values
from tests.support.waiting import in_seconds

pytestmark = pytest.mark.integration

CAP = 200_000
PARTITIONS = 2
VALUE = 1000
KEY = 8          # b"k0000000"
PER_PARTITION = 1500   # 3 MB in all: 15 s at the cap


def seed(conf, topic: str) -> None:
    # Batches below the topic's max.message.bytes (64 KiB), or the broker refuses them.
    p = producer(conf, **{"enable.idempotence": True, "batch.size": 32768})
    for n in range(PER_PARTITION):
        for k in range(PARTITIONS):
            p.produce(topic, key=f"k{n:07d}".encode(), value=f"{k}-{n}-".encode().ljust(VALUE, b"x"), partition=k)
    assert p.flush(60) == 0
    assert all(len(read_all(conf, topic, k)) == PER_PARTITION for k in range(PARTITIONS)), "the seed did not land"


def test_a_capped_run_holds_the_cap_measured_on_the_target_and_copies_exactly_once(source_conf, target_conf, unique):
    topic = create_topic(source_conf, unique("cap"), partitions=PARTITIONS, max_message_bytes="65536")
    seed(source_conf, topic)
    m = mirror(unique("m"), [topic], slots=2, max_bytes_per_second=CAP, max_transaction_seconds=4)
    with EndSampler(target_conf, topic, PARTITIONS) as sampler:
        report = run(m)
    assert report["status"] == "ok" and report["records"] == PARTITIONS * PER_PARTITION, report.get("errors")
    assert report["max_bytes_per_second"] == CAP

    record = KEY + VALUE
    samples = active(sampler.samples, PARTITIONS * PER_PARTITION)
    assert len(samples) > 25, f"too few samples while copying: {samples}"
    five = windows(samples, 5.0, record)
    assert five, f"no 5 s window in {samples}"
    worst = max(rate for _, rate in five)
    assert worst <= CAP * 1.10, (f"a 5 s window carried {worst:,.0f} bytes/s, cap {CAP:,}: {five}; samples "
                                 f"{samples}; slots {[(s['bytes'], s['transactions'], s['transaction_seconds'], s['seconds'], s.get('throttled_seconds')) for s in report['slots']]}")
    seconds = samples[-1][0] - samples[0][0]
    mean = (samples[-1][1] - samples[0][1]) * record / seconds
    assert mean >= CAP * 0.6, f"{mean:,.0f} bytes/s over {seconds:.1f} s: the cap starved the copy"

    # The slots could not finish their ranges in one 4 s transaction at 100 KB/s each: smaller
    # transactions, counted, each far inside transaction.timeout.ms (2 x 4 + 30 s).
    slots = report["slots"]
    assert all(s["cap_bytes_per_second"] == CAP / 2 for s in slots), slots
    assert sum(s["cap_cut_transactions"] for s in slots) >= 2 and all(s["throttled_seconds"] > 1 for s in slots)
    assert max(s["max_transaction_seconds"] for s in slots) < m.transaction_timeout_ms / 1000 / 2

    for k in range(PARTITIONS):
        source, target = values(read_all(source_conf, topic, k)), values(read_all(target_conf, topic, k))
        assert len(target) == len(set(target)) == PER_PARTITION, f"partition {k}: {len(target)} records"
        assert target == source
    assert {k: p.offset for k, p in progress_of(target_conf, m, topic, PARTITIONS).items()} == {
        k: PER_PARTITION for k in range(PARTITIONS)}


def test_a_cap_whose_share_cannot_carry_the_largest_record_is_refused_before_anything_is_copied(
        source_conf, target_conf, unique):
    topic = create_topic(source_conf, unique("capbig"), partitions=PARTITIONS)   # max.message.bytes ~1 MiB
    seed_small = producer(source_conf)
    seed_small.produce(topic, value=b"x", partition=0)
    seed_small.flush(30)
    m = mirror(unique("m"), [topic], slots=2, max_bytes_per_second=CAP)
    with pytest.raises(ConfigError) as refused:
        run(m)
    text = str(refused.value)
    assert refused.value.exit_code == 2 and "field `max_bytes_per_second`" in text and topic in text
    assert read_all(target_conf, topic, 0) == []
    assert all(p is None for p in progress_of(target_conf, m, topic, PARTITIONS).values())


def produce_paced(conf, topic: str, stop: threading.Event, per_tick: int) -> int:
    """1 KB records, ``per_tick`` every 0.1 s over the partitions, until ``stop``; returns how many."""
    p = producer(conf, **{"enable.idempotence": True, "batch.size": 32768})
    sent = 0
    while not stop.is_set():
        for _ in range(per_tick):
            p.produce(topic, key=f"k{sent:07d}".encode(), value=f"{sent}-".encode().ljust(VALUE, b"x"),
                      partition=sent % PARTITIONS)
            sent += 1
        p.poll(0)
        stop.wait(0.1)   # pacing, not a wait for a condition: about 300 KB/s, faster than the cap
    assert p.flush(30) == 0
    return sent


def test_a_capped_follow_run_holds_the_cap_while_the_source_writes_faster_and_hands_over_exactly_once(
        source_conf, target_conf, unique):
    topic = create_topic(source_conf, unique("capfollow"), partitions=PARTITIONS, max_message_bytes="65536")
    m = mirror(unique("m"), [topic], slots=2, max_bytes_per_second=CAP, follow=True, max_transaction_seconds=1,
               follow_max_seconds=60)
    stop = threading.Event()
    production = threading.Thread(target=lambda: sent.append(produce_paced(source_conf, topic, stop, 30)))
    sent: list[int] = []
    production.start()
    try:
        with EndSampler(target_conf, topic, PARTITIONS) as sampler:
            following = run(m, until=in_seconds(0), follow_until=in_seconds(12))
    finally:
        stop.set()
        production.join(60)
    assert following["status"] == "ok" and {s["status"] for s in following["slots"]} == {"follow-bound"}, \
        following["slots"]
    samples = [s for s in sampler.samples if s[1] > 0]
    five = windows(samples, 5.0, KEY + VALUE)
    assert len(five) >= 10, f"too few 5 s windows while following: {samples}"
    worst = max(rate for _, rate in five)
    assert worst <= CAP * 1.10, f"a 5 s window carried {worst:,.0f} bytes/s while following, cap {CAP:,}: {five}"
    behind = sum(len(read_all(source_conf, topic, k)) for k in range(PARTITIONS)) - following["records"]
    assert behind > 0, "the source wrote no faster than the cap: nothing showed the cap holding"

    rest = run(m)   # the next run starts at the committed progress and copies the backlog (at the cap)
    assert rest["status"] == "ok" and following["records"] + rest["records"] == sent[0]
    for k in range(PARTITIONS):
        source, target = values(read_all(source_conf, topic, k)), values(read_all(target_conf, topic, k))
        assert len(target) == len(set(target)) and target == source, f"partition {k}: not exactly once"
