"""Helpers shared by integration and e2e tests: topics, producers, reading back, mirror definitions."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from eosmirror import config, readers


def create_topic(conf: dict[str, Any], name: str, partitions: int = 1, **topic_config: str) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(conf)
    admin.create_topics([NewTopic(name, partitions, 1, config={k.replace("_", "."): v for k, v in topic_config.items()})]
                        )[name].result(30)
    return name


def producer(conf: dict[str, Any], **extra: Any):
    from confluent_kafka import Producer

    return Producer({**conf, "linger.ms": 2, **extra})


def read_all(conf: dict[str, Any], topic: str, partition: int = 0, read_committed: bool = True) -> list[readers.Record]:
    return readers.read_all(conf, topic, partition, "test", read_committed=read_committed)


def mirror(name: str, topics: list[str], **fields: Any) -> config.MirrorConfig:
    """A mirror of exactly the given source topics on the local clusters."""
    raw = {"name": name, "source": {"local": "source"}, "target": {"local": "target"},
           "topics": [re.escape(t) for t in topics], "slots": 2, "max_transaction_seconds": 10, **fields}
    return config.parse({"mirrors": [raw]}, Path("test.yaml")).mirrors[0]


def mirrors_file(path: Path, mirrors: list[dict[str, Any]]) -> Path:
    import yaml

    path.write_text(yaml.safe_dump({"mirrors": mirrors}, sort_keys=False))
    return path
