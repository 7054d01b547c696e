"""A promotion whose source is gone grants what the latest readiness report staged (core/stagedrights.py): a
recent report's grants on the promoted topics, round-tripped through the recorded JSON; none, an old one, or one
that did not read the source's ACLs cannot stand in for the source, each saying why."""

from __future__ import annotations

from eosmirror.core import readiness as r
from eosmirror.core import stagedrights as s
from eosmirror.core.aclcopy import TopicAcl

HOUR_MS = 3_600_000
APP = TopicAcl("orders", "LITERAL", "User:app", "*", "WRITE", "ALLOW")
GONE = TopicAcl("dropped", "LITERAL", "User:app", "*", "WRITE", "ALLOW")


def recorded(time_ms: int, drift: r.Check) -> r.Report:
    """The report as the lag topic holds it (encoded, decoded)."""
    return r.Report.decode(r.Report("m", time_ms, (drift,)).encode())


def test_a_recent_report_stands_in_for_the_source_on_the_promoted_topics_only():
    report = recorded(10 * HOUR_MS, r.drift_check([r.TopicDrift("orders", "orders", 1, 1)], (), [APP, GONE]))
    found = s.staged(report, ["orders"], 12 * HOUR_MS)
    assert not found.why_not and found.acls == (APP,) and found.left_out == (GONE,)
    assert found.age_s == 2 * 3600
    assert "readiness report of 2.0 h ago staged" in found.said() and "1 staged grant(s)" in found.said()
    none_staged = s.staged(recorded(0, r.drift_check([], (), [])), ["orders"], HOUR_MS)
    assert not none_staged.why_not and none_staged.acls == ()      # the source had no other writer then


def test_no_report_an_old_one_or_one_that_did_not_read_the_acls_cannot_stand_in():
    assert "no readiness report was recorded" in s.staged(None, ["orders"], 0).why_not
    old = s.staged(recorded(0, r.drift_check([], (), [APP])), ["orders"], 49 * HOUR_MS)
    assert "49.0 h old, older than the 48 h bound" in old.why_not and old.acls == ()
    assert not s.staged(recorded(0, r.drift_check([], (), [APP])), ["orders"], 47 * HOUR_MS).why_not
    unread = s.staged(recorded(0, r.drift_check([], acl_note="topic ACLs not compared: no authorizer")), ["orders"],
                      HOUR_MS)
    assert "did not read the source's write ACLs (topic ACLs not compared: no authorizer)" in unread.why_not
    failed = s.staged(recorded(0, r.unreadable("drift", "timed out")), ["orders"], HOUR_MS)
    assert "could not be checked: timed out" in failed.why_not
    assert "no drift check" in s.staged(recorded(0, r.Check("lag", r.OK, "")), ["orders"], HOUR_MS).why_not
