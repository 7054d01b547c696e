"""Reading consumer groups' offsets in a child process: the answer's shape, and a crashed child."""

from __future__ import annotations

import signal
import sys

import pytest

from eosmirror.core.errors import AuthorizationError, EosMirrorError, ProgressUnavailableError
from eosmirror.driver.lag import held_offsets
from eosmirror.kafka import groupoffsets
from eosmirror.kafka.groupoffsets import Answers, one_answer


def test_a_stable_answer_keeps_committed_partitions_only():
    offsets, error = one_answer([("orders", 0, 5, ""), ("orders", 1, -1, ""), ("pay", 3, 0, "")])
    assert (offsets, error) == ({("orders", 0): 5, ("pay", 3): 0}, "")


def test_one_unstable_partition_makes_the_whole_group_ask_again():
    """A pending transactional commit: the group is never taken half-written."""
    assert one_answer([("orders", 0, 5, ""), ("orders", 1, -1001, "UNSTABLE_OFFSET_COMMIT")]) == \
        (None, "UNSTABLE_OFFSET_COMMIT")
    assert "UNSTABLE_OFFSET_COMMIT" in groupoffsets.RETRIED


def test_a_group_without_offsets_is_an_empty_answer():
    assert one_answer([]) == ({}, "")


def test_answers_round_trip_through_the_childs_output():
    answers = Answers(offsets={"a": {("orders", 0): 5, ("orders", 7): 9}, "b": {}},
                      pending={"c": "UNSTABLE_OFFSET_COMMIT"}, failed={"d": "GROUP_AUTHORIZATION_FAILED: no"})
    assert Answers.decode(answers.encode()) == answers


def test_a_crashed_child_is_no_answer_and_never_takes_the_caller_down(monkeypatch, caplog):
    """librdkafka 2.16's admin OffsetFetch dies of SIGSEGV on NOT_COORDINATOR: only the child may."""
    monkeypatch.setattr(groupoffsets, "child_command", lambda: [
        sys.executable, "-c", f"import os; os.kill(os.getpid(), {int(signal.SIGSEGV)})"])
    assert groupoffsets.read_all({"bootstrap.servers": "127.0.0.1:1"}, ["a"], timeout=5) is None
    assert f"signal {int(signal.SIGSEGV)}" in caplog.text


def test_a_child_that_outlives_its_bound_leaves_every_group_pending(monkeypatch):
    monkeypatch.setattr(groupoffsets, "child_command", lambda: [sys.executable, "-c", "import time; time.sleep(30)"])
    monkeypatch.setattr(groupoffsets, "CHILD_START_SECONDS", 0.5)
    answers = groupoffsets.read_all({"bootstrap.servers": "127.0.0.1:1"}, ["a", "b"], timeout=0.5)
    assert answers == Answers(pending={"a": "_TIMED_OUT", "b": "_TIMED_OUT"})


def test_settings_that_cannot_cross_to_the_child_are_no_answer():
    assert groupoffsets.read_all({"oauth_cb": print}, ["a"], timeout=5) is None
    assert groupoffsets.read_all({}, []) == Answers()


def test_the_child_never_gets_the_settings_on_its_command_line(monkeypatch):
    seen = {}

    def fake_run(command, **kwargs):
        seen["command"], seen["input"] = command, kwargs["input"]
        raise OSError("not started")

    monkeypatch.setattr(groupoffsets.subprocess, "run", fake_run)
    assert groupoffsets.read_all({"sasl.password": "s3cret"}, ["a"], timeout=5) is None
    assert "s3cret" not in " ".join(seen["command"]) and "s3cret" in seen["input"]


def test_held_offsets_refuse_a_group_still_pending_or_refused():
    assert held_offsets(None, "target") is None
    assert held_offsets(Answers(offsets={"a": {("t", 0): 1}}), "target") == {"a": {("t", 0): 1}}
    with pytest.raises(ProgressUnavailableError, match="group b .*UNSTABLE_OFFSET_COMMIT"):
        held_offsets(Answers(offsets={"a": {}}, pending={"b": "UNSTABLE_OFFSET_COMMIT"}), "target")
    with pytest.raises(AuthorizationError, match="Describe on group c"):
        held_offsets(Answers(failed={"c": "GROUP_AUTHORIZATION_FAILED: denied"}), "target")
    with pytest.raises(EosMirrorError, match="group d could not be read"):
        held_offsets(Answers(failed={"d": "INVALID_GROUP_ID: bad"}), "target")
