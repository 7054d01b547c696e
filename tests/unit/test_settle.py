"""The settle wait's decision (core/settle.py, issue #44): markers being written -> wait; a
transaction really open -> refuse; the mirror's transaction timeout -> refuse. No network."""

from __future__ import annotations

from eosmirror.core import settle
from eosmirror.core.settle import Look


def test_nothing_pending_is_settled():
    assert settle.decide([Look(0.0, 0)], 15, 60) == settle.SETTLED
    assert settle.decide([Look(0.0, 4_469), Look(40.0, 0)], 15, 60) == settle.SETTLED


def test_a_shrinking_set_waits_beyond_the_old_settle_window():
    """The issue's run: 4,469 partitions pending, falling to 0 over 32 s. At 33.9 s the old code
    refused (15 s without an answer); the set kept shrinking, so the wait goes on."""
    looks = [Look(0.0, 4_469), Look(6.0, 4_100), Look(12.0, 3_750), Look(20.0, 2_500), Look(30.0, 1_250)]
    assert settle.decide(looks, 15, 60) == settle.WAIT
    assert settle.decide(looks + [Look(32.0, 0)], 15, 60) == settle.SETTLED


def test_a_set_that_stops_shrinking_for_the_window_is_stuck():
    looks = [Look(0.0, 4_469), Look(5.0, 1_250), Look(12.0, 1_250)]
    assert settle.decide(looks, 15, 60) == settle.WAIT          # 7 s without progress: not yet
    assert settle.decide(looks + [Look(20.0, 1_250)], 15, 60) == settle.STUCK
    assert settle.decide([Look(0.0, 3), Look(15.0, 3)], 15, 60) == settle.STUCK   # never shrank at all


def test_a_count_that_rises_and_falls_back_is_no_progress():
    """A new transaction adds partitions, its commit takes them away again: only a new minimum counts."""
    looks = [Look(0.0, 10), Look(2.0, 10), Look(4.0, 20), Look(8.0, 12), Look(16.0, 11)]
    assert settle.last_progress(looks) == 0.0
    assert settle.decide(looks, 15, 60) == settle.STUCK


def test_the_transaction_timeout_bounds_even_a_steady_trickle():
    looks = [Look(float(t), 10_000 - t) for t in range(0, 61, 5)]
    assert settle.decide(looks[:-1], 15, 60) == settle.WAIT
    assert settle.decide(looks, 15, 60) == settle.BOUND


def test_wait_loops_until_decided_and_reports_progress_lines():
    """The loop with a fake clock: each probe takes 3 s; pending 3 -> 2 -> 1 -> 0."""
    now = {"t": 0.0}
    counts = iter([3, 2, 1, 0])
    said: list[str] = []

    def probe(round_seconds: float) -> int:
        assert 0.5 <= round_seconds <= 3.0
        now["t"] += 3.0
        return next(counts)

    outcome = settle.wait(probe, 2.0, 60.0, on_wait=settle.reporter(said.append, "progress", every=5.0),
                          clock=lambda: now["t"], sleep=lambda s: now.__setitem__("t", now["t"] + s))
    assert outcome.verdict == settle.SETTLED and [look.pending for look in outcome.looks] == [3, 2, 1, 0]
    assert said == ["progress of 1 partitions still settling (was 3 6 s ago): the last run's commit markers "
                    "are being written"]
    assert "settled after" in outcome.explain()


def test_wait_gives_up_on_a_stuck_set_and_explains_it():
    now = {"t": 0.0}

    def probe(round_seconds: float) -> int:
        now["t"] += 1.0
        return 7

    outcome = settle.wait(probe, 4.0, 60.0, clock=lambda: now["t"], sleep=lambda s: None)
    assert outcome.verdict == settle.STUCK and outcome.looks[-1].at - outcome.looks[0].at >= 4.0
    assert outcome.explain() == "7 still pending after 4 s (was 7), and none settled in the last 4 s"
    bound = settle.Outcome(settle.BOUND, [Look(0.0, 9), Look(60.0, 2)], 15.0, 60.0)
    assert "transaction timeout (60 s)" in bound.explain()


def test_transactions_describe_table_is_parsed():
    from eosmirror.kafka import transactions

    out = ("CoordinatorId\tTransactionalId\tProducerId\tProducerEpoch\tTransactionState\tTransactionTimeoutMs\t"
           "CurrentTransactionStartTimeMs\tTransactionDurationMs\tTopicPartitions\n"
           "1\teos.m.0\t1000\t3\tOngoing\t60000\t1764290000000\t41234\tt-0,__consumer_offsets-7\n")
    row = transactions.parse(out)
    assert row["TransactionalId"] == "eos.m.0" and row["TransactionState"] == "Ongoing"
    assert transactions.summary(row) == "Ongoing, open for 41 s, producer 1000 epoch 3"
    assert transactions.summary({**row, "TransactionState": "Empty"}) == "Empty, producer 1000 epoch 3"
    assert transactions.parse("Error: something") == {}


def test_messages_count_partitions_where_the_decision_counts_signs_of_progress():
    """The progress read counts a partition twice while both its data marker and its progress are
    pending (finer progress); the messages say partitions."""
    now = {"t": 0.0}
    answers = iter([(8, 4), (6, 4), (4, 2), (0, 0)])

    def probe(round_seconds: float) -> tuple[int, int]:
        now["t"] += 3.0
        return next(answers)

    said: list[str] = []
    outcome = settle.wait(probe, 4.0, 60.0, on_wait=settle.reporter(said.append, "progress", every=5.0),
                          clock=lambda: now["t"], sleep=lambda s: None)
    assert outcome.verdict == settle.SETTLED and [look.pending for look in outcome.looks] == [8, 6, 4, 0]
    assert said == ["progress of 2 partitions still settling (was 4 6 s ago): the last run's commit markers "
                    "are being written"]
    assert outcome.explain() == "settled after 9.0 s (was 4 pending)"
