"""Client errors become messages that name the cluster, what was tried and what to do."""

import concurrent.futures

from eosmirror.core.errors import ClusterUnreachableError
from eosmirror.kafka import calls


def test_a_call_that_timed_out_says_so_instead_of_an_empty_reason():
    error = calls.translate(concurrent.futures.TimeoutError(), "list offsets of t[1]", "target cluster (b:9092)")
    assert isinstance(error, ClusterUnreachableError)
    assert str(error).startswith("target cluster (b:9092): no answer while trying to list offsets of t[1] "
                                 "(timeout: no reply within the time allowed). Check that the cluster is up")


def test_a_future_that_never_completes_is_translated_by_wait():
    never = concurrent.futures.Future()
    try:
        calls.wait(never, "describe topics", "source cluster", timeout=0.05)
    except ClusterUnreachableError as exc:
        assert "describe topics (timeout: no reply within the time allowed)" in str(exc)
    else:
        raise AssertionError("wait() returned for a future that never completed")
