"""The soak sampler's bookkeeping (tools/eosmirror_tools/soak/sampler.py): time lag, duplicates,
losses and aborted records from what the two read_committed consumers saw, in either order."""

from eosmirror_tools.kit.sampler import LagTracker, percentile, record_id


def test_time_lag_is_the_age_of_the_oldest_source_record_not_yet_copied():
    t = LagTracker()
    for seq, ts in enumerate((1000, 2000, 3000)):
        t.source(0, f"0-{seq}".encode(), ts)
    t.source(1, b"1-0", 2500)
    assert t.time_lag_s(4000) == 3.0
    t.target(0, b"0-0")
    assert t.time_lag_s(4000) == 2.0            # 0-1 (ts 2000) is now the oldest missing
    t.target(0, b"0-1"), t.target(0, b"0-2")
    assert t.time_lag_s(4000) == 1.5            # partition 1's record
    t.target(1, b"1-0")
    assert t.time_lag_s(4000) == 0.0 and (t.duplicates, t.losses(), t.aborted()) == (0, 0, 0)


def test_duplicates_losses_and_aborted_records_are_counted():
    t = LagTracker()
    t.source(0, b"0-0", 1), t.source(0, b"0-1", 2), t.source(0, b"0-2", 3)
    t.target(0, b"0-0"), t.target(0, b"0-0")    # copied twice
    t.target(0, b"0-9")                         # never committed on the source: aborted data
    assert (t.duplicates, t.losses(), t.aborted()) == (1, 2, 1)


def test_a_copy_read_before_its_source_record_is_matched_later():
    t = LagTracker()
    t.target(0, b"0-0")
    t.source(0, b"0-0", 5)
    assert (t.losses(), t.aborted(), t.time_lag_s(10)) == (0, 0, 0.0)


def test_ids_and_percentiles():
    assert record_id(b"3-17 xxxxx") == b"3-17" and record_id(None) == b""
    assert percentile([float(n) for n in range(1, 101)], 99) == 99.0 and percentile([], 50) == 0.0


def test_a_skipped_record_is_lost_and_a_copy_of_an_aborted_record_is_aborted_data():
    t = LagTracker()
    for seq in range(4):
        t.source(0, f"0-{seq}".encode(), seq)
    t.target(0, b"0-0"), t.target(0, b"0-2")    # 0-1 skipped
    t.target(0, b"a0-7")                        # a record of an aborted transaction
    t.target(0, b"0-1")                         # the skipped one, late: below what was copied
    assert (t.out_of_order, t.losses(), t.aborted(), t.duplicates) == (1, 2, 1, 1)   # 0-1 skipped, 0-3 pending
    t.target(0, b"0-3")
    assert t.time_lag_s(10) == 0.0 and t.losses() == 1


def test_memory_is_bounded_by_what_is_pending():
    t = LagTracker()
    for seq in range(10_000):
        t.source(0, f"0-{seq}".encode(), seq)
        t.target(0, f"0-{seq}".encode())
    assert (sum(len(q) for q in t.pending.values()), t.losses(), t.duplicates, t.records) == (0, 0, 0, 10_000)
