"""Budgets of waits on a cluster a round trip away, stated in round trips (pure: no I/O).

A disaster command's fixed budget (``--source-seconds``, the group sync's bound) is a floor; once the
source's round trip is measured (``kafka/roundtrip.py``), each wait gets at least the round trips its
requests need, so a long link (or a low ``--source-seconds``) never turns a source that answers into one
declared gone. Request counts are what librdkafka does for a client that is new to the cluster:

  ASK        a fresh client's first answer: TCP connect, ApiVersions, SASL handshake and authenticate,
             metadata, the request itself, and one retry of it (librdkafka retries a request whose
             leader or coordinator was not known yet)
  GROUP      one group's committed offsets on one side: FindCoordinator, connect to the coordinator,
             ApiVersions, SASL (2), OffsetFetch
"""

from __future__ import annotations

import math

ASK = 8
GROUP = 6
# How much longer than its request count a wait may take before it is called stuck: a busy broker, a
# congested link, a retry's back-off.
SLACK = 3


def stretched(seconds: float, rtt_s: float | None, round_trips: int) -> float:
    """``seconds``, or ``round_trips`` measured round trips (times SLACK) when that is longer."""
    if rtt_s is None or rtt_s <= 0:
        return seconds
    return max(seconds, SLACK * round_trips * rtt_s)


def source_ends_round_trips() -> int:
    """Reading the source's stable ends: a fresh admin client's answer, then ListOffsets per leader (in parallel)."""
    return ASK + 1


def group_sync_round_trips(groups: int, parallel: int) -> int:
    """A group sync of ``groups`` groups read ``parallel`` at a time, on both sides, after listing them."""
    return 2 * ASK + 2 * GROUP * math.ceil(max(groups, 1) / max(parallel, 1))
