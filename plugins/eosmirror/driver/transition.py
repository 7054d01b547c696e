"""The one runner every disaster-recovery command uses (switchover, its cancel, promote, reverse, resume).

1. Check the table (``core/transitions.py``): refuse (exit 2, nothing written), begin, continue an
   unfinished ``-ing`` phase, or report a transition done before; then the brokers' minimums of the
   clusters the command touches (``driver/minimums.py``: refuse, exit 2, nothing written).
2. Record the ``-ing`` phase (when beginning): from then on no run copies (the state refuses it).
   ``record`` is the one place a transition's own state record is built (since now, by whom, its
   points in partition order, a note) and written.
3. Run the command's steps, each idempotent and timed, each listed in the outcome as ran, skipped
   (why) or failed (why). A step meant to run either runs or fails the command (its exception goes
   on); only a step optional by design may fail without failing the command, and then the outcome
   and its exit code say it did not run.
4. Record the final phase.

Fault injection for tests (inert unless set): ``EOSMIRROR_TRANSITION_FAULT=<command>:<step>[:<mirror>]``
fails the command (of that mirror only, when named) right after that step ran, as a crash there would,
leaving the recorded phase as it is.

The recovery time is measured from the command's start (``started``, taken where the command was
given: the CLI's process start, the Airflow task's start), every step included.
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, TypeVar

from eosmirror.core import transitions
from eosmirror.core.errors import EXIT_STEP_NOT_RUN, EosMirrorError
from eosmirror.core.mirrorstate import MirrorState, PartitionPoint, Phase
from eosmirror.core.transitions import Command, Mode
from eosmirror.core.writerights import RightsChange
from eosmirror.driver import minimums
from eosmirror.kafka import calls
from eosmirror.kafka.cluster import Cluster

log = logging.getLogger(__name__)
T = TypeVar("T")

RAN, SKIPPED, FAILED = "ran", "skipped", "failed"
FAULT_ENV = "EOSMIRROR_TRANSITION_FAULT"


@dataclass(frozen=True)
class StepResult:
    name: str
    status: str                # ran | skipped | failed
    seconds: float
    why: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "seconds": self.seconds, "why": self.why}

    def line(self) -> str:
        return f"{self.name}: {self.status}" + (f" ({self.why})" if self.why else "") + f", {self.seconds:.2f} s"


class StepTimeoutError(EosMirrorError):
    """An optional step outlasted its budget (its thread is abandoned, not joined)."""


@dataclass
class Transition:
    """One command's run through the table: its mode, its steps, its clock."""

    command: Command
    mirror: str
    say: Callable[[str], None] = log.info
    by: str = ""                          # who: "cli:<user>" or the Airflow run
    record_to: Callable[[MirrorState], None] | None = None    # writes the mirror's state record
    started: float | None = None          # the command's start (monotonic); None: now
    clock: Callable[[], float] = time.monotonic
    steps: list[StepResult] = field(default_factory=list)
    mode: Mode | None = None
    clusters: tuple[Cluster, ...] = ()   # the clusters the command touches: their brokers' minimums (driver/minimums)

    def __post_init__(self) -> None:
        if self.started is None:
            self.started = self.clock()

    def check(self, current: MirrorState) -> Mode:
        """Step 1: the table's verdict for this command from ``current``, then (unless it is done already)
        the brokers of the clusters it touches are new enough (driver/minimums). Refusals raise; nothing
        is written before."""
        self.mode = transitions.start(self.command, current, self.mirror)
        if self.mode is not Mode.DONE:
            minimums.require(self.command.value, self.clusters)
        if self.mode is Mode.CONTINUE:
            self.say(f"{self._what}: continues the unfinished {current.describe()}")
        elif self.mode is Mode.DONE:
            self.say(f"{self._what}: done already ({current.describe()}); nothing is written again")
        return self.mode

    def step(self, name: str, fn: Callable[[], T], optional: str | None = None) -> T | None:
        """Run ``fn`` as the step ``name``. ``optional``: why the command may go on without it (the
        step is then optional by design: its failure is listed and the command goes on); None: the
        step must run, and its failure fails the command."""
        began = self.clock()
        self.say(f"{self._what}: {name} ...")
        try:
            value = fn()
        except Exception as exc:  # noqa: BLE001 - re-raised unless the step is optional by design
            why = calls.error_text(exc)
            self._add(name, FAILED, began, why if optional is None else f"{why}; {optional}")
            if optional is None:
                raise
            self.say(f"{self._what}: {name} DID NOT RUN: {why}; {optional}")
            return None
        self._add(name, RAN, began)
        if self._fault_after(name):
            raise EosMirrorError(f"{self._what}: injected fault after the step {name!r} ({FAULT_ENV})")
        return value

    def record(self, phase: Phase, points: Iterable[PartitionPoint] = (), note: str = "",
               rights: Iterable[RightsChange] = ()) -> MirrorState:
        """Record ``phase`` as the step ``record <phase>``: the state since now, by whom, its points in
        partition order, a note and the write-ACL changes the switch made and has not undone yet
        (``core/writerights.py``). Returns the record written."""
        if self.record_to is None:
            raise EosMirrorError(f"{self._what}: no state writer to record {phase.value} with")
        write = self.record_to
        written = MirrorState(phase, int(time.time() * 1000), self.by,
                              tuple(sorted(points, key=lambda p: (p.target_topic, p.partition))), note, tuple(rights))
        self.step(f"record {phase.value}", lambda: write(written))
        return written

    def _fault_after(self, step: str) -> bool:
        """``EOSMIRROR_TRANSITION_FAULT`` names this command's ``step`` (and this mirror, or none)."""
        command, _, rest = (os.environ.get(FAULT_ENV) or "").partition(":")
        name, _, mirror = rest.partition(":")
        return command == self.command.value.split()[0] and name == step and mirror in ("", self.mirror)

    def skip(self, name: str, why: str) -> None:
        self.steps.append(StepResult(name, SKIPPED, 0.0, why))
        self.say(f"{self._what}: {name}: skipped ({why})")

    def elapsed(self) -> float:
        """Seconds since the command started (the recovery time once the final phase is recorded)."""
        return round(self.clock() - (self.started or 0.0), 2)

    @property
    def not_run(self) -> list[StepResult]:
        """The optional steps that failed: the outcome's exit code says they did not run."""
        return [s for s in self.steps if s.status == FAILED]

    def exit_code(self, otherwise: int) -> int:
        """``otherwise`` (the command's own verdict) unless it is 0 and an optional step did not run."""
        return otherwise if otherwise or not self.not_run else EXIT_STEP_NOT_RUN

    def as_list(self) -> list[dict[str, Any]]:
        return [s.as_dict() for s in self.steps]

    def lines(self) -> list[str]:
        return [f"  step {s.line()}" for s in self.steps]

    def _add(self, name: str, status: str, began: float, why: str = "") -> None:
        result = StepResult(name, status, round(self.clock() - began, 3), why)
        self.steps.append(result)
        if status == RAN:
            self.say(f"{self._what}: {name} ({result.seconds:.2f} s)")

    @property
    def _what(self) -> str:
        return f"{self.command.value.split()[0]} {self.mirror}"


def within(fn: Callable[[], T], budget_s: float, what: str) -> T:
    """``fn()``, or StepTimeoutError when it outlasts ``budget_s`` (a step on a cluster that may be gone:
    its thread is abandoned, not joined, so the command goes on in time)."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="eosmirror-bounded")
    try:
        return pool.submit(fn).result(timeout=budget_s)
    except FutureTimeout:
        raise StepTimeoutError(f"{what}: no answer within {budget_s:.0f} s") from None
    finally:
        pool.shutdown(wait=False)
