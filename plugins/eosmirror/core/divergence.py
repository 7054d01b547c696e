"""The divergence after a promotion, the pure half: the old source's committed records at or after the
progress recorded at promotion never reached the target (docs/disaster-recovery.md, "The way back").

Per partition of the promotion record: how many (real records read read_committed, not offsets:
transaction markers and aborted records take offsets too), their offset range and first and last
timestamp, and, with ``divergence: copy``, the side topic on the new primary that holds them once.
Kafka cannot cut a log's tail: the records stay in the old source's log, where the report says.
``driver/reverse.py`` reads the records and copies them; this module decides and words.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

from eosmirror.core.errors import ConfigError

MODES = ("report", "copy")


class SideTopicRefusedError(ConfigError):
    """A side topic holds records that are not this mirror's diverged records (exit 2: nothing copied)."""


@dataclass(frozen=True)
class DivergedPartition:
    """One partition's diverged records: committed records of the old source in [start, end)."""

    topic: str
    partition: int
    start: int                      # the progress at promotion: the first source offset not copied
    end: int                        # the old source's last stable offset when the reverse read it
    count: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    first_ms: int | None = None
    last_ms: int | None = None
    side_topic: str | None = None   # where they were copied (``divergence: copy``), else None

    @property
    def label(self) -> str:
        return f"{self.topic}[{self.partition}]"

    def line(self, old_source: str) -> str:
        if self.end < self.start:
            return (f"  {self.label}: the old source's log ends at {self.end}, before the progress {self.start} the "
                    f"target holds: it lost the records at offsets {self.end}..{self.start - 1} that the target has "
                    f"(an unclean leader election or a restore from an older copy); nothing diverged")
        if not self.count:
            return f"  {self.label}: nothing diverged (old source offsets {self.start}..{self.end} hold no committed record)"
        where = (f"; copied once to {self.side_topic}[{self.partition}]" if self.side_topic else
                 "; not copied (divergence: report)")
        return (f"  {self.label}: {self.count} record(s), offsets {self.first_offset}..{self.last_offset}, "
                f"timestamps {_utc(self.first_ms)} .. {_utc(self.last_ms)}; they stay in {old_source} "
                f"{self.label} at those offsets{where}")


def summarize(topic: str, partition: int, start: int, end: int, records: Iterable[tuple[int, int]],
              side_topic: str | None = None) -> DivergedPartition:
    """The summary of ``records`` ((offset, timestamp ms) of each committed record in [start, end), in
    offset order)."""
    offsets, stamps = [], []
    for offset, timestamp in records:
        if not start <= offset < end:
            raise ValueError(f"{topic}[{partition}]: record at {offset} outside [{start}, {end})")
        offsets.append(offset)
        stamps.append(timestamp)
    if not offsets:
        return DivergedPartition(topic, partition, start, end)
    return DivergedPartition(topic, partition, start, end, len(offsets), offsets[0], offsets[-1], min(stamps),
                             max(stamps), side_topic)


def divergence_start(progress: int | None, log_start: int) -> int:
    """Where the diverged records begin: the progress at promotion; a partition never copied (no progress)
    diverged from its log start; a log start past the progress (retention) starts there."""
    return max(progress if progress is not None else 0, log_start)


@dataclass(frozen=True)
class DivergenceReport:
    mirror: str
    mode: str
    old_source: str                 # the old source's label
    partitions: tuple[DivergedPartition, ...] = field(default=())

    @property
    def total(self) -> int:
        return sum(p.count for p in self.partitions)

    def lines(self) -> list[str]:
        out = [p.line(self.old_source) for p in sorted(self.partitions, key=lambda q: (q.topic, q.partition))]
        if not self.total:
            out.append(f"divergence of {self.mirror}: none: every committed record of the old source before the "
                       f"promotion reached the target")
            return out
        tail = ("each copied exactly once to its side topic on the new primary" if self.mode == "copy" else
                "reported only (`--divergence copy` copies them once to side topics on the new primary)")
        out.append(f"divergence of {self.mirror}: {self.total} record(s) committed on the old source never reached "
                   f"the target before the promotion: {tail}. Kafka cannot cut a log's tail: they stay in the old "
                   f"source's log at the offsets above, before what the reverse mirror copies back")
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "old_source": self.old_source, "total": self.total,
                "partitions": [asdict(p) for p in self.partitions]}


def side_topic_state(side_topic: str, partition: int, found: list[bytes | None], expected: list[bytes]) -> bool:
    """Whether partition ``partition`` of the side topic already holds the copy. ``found``: the origin
    header of each committed record there; ``expected``: the origin of each diverged record. True: the
    copy is there (a re-run copies nothing); False: empty, copy now. Anything else is refused: the
    side topic holds other data, and eosmirror never writes next to it."""
    if not found:
        return False
    if found == expected:
        return True
    foreign = sum(1 for f in found if f not in set(expected))
    raise SideTopicRefusedError(
        f"side topic {side_topic}[{partition}] already holds {len(found)} record(s)"
        + (f", {foreign} of them not diverged records of this mirror" if foreign else
           f", but not exactly the {len(expected)} diverged record(s) of this reverse")
        + ": it holds other data, so nothing was copied. Move that data away or delete the topic, then reverse "
          "again (or reverse with `--divergence report`)")


def _utc(ms: int | None) -> str:
    if ms is None:
        return "?"
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
