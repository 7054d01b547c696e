"""The disaster-recovery state machine as ONE table: per phase, the command that enters it and the
phases it may follow (the model is Kafka's ``TransactionState.validPreviousStates``). Pure: no I/O.

    phase            entered by                        follows
    ---------------  --------------------------------  ----------------------------------------------
    mirroring        (a forward mirror's first run)    -
                     switchover --cancel               switching-over
                     resume                            resuming
                     reverse <forward> (prepares it)   not-prepared, retired        (a reverse mirror)
    switching-over   switchover                        mirroring, switching-over
    switched-over    switchover                        switching-over
    promoting        promote                           mirroring, switching-over, promoting
    promoted         promote                           promoting
    reversing        reverse                           promoted, switched-over, reversing
    reversed         reverse                           reversing
    resuming         resume                            reversed, resuming
    retired          resume <forward> (retires it)     switched-over                (a reverse mirror)
    not-prepared     (a reverse mirror's first state)  -

A command that follows its own ``-ing`` phase continues where it stopped; one whose final phase is
reached already is done (its re-trigger writes nothing). No phase is a dead end: every phase but
``mirroring`` names the command that leaves it (``next_step``). ``run`` copies only in ``mirroring``.
Every refusal names the state, since when, by whom, what the command follows and the next command.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from eosmirror.core import naming
from eosmirror.core.errors import ConfigError
from eosmirror.core.mirrorstate import MirrorState, Phase


class StateRefusedError(ConfigError):
    """The command does not fit the mirror's state (exit 2: nothing was written, nothing to retry)."""


class Command(str, Enum):
    RUN = "run"
    SWITCHOVER = "switchover"
    CANCEL = "switchover --cancel"
    PROMOTE = "promote"
    REVERSE = "reverse"
    RESUME = "resume"
    PREPARE = "reverse (prepares the reverse mirror)"
    RETIRE = "resume (retires the reverse mirror)"


@dataclass(frozen=True)
class Entry:
    phase: Phase
    command: Command
    follows: frozenset[Phase]


def _entry(phase: Phase, command: Command, *follows: Phase) -> Entry:
    return Entry(phase, command, frozenset(follows))


TABLE: tuple[Entry, ...] = (
    _entry(Phase.MIRRORING, Command.CANCEL, Phase.SWITCHING_OVER),
    _entry(Phase.MIRRORING, Command.RESUME, Phase.RESUMING),
    _entry(Phase.MIRRORING, Command.PREPARE, Phase.NOT_PREPARED, Phase.RETIRED),
    _entry(Phase.SWITCHING_OVER, Command.SWITCHOVER, Phase.MIRRORING, Phase.SWITCHING_OVER),
    _entry(Phase.SWITCHED_OVER, Command.SWITCHOVER, Phase.SWITCHING_OVER),
    _entry(Phase.PROMOTING, Command.PROMOTE, Phase.MIRRORING, Phase.SWITCHING_OVER, Phase.PROMOTING),
    _entry(Phase.PROMOTED, Command.PROMOTE, Phase.PROMOTING),
    _entry(Phase.REVERSING, Command.REVERSE, Phase.PROMOTED, Phase.SWITCHED_OVER, Phase.REVERSING),
    _entry(Phase.REVERSED, Command.REVERSE, Phase.REVERSING),
    _entry(Phase.RESUMING, Command.RESUME, Phase.REVERSED, Phase.RESUMING),
    _entry(Phase.RETIRED, Command.RETIRE, Phase.SWITCHED_OVER),
)

# The phases a command moves through: (its -ing phase or None, its final phase).
COURSE: dict[Command, tuple[Phase | None, Phase]] = {
    Command.SWITCHOVER: (Phase.SWITCHING_OVER, Phase.SWITCHED_OVER),
    Command.CANCEL: (None, Phase.MIRRORING),
    Command.PROMOTE: (Phase.PROMOTING, Phase.PROMOTED),
    Command.REVERSE: (Phase.REVERSING, Phase.REVERSED),
    Command.RESUME: (Phase.RESUMING, Phase.MIRRORING),
    Command.PREPARE: (None, Phase.MIRRORING),
    Command.RETIRE: (None, Phase.RETIRED),
}
# A completed command re-triggered: done, writes nothing (cancel and resume end in `mirroring`, which
# other commands start from, so theirs is refused: "nothing to cancel", "nothing to resume").
DONE_AGAIN = {Command.SWITCHOVER: Phase.SWITCHED_OVER, Command.REVERSE: Phase.REVERSED}
# Commands only a forward mirror takes, and only a generated reverse mirror takes.
FORWARD_ONLY = {Command.PROMOTE, Command.REVERSE, Command.RESUME}
REVERSE_ONLY = {Command.PREPARE, Command.RETIRE}


class Mode(str, Enum):
    BEGIN = "begin"          # record the -ing phase, then run the steps
    CONTINUE = "continue"    # the -ing phase is recorded: run the steps again (each is idempotent)
    DONE = "done"            # completed before: nothing to write


def follows(command: Command) -> frozenset[Phase]:
    """The phases ``command`` may start from (its own -ing phase included: it continues)."""
    ing, final = COURSE[command]
    first = ing or final
    return frozenset().union(*(e.follows for e in TABLE if e.phase == first and e.command == command))


def initial_state(mirror: str) -> MirrorState:
    """The state of a mirror without a state record: a forward mirror mirrors from its first run; a
    generated reverse mirror is not prepared until `eosmirror reverse` of its forward mirror."""
    if naming.forward_mirror_name(mirror):
        return MirrorState(Phase.NOT_PREPARED, 0, "nobody yet")
    return MirrorState(Phase.MIRRORING, 0, "its first run")


def start(command: Command, state: MirrorState, mirror: str) -> Mode:
    """How ``command`` starts from ``state`` (the table), or a refusal naming the state, since when,
    by whom, what the command follows and the next command (exit 2, nothing written)."""
    reverse_mirror = bool(naming.forward_mirror_name(mirror))
    if reverse_mirror and command in FORWARD_ONLY:
        raise StateRefusedError(f"mirror {mirror!r} is {state.describe()}, the reverse mirror of "
                                f"{naming.forward_mirror_name(mirror)!r}: `eosmirror {command.value}` applies to the "
                                f"forward mirror only. "
                                f"Next: {next_step(state, mirror)}")
    if not reverse_mirror and command in REVERSE_ONLY:
        raise StateRefusedError(f"mirror {mirror!r} is {state.describe()} and no reverse mirror: `{command.value}` "
                                f"applies to <mirror>__reverse only. Next: {next_step(state, mirror)}")
    ing, final = COURSE[command]
    if DONE_AGAIN.get(command) is state.phase:
        return Mode.DONE
    if state.phase not in follows(command):
        raise StateRefusedError(refusal(command, state, mirror))
    return Mode.CONTINUE if ing is not None and state.phase is ing else Mode.BEGIN


def may_copy(state: MirrorState, final_of_switchover: bool = False) -> bool:
    """A run or follow run copies only while ``mirroring``: after a switchover or a promotion the target
    takes the producers, and copying into it would interleave two writers; a reverse mirror copies only
    once `eosmirror reverse` prepared it (its progress starts at the promotion point). The one exception:
    the switchover's own final run copies while ``switching-over`` (recorded before it, so that no other
    run starts meanwhile, and a stopped switchover can run it again)."""
    return state.phase is Phase.MIRRORING or (final_of_switchover and state.phase is Phase.SWITCHING_OVER)


def check_may_copy(state: MirrorState, mirror: str, final_of_switchover: bool = False) -> None:
    """``may_copy``, or a refusal naming the state and the next command."""
    if not may_copy(state, final_of_switchover):
        raise StateRefusedError(f"mirror {mirror!r} is {state.describe()}: it copies only while mirroring, so this "
                                f"run is refused. Next: {next_step(state, mirror)}")


def refusal(command: Command, state: MirrorState, mirror: str) -> str:
    """Why ``command`` does not fit ``state``: the state, since when, by whom, what it follows, what next."""
    shown = ", ".join(sorted(p.value for p in follows(command)))
    already = "already " if state.phase in DONE_AGAIN.values() or state.phase is Phase.PROMOTED else ""
    why = _WHY.get((command, state.phase), "")
    return (f"mirror {mirror!r} is {already}{state.describe()}: `eosmirror {command.value}` follows only {shown}"
            f"{f' ({why})' if why else ''}, so it is refused and nothing was written. Next: {next_step(state, mirror)}")


_WHY = {
    (Command.PROMOTE, Phase.PROMOTED): "promoting again would overwrite the record of what may be lost",
    (Command.PROMOTE, Phase.SWITCHED_OVER): "a switchover proved zero loss; the target takes the producers already",
    (Command.RESUME, Phase.MIRRORING): "it copies already: there is nothing to resume",
    (Command.CANCEL, Phase.MIRRORING): "no switchover is under way: there is nothing to cancel",
    (Command.CANCEL, Phase.PROMOTED): "a promotion is final: the way back is `reverse`",
    (Command.CANCEL, Phase.PROMOTING): "a promotion under way is finished, not cancelled",
    (Command.SWITCHOVER, Phase.NOT_PREPARED): "it has copied nothing since a promotion, so there is nothing to "
                                               "switch back",
    (Command.SWITCHOVER, Phase.RETIRED): "it has copied nothing since it was retired, so there is nothing to "
                                          "switch back",
}


def resume_refusal(forward: MirrorState, back: MirrorState, mirror: str) -> str | None:
    """`resume` also needs the reverse mirror switched back (or its own ``resuming`` recorded): else the
    new primary may still receive records the old source lacks. None when it may resume."""
    if forward.phase is Phase.RESUMING or back.phase is Phase.SWITCHED_OVER:
        return None
    reverse = naming.reverse_mirror_name(mirror)
    return (f"mirror {mirror!r} is {forward.describe()} but its reverse mirror {reverse!r} is {back.describe()}: it "
            f"has not been switched back, so the new primary may still receive records the old source lacks, and "
            f"this resume is refused; nothing was written. Next: stop the new primary's producers, then "
            f"`eosmirror switchover {reverse}`, then `eosmirror resume {mirror}`")


def next_step(state: MirrorState, mirror: str) -> str:
    """What the operator does next from ``state`` (every refusal ends with it; `eosmirror status`)."""
    forward = naming.forward_mirror_name(mirror)
    back = naming.reverse_mirror_name(mirror) if not forward else mirror
    phase = state.phase
    if phase is Phase.NOT_PREPARED:
        return (f"it copies only once `eosmirror reverse {forward}` prepared it (after `eosmirror promote "
                f"{forward}` or `eosmirror switchover {forward}`)")
    if phase is Phase.RETIRED:
        return (f"the resume of {forward} retired it; after a later promotion or switchover, `eosmirror reverse "
                f"{forward}` prepares it again at that point")
    if phase is Phase.SWITCHING_OVER:
        return (f"continue the switchover: `eosmirror switchover {mirror}` (it runs the final run again), or "
                f"cancel it: `eosmirror switchover {mirror} --cancel` (back to mirroring), or `eosmirror promote "
                f"{mirror}` if the source is lost meanwhile")
    if phase is Phase.SWITCHED_OVER and forward:
        return (f"switched back: the producers now write to the old source again; `eosmirror resume {forward}` "
                f"continues the forward mirror after the records this one copied")
    if phase is Phase.SWITCHED_OVER:
        return (f"the producers now write to the target; to go back later: `eosmirror reverse {mirror}` prepares "
                f"the reverse mirror {naming.reverse_mirror_name(mirror)} from the switchover point")
    if phase is Phase.PROMOTING:
        return f"finish the promotion: `eosmirror promote {mirror}` again (it continues where it stopped)"
    if phase is Phase.PROMOTED:
        return (f"the target now takes the producers; when the old source answers again, `eosmirror reverse "
                f"{mirror}` reports the divergence and prepares the reverse mirror {back}")
    if phase is Phase.REVERSING:
        return f"finish the reverse: `eosmirror reverse {mirror}` again (it continues where it stopped)"
    if phase is Phase.REVERSED:
        return (f"the reverse mirror copies the new primary back: `eosmirror run {back}` (DAG 'eosmirror__{back}'); "
                f"to go back, stop the new primary's producers and switch back with `eosmirror switchover {back}`, "
                f"then `eosmirror resume {mirror}`")
    if phase is Phase.RESUMING:
        return f"finish the resume: `eosmirror resume {mirror}` again (it continues where it stopped)"
    if forward:
        return (f"it copies the new primary back: `eosmirror run {mirror}`; to go back, stop the new primary's "
                f"producers, then `eosmirror switchover {mirror}` (the switch back), then `eosmirror resume {forward}`")
    return f"`eosmirror switchover {mirror}` (planned) or `eosmirror promote {mirror}` (the source is lost)"
