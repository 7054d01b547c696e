"""The disaster-recovery transition table (core/transitions.py), the one runner (driver/transition.py) and
the commands' one declaration (core/commands.py), without brokers."""

import itertools

import pytest

from eosmirror.core import commands, transitions
from eosmirror.core.errors import EXIT_CONFIG, EXIT_STEP_NOT_RUN, EosMirrorError
from eosmirror.core.mirrorstate import MirrorState, Phase
from eosmirror.core.transitions import Command, Mode, StateRefusedError
from eosmirror.driver.transition import FAILED, RAN, SKIPPED, Transition

FORWARD, BACK = "dr", "dr__reverse"
USER_COMMANDS = (Command.SWITCHOVER, Command.CANCEL, Command.PROMOTE, Command.REVERSE, Command.RESUME)
# What an operator may do from each phase of a forward mirror: (command, how it starts). Everything else
# is refused. Written out by hand, so that a change of the table is a change of this test too.
FORWARD_MOVES = {
    Phase.MIRRORING: {Command.SWITCHOVER: Mode.BEGIN, Command.PROMOTE: Mode.BEGIN},
    Phase.SWITCHING_OVER: {Command.SWITCHOVER: Mode.CONTINUE, Command.CANCEL: Mode.BEGIN,
                           Command.PROMOTE: Mode.BEGIN},
    Phase.SWITCHED_OVER: {Command.SWITCHOVER: Mode.DONE, Command.REVERSE: Mode.BEGIN},
    Phase.PROMOTING: {Command.PROMOTE: Mode.CONTINUE},
    Phase.PROMOTED: {Command.REVERSE: Mode.BEGIN},
    Phase.REVERSING: {Command.REVERSE: Mode.CONTINUE},
    Phase.REVERSED: {Command.REVERSE: Mode.DONE, Command.RESUME: Mode.BEGIN},
    Phase.RESUMING: {Command.RESUME: Mode.CONTINUE},
}
BACK_MOVES = {   # the generated reverse mirror: prepared by `reverse`, switched back, retired by `resume`
    Phase.NOT_PREPARED: {Command.PREPARE: Mode.BEGIN},
    Phase.MIRRORING: {Command.SWITCHOVER: Mode.BEGIN},
    Phase.SWITCHING_OVER: {Command.SWITCHOVER: Mode.CONTINUE, Command.CANCEL: Mode.BEGIN},
    Phase.SWITCHED_OVER: {Command.SWITCHOVER: Mode.DONE, Command.RETIRE: Mode.BEGIN},
    Phase.RETIRED: {Command.PREPARE: Mode.BEGIN},
}


@pytest.mark.parametrize("mirror,moves", [(FORWARD, FORWARD_MOVES), (BACK, BACK_MOVES)])
def test_every_phase_and_command_starts_as_the_table_says_or_is_refused_naming_state_who_and_next(mirror, moves):
    state_of = {phase: MirrorState(phase, 1_700_000_000_000, "cli:ops") for phase in Phase}
    for phase, command in itertools.product(Phase, Command):
        if command is Command.RUN:
            continue
        expected = moves.get(phase, {}).get(command)
        if expected is not None:
            assert transitions.start(command, state_of[phase], mirror) is expected, (phase, command)
            continue
        with pytest.raises(StateRefusedError) as refused:
            transitions.start(command, state_of[phase], mirror)
        text = str(refused.value)
        assert refused.value.exit_code == EXIT_CONFIG
        assert phase.value in text and "2023-11-14 22:13:20 UTC" in text and "cli:ops" in text, text
        assert "Next: " in text and "`eosmirror " in text.split("Next: ", 1)[1], text


def test_no_phase_is_a_dead_end():
    """Every phase a command ends in (and every -ing phase) is left by some command of the table."""
    reached = {e.phase for e in transitions.TABLE}
    left = set().union(*(transitions.follows(c) for c in transitions.COURSE))
    assert reached - {Phase.MIRRORING} <= left, reached - left
    for phase in reached | {Phase.NOT_PREPARED}:
        assert "`eosmirror " in transitions.next_step(MirrorState(phase, 1, "x"), FORWARD if phase not in (
            Phase.NOT_PREPARED, Phase.RETIRED) else BACK), phase


def test_only_mirroring_copies_and_the_final_run_of_a_switchover_copies_while_switching_over():
    for phase in Phase:
        state = MirrorState(phase, 1, "x")
        assert transitions.may_copy(state) is (phase is Phase.MIRRORING)
        assert transitions.may_copy(state, final_of_switchover=True) is (phase in (Phase.MIRRORING,
                                                                                   Phase.SWITCHING_OVER))
    with pytest.raises(StateRefusedError, match="not-prepared.*`eosmirror reverse dr`"):
        transitions.check_may_copy(transitions.initial_state(BACK), BACK)
    transitions.check_may_copy(transitions.initial_state(FORWARD), FORWARD)


def test_a_stopped_switchover_names_both_ways_out_and_a_switched_over_mirror_its_way_back():
    stopped = transitions.next_step(MirrorState(Phase.SWITCHING_OVER, 1, "x"), FORWARD)
    assert "`eosmirror switchover dr`" in stopped and "`eosmirror switchover dr --cancel`" in stopped
    assert "`eosmirror reverse dr`" in transitions.next_step(MirrorState(Phase.SWITCHED_OVER, 1, "x"), FORWARD)
    assert "`eosmirror resume dr`" in transitions.next_step(MirrorState(Phase.SWITCHED_OVER, 1, "x"), BACK)


def test_resume_also_needs_the_reverse_mirror_switched_back():
    reversed_ = MirrorState(Phase.REVERSED, 10, "cli:ops")
    assert transitions.resume_refusal(reversed_, MirrorState(Phase.SWITCHED_OVER, 20, "cli:ops"), FORWARD) is None
    assert transitions.resume_refusal(MirrorState(Phase.RESUMING, 30, "x"), MirrorState(Phase.RETIRED, 31, "x"),
                                      FORWARD) is None
    text = transitions.resume_refusal(reversed_, MirrorState(Phase.MIRRORING, 15, "cli:ops"), FORWARD)
    assert text and "has not been switched back" in text and "`eosmirror switchover dr__reverse`" in text


def test_the_runner_lists_every_step_and_an_optional_step_that_failed_sets_the_exit_code():
    said = []
    ticks = iter(range(100))
    run = Transition(Command.PROMOTE, FORWARD, said.append, started=0.0, clock=lambda: float(next(ticks)))
    assert run.check(MirrorState(Phase.MIRRORING, 1, "x")) is Mode.BEGIN
    assert run.step("fence", lambda: 42) == 42
    run.skip("nothing", "not configured")

    def gone():
        raise EosMirrorError("the source does not answer")
    assert run.step("final group sync", gone, optional="the promotion goes on") is None
    with pytest.raises(EosMirrorError, match="broken"):
        run.step("record promoted", lambda: (_ for _ in ()).throw(EosMirrorError("broken")))
    assert [(s.name, s.status) for s in run.steps] == [("fence", RAN), ("nothing", SKIPPED),
                                                        ("final group sync", FAILED), ("record promoted", FAILED)]
    assert "the source does not answer" in run.steps[2].why and "the promotion goes on" in run.steps[2].why
    assert run.exit_code(0) == EXIT_STEP_NOT_RUN and run.exit_code(5) == 5
    assert any("DID NOT RUN" in line for line in said)
    assert run.elapsed() > 0


def test_each_command_is_declared_once_and_a_value_out_of_range_names_the_option():
    assert commands.RESUME.values({}, FORWARD)["check_seconds"] == 3.0
    assert commands.SWITCHOVER.values({"wait_seconds": "60", "cancel": "true"}, FORWARD) == {
        "wait_seconds": 60.0, "quiet_seconds": 10.0, "cancel": True}
    for spec, name, bad in ((commands.RESUME, "check_seconds", 601), (commands.REVERSE, "settle_seconds", 0),
                            (commands.PROMOTE, "source_seconds", -1), (commands.SWITCHOVER, "quiet_seconds", 99_999)):
        with pytest.raises(commands.ConfigError, match=f"--{name.replace('_', '-')}.*{name}.*out of range"):
            spec.values({name: bad}, FORWARD)
    with pytest.raises(commands.ConfigError, match="'mirror' is not one of report, copy"):
        commands.REVERSE.values({"divergence": "mirror"}, FORWARD)
