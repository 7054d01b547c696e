"""A mirror's disaster-recovery state, kept in its state topic on the target, decided by pure functions.

    mirroring --switchover--> switching-over --> switched-over   (planned: zero loss proven)
    mirroring --promote-----> promoting ------> promoted        (unplanned: losses reported)
    promoted  --reverse-----> reversing ------> reversed        (the way back: divergence reported, the
                                                                 reverse mirror prepared at the promotion point)
    reversed  --switchover of <mirror>__reverse (the switch back: its own state goes to switched-over)
    reversed  --resume------> resuming -------> mirroring       (the forward mirror continues after the
                                                                 reverse-copied records; the reverse retired)

The generated reverse mirror has states of its own (in its state topic on the old source): none
(not prepared: refused), ``mirroring`` since the reverse prepared it, ``switching-over`` /
``switched-over`` (the switch back), ``retired`` by the resume until the next reverse re-prepares it.

The ``-ing`` phases are recorded before the transition fences the mirror's producers (so no run or
slot copies past it) and the final phase when every step held; a transition re-triggered from its
``-ing`` phase continues where it stopped.

Only ``mirroring`` runs or follows. Every refusal names the state, since when, by whom, and the
command that changes it. The state record is written once per transition, as the LAST step of the
transition, so a transition that failed half-way is simply re-triggered (each step before it is
idempotent) and a state record never describes a half-done transition.

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

from eosmirror.core import naming
from eosmirror.core.errors import ConfigError

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


class StateRefusedError(ConfigError):
    """The command does not fit the mirror's state (exit 2: nothing was written, nothing to retry)."""


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
                           note=str(data.get("note", "")))

    def describe(self) -> str:
        return f"{self.phase.value} since {_utc(self.since_ms)} (by {self.by})"


MIRRORING = MirrorState(Phase.MIRRORING, 0, "its first run")   # a mirror with no state record


def _utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _next_step(state: MirrorState, mirror: str) -> str:
    if state.phase is Phase.PROMOTING:
        return f"finish the promotion: `eosmirror promote {mirror}` again (it continues where it stopped)"
    if state.phase is Phase.SWITCHING_OVER:
        return (f"finish the switchover: `eosmirror switchover {mirror}` again (it continues where it stopped), "
                f"or `eosmirror promote {mirror}` if the source is lost meanwhile")
    if state.phase is Phase.PROMOTED:
        return (f"the target now takes the producers; when the old source answers again, `eosmirror reverse "
                f"{mirror}` reports the divergence and prepares the reverse mirror {naming.reverse_mirror_name(mirror)}")
    if state.phase is Phase.REVERSING:
        return f"finish the reverse: `eosmirror reverse {mirror}` again (it continues where it stopped)"
    if state.phase is Phase.REVERSED:
        back = naming.reverse_mirror_name(mirror)
        return (f"the reverse mirror copies the new primary back: `eosmirror run {back}` (DAG 'eosmirror__{back}'); "
                f"to go back, stop the new primary's producers and switch back with `eosmirror switchover {back}`, "
                f"then `eosmirror resume {mirror}`")
    if state.phase is Phase.RESUMING:
        return f"finish the resume: `eosmirror resume {mirror}` again (it continues where it stopped)"
    if state.phase is Phase.RETIRED:
        forward = naming.forward_mirror_name(mirror) or mirror
        return (f"the resume of {forward} retired it; after a later promotion, `eosmirror reverse {forward}` "
                f"prepares it again at the new promotion point")
    if state.phase is Phase.SWITCHED_OVER and naming.forward_mirror_name(mirror):
        forward = naming.forward_mirror_name(mirror)
        return (f"switched back: the producers now write to the old source again; `eosmirror resume {forward}` "
                f"continues the forward mirror after the records this one copied")
    if state.phase is Phase.SWITCHED_OVER:
        return f"the producers now write to the target; `eosmirror promote {mirror}` is not needed after a switchover"
    return f"`eosmirror switchover {mirror}` (planned) or `eosmirror promote {mirror}` (the source is lost)"


def check_may_copy(state: MirrorState, mirror: str) -> None:
    """A run or a follow run copies only while the mirror is ``mirroring``: after a switchover or a
    promotion the target takes the producers, and copying into it would interleave two writers. A
    generated reverse mirror copies only once `eosmirror reverse` prepared it: its progress starts at
    the promotion point, and the reverse's last step writes its first state record."""
    forward = naming.forward_mirror_name(mirror)
    if forward and state.phase is Phase.MIRRORING and not state.since_ms:
        raise StateRefusedError(f"mirror {mirror!r} is the reverse of {forward!r} and has not been prepared: it "
                                f"copies only after `eosmirror reverse {forward}` set its start at the promotion "
                                f"point (so nothing that came from the old source goes back), so this run is "
                                f"refused. Next: `eosmirror promote {forward}` if not done, then `eosmirror "
                                f"reverse {forward}` once the old source answers")
    if state.phase is not Phase.MIRRORING:
        raise StateRefusedError(f"mirror {mirror!r} is {state.describe()}: it does not copy any more, so this run "
                                f"is refused. Next: {_next_step(state, mirror)}")


def check_may_switch_over(state: MirrorState, mirror: str) -> bool:
    """True when the switchover must run; False when it already completed (idempotent re-trigger)."""
    if state.phase is Phase.SWITCHED_OVER:
        return False
    forward = naming.forward_mirror_name(mirror)
    if forward and (state.phase is Phase.RETIRED or (state.phase is Phase.MIRRORING and not state.since_ms)):
        raise StateRefusedError(f"mirror {mirror!r} is the reverse of {forward!r} and is "
                                f"{state.describe() if state.since_ms else 'not prepared'}: it has copied nothing "
                                f"since a promotion, so there is nothing to switch back. Next: "
                                + (_next_step(state, mirror) if state.since_ms else
                                   f"`eosmirror promote {forward}` if not done, then `eosmirror reverse {forward}`"))
    if state.phase is Phase.RESUMING:
        raise StateRefusedError(f"mirror {mirror!r} is {state.describe()}: it cannot be switched over before the "
                                f"resume ends. Next: {_next_step(state, mirror)}")
    if state.phase in (Phase.PROMOTING, Phase.PROMOTED, Phase.REVERSING, Phase.REVERSED):
        raise StateRefusedError(f"mirror {mirror!r} is {state.describe()}: a promoted mirror cannot be switched "
                                f"over. Next: {_next_step(state, mirror)}")
    return True


def check_may_promote(state: MirrorState, mirror: str) -> None:
    """Promotes from ``mirroring``, from an unfinished promotion, and from a switchover that did not
    finish (the source was lost during it). A finished promotion or switchover is refused."""
    if state.phase not in (Phase.MIRRORING, Phase.PROMOTING, Phase.SWITCHING_OVER) or (
            naming.forward_mirror_name(mirror) and state.phase is Phase.MIRRORING and not state.since_ms):
        raise StateRefusedError(f"mirror {mirror!r} is already {state.describe()}: promoting it again would "
                                f"overwrite the record of what may be lost. Next: {_next_step(state, mirror)}")


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


def check_may_reverse(state: MirrorState, mirror: str) -> bool:
    """True when the reverse must run (from ``promoted``, or continuing an unfinished ``reversing``);
    False when it completed (a re-trigger reports again and writes nothing). Refused otherwise: the
    way back starts from a promotion record, which only a promotion writes."""
    if state.phase is Phase.REVERSED:
        return False
    if state.phase not in (Phase.PROMOTED, Phase.REVERSING):
        raise StateRefusedError(f"mirror {mirror!r} is {state.describe() if state.since_ms else 'mirroring'}: "
                                f"only a promoted mirror can be reversed (the reverse starts from the promotion "
                                f"record). Next: {_next_step(state, mirror)}")
    return True


def promoted_state(points: list[PartitionPoint], now_ms: int, by: str, note: str = "") -> MirrorState:
    return MirrorState(Phase.PROMOTED, now_ms, by, tuple(sorted(points, key=lambda p: (p.target_topic, p.partition))),
                       note)


def reverse_state(phase: Phase, promoted: MirrorState, now_ms: int, by: str, points: tuple[PartitionPoint, ...],
                  note: str = "") -> MirrorState:
    """``reversing`` or ``reversed``: the promotion record's points carried on (with the old source's
    ends once read) and when it was promoted, so every later step starts from the same record."""
    head = f"promoted at {_utc(promoted.since_ms)}" if promoted.phase is Phase.PROMOTED else promoted.note.split(";")[0]
    return MirrorState(phase, now_ms, by, points, f"{head}; {note}" if note else head)


def check_may_resume(forward: MirrorState, back: MirrorState, mirror: str) -> bool:
    """True when the resume must run: the mirror is ``reversed`` and its reverse mirror switched back
    (``switched-over``), or an unfinished ``resuming`` continues. Refused otherwise (exit 2, nothing
    written), naming the state and the next command: the forward mirror may continue only after the
    reverse mirror copied everything the new primary received and stopped (the switch back), or
    records would be in neither place, or go round in a cycle."""
    if forward.phase is Phase.RESUMING:
        return True
    reverse = naming.reverse_mirror_name(mirror)
    if forward.phase is Phase.REVERSED and back.phase is Phase.SWITCHED_OVER:
        return True
    if forward.phase is Phase.REVERSED:
        shown = back.describe() if back.since_ms else "not prepared"
        raise StateRefusedError(f"mirror {mirror!r} is {forward.describe()} but its reverse mirror {reverse!r} is "
                                f"{shown}: it has not been switched back, so the new primary may still receive "
                                f"records the old source lacks, and this resume is refused. Next: stop the new "
                                f"primary's producers, then `eosmirror switchover {reverse}`, then `eosmirror "
                                f"resume {mirror}`")
    if forward.phase is Phase.MIRRORING:
        raise StateRefusedError(f"mirror {mirror!r} is {forward.describe() if forward.since_ms else 'mirroring'}: "
                                f"it copies already, there is nothing to resume. Resume follows a promotion, "
                                f"`eosmirror reverse {mirror}` and the switch back `eosmirror switchover {reverse}`")
    raise StateRefusedError(f"mirror {mirror!r} is {forward.describe()}: only a reversed mirror whose reverse mirror "
                            f"was switched back can be resumed. Next: {_next_step(forward, mirror)}")


def resuming_state(now_ms: int, by: str, points: tuple[PartitionPoint, ...], note: str) -> MirrorState:
    """``resuming``, with per partition where the forward mirror continues: ``progress`` the old source
    offset right after the reverse mirror's last copy, ``target_end`` the new primary's end at the switch
    back (its records below it went back to the old source and never come forward again)."""
    return MirrorState(Phase.RESUMING, now_ms, by, tuple(sorted(points, key=lambda p: (p.target_topic, p.partition))),
                       note)


def next_step(state: MirrorState, mirror: str) -> str:
    """What the operator does next from this state (the text every refusal ends with); `eosmirror status`."""
    if state.phase is Phase.MIRRORING and not state.since_ms and naming.forward_mirror_name(mirror):
        return f"it copies only once `eosmirror reverse {naming.forward_mirror_name(mirror)}` prepared it"
    return _next_step(state, mirror)
