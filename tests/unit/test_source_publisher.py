"""Step 5's publisher (kafka/progress.py SourcePublisher): built once, it answers each publish within its
bound and never raises. The consumer is scripted here; the commit reaching a real source group is
tests/integration/test_mirror_safety.py::test_progress_is_published_to_the_source_group, a refused group
tests/integration/test_security.py::test_source_group_read_is_optional_and_its_absence_is_reported."""

from __future__ import annotations

import pytest

from eosmirror.kafka import clients, progress


class _Error:
    def __init__(self, name: str, text: str):
        self._name, self._text = name, text

    def name(self):
        return self._name

    def str(self):
        return self._text


class _Event:
    def __init__(self, error):
        self._error = error

    def error(self):
        return self._error


class ScriptedConsumer:
    """Answers a commit on the next poll with ``answer``: None (committed), an _Error (the commit's
    error), "refused" (an authorization event instead of the callback), or "silent" (never)."""

    def __init__(self, on_commit, answer):
        self.on_commit, self.answer = on_commit, answer
        self.commits: list[list] = []
        self.polls = 0
        self.closed = False

    def commit(self, offsets, asynchronous):
        assert asynchronous
        self.commits.append(offsets)

    def poll(self, timeout):
        self.polls += 1
        if self.answer == "silent" or not self.commits:
            return None
        if self.answer == "refused":
            return _Event(_Error("GROUP_AUTHORIZATION_FAILED", "Broker: Group authorization failed"))
        self.on_commit(self.answer, [])
        return None

    def close(self):
        self.closed = True


@pytest.fixture
def publisher(monkeypatch):
    def build(answer):
        made = {}

        def reader(settings, group, client_id, stable=True, on_commit=None):
            made["consumer"] = ScriptedConsumer(on_commit, answer)
            assert group == "g" and not stable and client_id == "eosmirror-progress-publisher-g"
            return made["consumer"]

        monkeypatch.setattr(clients, "progress_reader", reader)
        return progress.SourcePublisher({"bootstrap.servers": "x:1"}, "g"), made["consumer"]
    return build


def test_a_committed_publish_answers_none_and_commits_exactly_the_offsets(publisher):
    pub, consumer = publisher(None)
    assert pub.publish({("t", 0): 7, ("t", 1): 9}) is None
    assert sorted((tp.topic, tp.partition, tp.offset) for tp in consumer.commits[0]) == [("t", 0, 7), ("t", 1, 9)]


def test_the_publisher_serves_each_publish_with_the_same_consumer_and_closes_it_once_asked(publisher):
    pub, consumer = publisher(None)
    assert pub.publish({("t", 0): 1}) is None
    assert pub.publish({("t", 0): 2}) is None
    assert len(consumer.commits) == 2 and not consumer.closed
    pub.close()
    assert consumer.closed


def test_a_commit_error_and_a_refused_group_are_answered_as_text(publisher):
    pub, _ = publisher(_Error("UNKNOWN_TOPIC_OR_PART", "Broker: Unknown topic or partition"))
    assert pub.publish({("t", 0): 1}) == "Broker: Unknown topic or partition"
    refused, _ = publisher("refused")
    assert refused.publish({("t", 0): 1}).startswith("GROUP_AUTHORIZATION_FAILED")


def test_no_answer_within_the_bound_says_so_and_nothing_to_publish_asks_nothing(publisher):
    pub, consumer = publisher("silent")
    assert pub.publish({("t", 0): 1}, timeout=0.2) == "no answer from the source group coordinator within 0.2 s"
    assert consumer.polls >= 2
    idle, idle_consumer = publisher(None)
    assert idle.publish({}) is None and idle_consumer.commits == []


def test_a_failed_close_is_logged_not_raised(publisher, caplog):
    pub, consumer = publisher(None)

    def broken():
        raise RuntimeError("handle already destroyed")

    consumer.close = broken
    pub.close()
    assert "closing the source progress publisher failed" in caplog.text and "handle already destroyed" in caplog.text
