"""The data set: fresh topics per configuration, a fast loader, and clean-up of what a run created.

Every configuration loads its own copy of the data into topics named after the configuration, so
nothing is ever counted twice and MirrorMaker 2 always starts from scratch. The loader is tuned for
speed (big batches, long linger): loading is not measured, only its result is checked.
"""

from __future__ import annotations

import os
import time
from typing import Any

from eosmirror.kafka import calls, clients
from eosmirror_tools.bench.settings import HEADER, KEY_BYTES, PARTITIONS, SizeClass

# The loader's batching: the fastest settings from the earlier probe (about 150k small records/s).
LOADER_SIZING = {"linger.ms": 20, "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
                 "queue.buffering.max.kbytes": 1_048_576}


def create_topics(conf: dict[str, Any], names: list[str], cluster_label: str, partitions: int = PARTITIONS) -> None:
    """Create topics with replication factor 1 (single-node clusters); an existing one is an error:
    a benchmark topic that already exists would be counted twice."""
    from confluent_kafka.admin import NewTopic

    admin = clients.admin_client(conf, "bench-admin")
    new = [NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names]
    for name, future in admin.create_topics(new, request_timeout=30).items():
        calls.wait(future, f"create topic {name}", cluster_label)
    # Metadata reaches every client asynchronously; wait until the topics are visible.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        visible = admin.list_topics(timeout=10).topics
        if all(n in visible and len(visible[n].partitions) == partitions for n in names):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{cluster_label}: topics {names} did not become visible within 30 s")


def _values(size: int) -> tuple[bytes, int]:
    """A random block to slice values from: incompressible, and no per-record allocation of randomness."""
    return os.urandom(size + 4096), 4096


def load(conf: dict[str, Any], topic: str, size: SizeClass, cluster_label: str = "source") -> float:
    """Write ``size.records`` records round-robin over the partitions; return the seconds it took.

    Keys are 16 bytes (the record number), values ``size.value_bytes`` bytes, one header each.
    The source is checked afterwards: its end offsets must sum to exactly the number written.
    """
    producer = clients.idempotent_producer(conf, {}, "bench-loader", extra=LOADER_SIZING)
    block, spread = _values(size.value_bytes)
    width, header = size.value_bytes, [HEADER]
    produce, poll = producer.produce, producer.poll
    started = time.monotonic()
    for i in range(size.records):
        shift = i % spread
        value = block[shift:shift + width]
        key = b"%0*d" % (KEY_BYTES, i)
        while True:
            try:
                produce(topic, value, key, i % PARTITIONS, headers=header)
                break
            except BufferError:
                poll(0.01)   # local queue full: let librdkafka send
    left = producer.flush(300)
    seconds = time.monotonic() - started
    if left:
        raise RuntimeError(f"loading {topic}: {left} records were not acknowledged within 300 s")
    from eosmirror_tools.bench.counting import offset_sum

    written = offset_sum(conf, topic, PARTITIONS, cluster_label, read_committed=False)
    if written != size.records:
        raise RuntimeError(f"loading {topic}: the source holds {written} offsets, expected {size.records}")
    return seconds


def delete_topics(conf: dict[str, Any], names: list[str]) -> list[str]:
    """Delete the named topics that exist (best effort: a clean-up failure never fails the bench)."""
    if not names:
        return []
    admin = clients.admin_client(conf, "bench-cleanup")
    try:
        existing = set(admin.list_topics(timeout=10).topics)
        doomed = [n for n in names if n in existing]
        if doomed:
            for future in admin.delete_topics(doomed, request_timeout=30).values():
                try:
                    future.result(timeout=30)
                except Exception:  # noqa: BLE001 - already gone or not deletable: leave it
                    pass
        return doomed
    except Exception:  # noqa: BLE001
        return []


def topics_containing(conf: dict[str, Any], fragment: str) -> list[str]:
    """Topics whose name contains ``fragment`` (a unique run/alias string: never someone else's topic)."""
    admin = clients.admin_client(conf, "bench-cleanup")
    try:
        return sorted(t for t in admin.list_topics(timeout=10).topics if fragment in t)
    except Exception:  # noqa: BLE001
        return []


def delete_groups(conf: dict[str, Any], groups: list[str]) -> None:
    """Delete consumer groups (best effort; a group that is unknown or still active stays)."""
    if not groups:
        return
    admin = clients.admin_client(conf, "bench-cleanup")
    try:
        for future in admin.delete_consumer_groups(groups, request_timeout=30).values():
            try:
                future.result(timeout=30)
            except Exception:  # noqa: BLE001
                pass
    except Exception:  # noqa: BLE001
        pass
