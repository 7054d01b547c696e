"""offsets.list_offsets asks again for partitions whose leader is moving, and only for those."""

import concurrent.futures

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import OffsetSpec

from eosmirror.core.errors import EosMirrorError
from eosmirror.kafka import offsets


def _done(answer):
    """A resolved future: an offset, or ``Err(code)`` raised as the KafkaException librdkafka raises."""
    future = concurrent.futures.Future()
    if isinstance(answer, Err):
        future.set_exception(KafkaException(KafkaError(answer.code)))
    else:
        future.set_result(type("Info", (), {"offset": answer})())
    return future


class Err:
    def __init__(self, code):
        self.code = code


class ScriptedAdmin:
    """Answers list_offsets from a script: per call, {partition: offset or error code}."""

    def __init__(self, *answers):
        self.answers, self.asked = list(answers), []

    def list_offsets(self, request, isolation_level, request_timeout):
        self.asked.append(sorted(tp.partition for tp in request))
        answer = self.answers.pop(0)
        return {tp: _done(answer[tp.partition]) for tp in request}


def test_a_moving_leader_is_asked_again_for_that_partition_only():
    admin = ScriptedAdmin({0: 5, 1: Err(KafkaError.UNKNOWN_LEADER_EPOCH)}, {1: 9})
    specs = {("t", 0): OffsetSpec.latest(), ("t", 1): OffsetSpec.latest()}
    assert offsets.list_offsets(admin, specs, "source") == {("t", 0): 5, ("t", 1): 9}
    assert admin.asked == [[0, 1], [1]]


def test_other_errors_fail_at_once_naming_the_partition():
    admin = ScriptedAdmin({0: Err(KafkaError.TOPIC_AUTHORIZATION_FAILED)})
    with pytest.raises(EosMirrorError, match=r"t\[0\]"):
        offsets.list_offsets(admin, {("t", 0): OffsetSpec.latest()}, "source")
    assert admin.asked == [[0]]


def test_a_cluster_is_asked_through_its_own_admin_client_and_named_by_its_label():
    from eosmirror.kafka.cluster import Cluster

    source = Cluster.from_settings("source", {"bootstrap.servers": "b:9092", "sasl.password": "SECRET"},
                                   "source cluster (b:9092)")
    source._admin = ScriptedAdmin({0: 7}, {0: Err(KafkaError.TOPIC_AUTHORIZATION_FAILED)})
    assert offsets.list_offsets_of(source, {("t", 0): OffsetSpec.latest()}) == {("t", 0): 7}
    with pytest.raises(EosMirrorError, match=r"^source cluster \(b:9092\): not authorized") as failed:
        offsets.list_offsets_of(source, {("t", 0): OffsetSpec.latest()}, read_committed=False)
    assert "SECRET" not in str(failed.value) and "SECRET" not in repr(source)
