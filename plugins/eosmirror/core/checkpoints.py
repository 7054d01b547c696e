"""MirrorMaker 2 checkpoint records, byte for byte, so MM2 tooling reads what a group sync wrote.

MM2's ``org.apache.kafka.connect.mirror.Checkpoint`` (connect-mirror-client) serialises with Kafka's
protocol types (big-endian; STRING = int16 length + UTF-8 bytes):

    key   = group: STRING, topic: STRING, partition: INT32
    value = version: INT16 (0), upstreamOffset: INT64, offset: INT64, metadata: STRING

The key's topic is the DOWNSTREAM topic (the name on the cluster holding the checkpoints, which is
where the group resumes: MM2 renames it with the replication policy), ``offset`` the downstream
offset and ``upstreamOffset`` the offset the group had committed upstream. The topic is
``<upstream cluster alias>.checkpoints.internal`` on the downstream cluster, which is where
``RemoteClusterUtils.translateOffsets(props, alias, group, timeout)`` reads it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

VERSION = 0
TOPIC_SUFFIX = ".checkpoints.internal"


def checkpoints_topic(upstream_alias: str) -> str:
    return f"{upstream_alias}{TOPIC_SUFFIX}"


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise ValueError(f"a Kafka protocol STRING holds at most 32767 bytes, got {len(raw)}")
    return struct.pack(">h", len(raw)) + raw


def _read_string(raw: bytes, at: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">h", raw, at)
    start = at + 2
    return raw[start:start + length].decode("utf-8"), start + length


@dataclass(frozen=True)
class Checkpoint:
    group: str
    topic: str            # downstream topic
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def key(self) -> bytes:
        return _string(self.group) + _string(self.topic) + struct.pack(">i", self.partition)

    def value(self) -> bytes:
        return (struct.pack(">hqq", VERSION, self.upstream_offset, self.downstream_offset)
                + _string(self.metadata))

    @staticmethod
    def decode(key: bytes, value: bytes) -> "Checkpoint":
        group, at = _read_string(key, 0)
        topic, at = _read_string(key, at)
        (partition,) = struct.unpack_from(">i", key, at)
        version, upstream, downstream = struct.unpack_from(">hqq", value, 0)
        if version != VERSION:
            raise ValueError(f"unsupported checkpoint version {version}")
        metadata, _ = _read_string(value, 18)
        return Checkpoint(group, topic, partition, upstream, downstream, metadata)
