"""A slot's fence (slotio.KafkaSlotIO.fence) against a real broker: an older instance of the
transactional id with a transaction open (a follow run handing over, a killed attempt) is fenced
and its open records aborted; the slot's producer - a new one when the first try timed out, which
it does while the broker aborts the older instance's transaction - then commits. What a
read_committed consumer sees is the evidence."""

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from eosmirror.slot import slotio
from eosmirror.slot.slotio import KafkaSlotIO
from eosmirror.slot.slotstate import PartitionTask, SlotTask
from tests.helpers import create_topic

pytestmark = pytest.mark.integration


def slot_task(target_conf: dict, topic: str, txn_id: str) -> SlotTask:
    partition = PartitionTask(topic, topic, 0, start=0, end=0, had_progress=False, max_message_bytes=1048588)
    return SlotTask(mirror="fence", slot=0, transactional_id=txn_id, generation=1, delivery="exactly_once",
                    progress_group=f"{txn_id}-group", partitions=(partition,), source_conf=dict(target_conf),
                    target_conf=dict(target_conf))


def read_committed(target_conf: dict, topic: str) -> list[bytes]:
    consumer = Consumer({**target_conf, "group.id": f"{topic}-check", "isolation.level": "read_committed",
                         "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        for _ in range(200):   # 200 x 0.1 s: well below the test timeout
            m = consumer.poll(0.1)
            if m is None:
                continue
            if m.error():   # the end of the partition (read_committed: its last stable offset)
                return values
            values.append(m.value())
        raise AssertionError(f"no end of {topic}[0] within 20 s; read so far: {values}")
    finally:
        consumer.close()


@pytest.mark.parametrize("open_transaction, quick_seconds", [(True, slotio.QUICK_FENCE_SECONDS),
                                                              (False, slotio.QUICK_FENCE_SECONDS), (True, 0.001)])
def test_the_fence_aborts_an_older_instance_and_the_slot_commits(target_conf, unique, open_transaction,
                                                                 quick_seconds):
    """quick_seconds 0.001: every quick try times out before the broker answers (a busy or distant
    cluster); the same producer is asked on until CONCURRENT_TRANSACTIONS comes, then replaced."""
    topic = create_topic(target_conf, unique("fence"))
    txn_id = unique("txn")
    zombie = Producer({**target_conf, "transactional.id": txn_id})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie", partition=0)
    zombie.flush(30)
    if not open_transaction:
        zombie.commit_transaction(30)
    io = KafkaSlotIO(slot_task(target_conf, topic, txn_id))
    io.open(lambda err, msg: None)
    try:
        io.fence(quick_seconds)
        io.producer.begin_transaction()
        io.producer.produce(topic, b"slot", partition=0)
        io.producer.commit_transaction(30)
    finally:
        io.close()
    if open_transaction:
        with pytest.raises(KafkaException) as fenced:
            zombie.commit_transaction(10)
        assert fenced.value.args[0].fatal() or "fenced" in str(fenced.value).lower()
    expected = [b"slot"] if open_transaction else [b"zombie", b"slot"]
    assert read_committed(target_conf, topic) == expected
