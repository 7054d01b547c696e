"""Raw copy loop: the ceiling of confluent-kafka on this machine for a consume -> produce copy.

One process, one thread: a read_committed source consumer (``clients.source_consumer``) and an
idempotent producer (``clients.idempotent_producer``) with the same batching as eosmirror's slots.
Every record keeps its partition, key, value, headers and timestamp, as in a mirror. No
transactions, no progress, no offset syncs, no size checks: what is left is the client library's
per-record cost, which bounds any Python mirror on one core.

It runs as its own process (``python -m eosmirror_tools.bench.rawloop``) so that its memory is measured
alone and the bench's own threads do not compete for its GIL.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError

from eosmirror.kafka import clients

if TYPE_CHECKING:
    from eosmirror_tools.kit.processes import ChildRun

PARTITION_EOF = KafkaError._PARTITION_EOF   # an end-of-partition event, not an error
CONSUME_BATCH = 5000
# The sizing eosmirror's slot producer uses (copy.py), so the comparison is about the loop only.
PRODUCER_SIZING = {"linger.ms": 20, "batch.size": 1_000_000, "queue.buffering.max.messages": 500_000}


def copy(source_conf: dict[str, Any], target_conf: dict[str, Any], topic: str, partitions: int,
         ends: dict[int, int]) -> dict[str, Any]:
    """Copy offsets [0, ends[p]) of every partition of ``topic`` to the same topic on the target."""
    from confluent_kafka import TopicPartition

    consumer = clients.source_consumer(source_conf, {}, f"bench-raw-{uuid.uuid4().hex[:8]}", "bench-raw-consumer")
    producer = clients.idempotent_producer(target_conf, {}, "bench-raw-producer", extra=PRODUCER_SIZING)
    produce, poll = producer.produce, producer.poll
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    reached = {p: 0 for p in range(partitions)}
    undone = {p for p in range(partitions) if ends.get(p, 0) > 0}
    records = 0
    started = time.monotonic()
    while undone:
        for m in consumer.consume(CONSUME_BATCH, 0.2):
            err = m.error()
            if err is not None:
                if err.code() == PARTITION_EOF:
                    reached[m.partition()] = max(reached[m.partition()], m.offset())
                    continue
                if err.fatal() or err.name() in ("_AUTO_OFFSET_RESET", "OFFSET_OUT_OF_RANGE"):
                    raise RuntimeError(f"source {topic}[{m.partition()}]: {err.name()}: {err.str()}")
                continue   # transient: librdkafka reconnects and retries by itself
            while True:
                try:
                    produce(topic, m.value(), m.key(), m.partition(), timestamp=m.timestamp()[1],
                            headers=m.headers())
                    break
                except BufferError:
                    poll(0.05)
            records += 1
            reached[m.partition()] = m.offset() + 1
        poll(0)
        undone = {p for p in undone if reached[p] < ends[p]}
    left = producer.flush(300)
    seconds = time.monotonic() - started
    consumer.close()
    if left:
        raise RuntimeError(f"{left} records were not acknowledged within 300 s")
    return {"records": records, "seconds": round(seconds, 3),
            "records_per_second": round(records / seconds, 1) if seconds else 0.0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eosmirror_tools.bench.rawloop")
    parser.add_argument("--source", required=True, help="source bootstrap servers")
    parser.add_argument("--target", required=True, help="target bootstrap servers")
    parser.add_argument("--topic", required=True, help="source topic; the target topic has the same name")
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--ends", required=True, help="JSON list: end offset of each partition")
    parser.add_argument("--result-json", required=True)
    args = parser.parse_args(argv)
    ends = dict(enumerate(json.loads(args.ends)))
    result = copy({"bootstrap.servers": args.source}, {"bootstrap.servers": args.target}, args.topic,
                  args.partitions, ends)
    Path(args.result_json).write_text(json.dumps(result))
    return 0


def command(source: str, target: str, topic: str, partitions: int, ends: dict[int, int],
            result_json: Path) -> list[str]:
    return [sys.executable, "-m", "eosmirror_tools.bench.rawloop", "--source", source, "--target", target,
            "--topic", topic, "--partitions", str(partitions),
            "--ends", json.dumps([ends[p] for p in range(partitions)]), "--result-json", str(result_json)]


def run(source: str, target: str, topic: str, partitions: int, ends: dict[int, int], work: Path,
        timeout: float) -> ChildRun:
    from eosmirror_tools.kit import measured
    from eosmirror_tools.kit.processes import ChildRun

    result_json = work / f"{topic}.raw.json"
    with measured.child(command(source, target, topic, partitions, ends, result_json),
                      work / "logs" / f"{topic}.raw.log") as child:
        code = child.wait(timeout)
    result = json.loads(result_json.read_text()) if result_json.exists() else {}
    return ChildRun(exit_code=code, result=result, wall_seconds=child.seconds, peak=child.peak, cpu=child.cpu())


if __name__ == "__main__":
    sys.exit(main())
