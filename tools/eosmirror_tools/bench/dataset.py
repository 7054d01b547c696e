"""The bench's data: every configuration loads its own copy into topics named after it (kit.topics),
so nothing is ever counted twice and MirrorMaker 2 always starts from scratch. Loading uses the kit's
bulk loader at the bench's record shape; it is not measured, only its result is checked."""

from __future__ import annotations

from typing import Any

from eosmirror_tools.bench.settings import HEADER, KEY_BYTES, PARTITIONS, SizeClass
from eosmirror_tools.kit import workload


def load(conf: dict[str, Any], topic: str, size: SizeClass, cluster_label: str = "source") -> float:
    """``size.records`` records of ``size.value_bytes`` round-robin over the bench's partitions, keys of
    ``KEY_BYTES`` digits, the one bench header each; returns the seconds it took."""
    return workload.bulk_load(conf, topic, size.records, size.value_bytes, PARTITIONS, KEY_BYTES, [HEADER],
                              cluster_label)
