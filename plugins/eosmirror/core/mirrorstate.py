"""A mirror's disaster-recovery state, kept in its state topic on the target: the records, as values.

The phases and which command moves between them: ``core/transitions.py`` (one table).

    mirroring --switchover--> switching-over --> switched-over   (planned: zero loss proven)
    switching-over --switchover --cancel--> mirroring            (a stopped switchover given up)
    mirroring --promote-----> promoting ------> promoted        (unplanned: losses reported)
    promoted  --reverse-----> reversing ------> reversed        (the way back: divergence reported, the
                                                                 reverse mirror prepared at the promotion point)
    switched-over --reverse--> reversing ---> reversed        (the way back after a planned switchover)
    reversed  --switchover of <mirror>__reverse (the switch back: its own state goes to switched-over)
    reversed  --resume------> resuming -------> mirroring       (the forward mirror continues after the
                                                                 reverse-copied records; the reverse retired)

The generated reverse mirror has states of its own (in its state topic on the old source):
``not-prepared`` (no record yet: refused), ``mirroring`` since the reverse prepared it, ``switching-over`` /
``switched-over`` (the switch back), ``retired`` by the resume until the next reverse re-prepares it.

The ``-ing`` phases are recorded before the transition fences the mirror's producers (so no run or
slot copies past it) and the final phase when every step held; a transition re-triggered from its
``-ing`` phase continues where it stopped.

Only ``mirroring`` runs or follows. The final state record is written as the LAST step of a
transition, so a transition that failed half-way is simply re-triggered (each step before it is
idempotent) and a final record never describes a half-done transition.

The promotion record keeps, per partition, the target's end, the source progress copied and the
last source end the mirror had observed (with when): what may have been lost is exactly
``observed end - progress`` as of that observation; records written on the source after it are
unknown, and the loss report says so.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, field
from enum import Enum

from eosmirror.core.writerights import RightsChange

STATE_RECORD_KEY = b"mirror-state"
FORMAT_VERSION = 1


class Phase(str, Enum):
    MIRRORING = "mirroring"
    SWITCHING_OVER = "switching-over"   # recorded before the switchover's fence; runs refuse from then on
    SWITCHED_OVER = "switched-over"
    PROMOTING = "promoting"             # recorded before the promotion's fence
    PROMOTED = "promoted"
    REVERSING = "reversing"             # recorded before the divergence is read and the reverse mirror prepared
    REVERSED = "reversed"               # the reverse mirror `<mirror>__reverse` may run
    RESUMING = "resuming"               # recorded before the forward progress moves past the reverse's copies
    RETIRED = "retired"                 # a reverse mirror after the resume: refused until re-prepared
    NOT_PREPARED = "not-prepared"       # a reverse mirror before `eosmirror reverse` prepared it (no record)


@dataclass(frozen=True)
class PartitionPoint:
    """One partition at a switchover or promotion. ``progress``: the next source offset to copy (what
    the target holds ends just before it); ``observed_end``: the source's last stable offset as last
    seen (None: never observed), at ``observed_ms``."""

    source_topic: str
    target_topic: str
    partition: int
    target_end: int
    progress: int | None
    observed_end: int | None = None
    observed_ms: int | None = None
    old_source_end: int | None = None      # set by `reverse`: the old source's last stable offset then; the
                                           # divergence is its committed records in [progress, old_source_end)

    @property
    def label(self) -> str:
        return f"{self.source_topic}[{self.partition}]"

    @property
    def known_missing(self) -> int:
        """Source records known to exist but not copied (0 when not observed past the progress)."""
        if self.observed_end is None:
            return 0
        return max(0, self.observed_end - (self.progress or 0))


@dataclass(frozen=True)
class MirrorState:
    phase: Phase
    since_ms: int
    by: str                                   # who changed it: "cli:<user>" or the Airflow run id
    points: tuple[PartitionPoint, ...] = field(default=())
    note: str = ""
    # The write-ACL changes a switch made (core/writerights.py), kept from record to record until the
    # rights are back where they belong (`resume`): what `reverse` removed is put back from here.
    rights: tuple[RightsChange, ...] = field(default=())

    def encode(self) -> bytes:
        data = asdict(self)
        data["phase"] = self.phase.value
        data["v"] = FORMAT_VERSION
        return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()

    @staticmethod
    def decode(raw: bytes) -> "MirrorState":
        data = json.loads(raw)
        return MirrorState(phase=Phase(data["phase"]), since_ms=int(data["since_ms"]), by=str(data.get("by", "")),
                           points=tuple(PartitionPoint(**p) for p in data.get("points", ())),
                           note=str(data.get("note", "")),
                           rights=tuple(RightsChange.from_dict(r) for r in data.get("rights", ())))

    def describe(self) -> str:
        """``promoted since <UTC> (by <who>)``; a mirror without a record: its phase alone."""
        if not self.since_ms:
            return self.phase.value
        return f"{self.phase.value} since {_utc(self.since_ms)} (by {self.by})"


def _utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass(frozen=True)
class LossReport:
    """Per partition, the source records known to exist but not copied at the promotion."""

    points: tuple[PartitionPoint, ...]
    promoted_ms: int

    @property
    def total(self) -> int:
        return sum(p.known_missing for p in self.points)

    @property
    def unobserved(self) -> list[PartitionPoint]:
        return [p for p in self.points if p.observed_end is None]

    def lines(self) -> list[str]:
        out = []
        for p in sorted(self.points, key=lambda q: (q.source_topic, q.partition)):
            if p.observed_end is None:
                out.append(f"  {p.label}: progress {p.progress}, source end never observed: unknown")
                continue
            age = (self.promoted_ms - (p.observed_ms or self.promoted_ms)) / 1000
            gap = f" (source offsets {p.progress or 0}..{p.observed_end - 1})" if p.known_missing else ""
            out.append(f"  {p.label}: progress {p.progress}, source end {p.observed_end} observed {age:.1f} s before "
                       f"the promotion: up to {p.known_missing} record(s) not copied{gap}")
        oldest = min((p.observed_ms for p in self.points if p.observed_ms is not None), default=None)
        tail = ("records written to the source after each partition's observation are unknown"
                + (f" (the oldest observation is {(self.promoted_ms - oldest) / 1000:.1f} s old)" if oldest else ""))
        out.append(f"up to {self.total} record(s) known to exist on the source were not copied (offsets: "
                   f"transaction markers and aborted records among them take offsets too); {tail}"
                   + (f"; {len(self.unobserved)} partition(s) were never observed" if self.unobserved else ""))
        return out


def reverse_note(before: MirrorState, note: str = "") -> str:
    """The note of a ``reversing`` / ``reversed`` record: when the mirror was promoted (or switched over),
    carried on from the record the reverse started from, so every later step names the same point."""
    head = (f"{before.phase.value} at {_utc(before.since_ms)}"
            if before.phase in (Phase.PROMOTED, Phase.SWITCHED_OVER) else before.note.split(";")[0])
    return f"{head}; {note}" if note else head
