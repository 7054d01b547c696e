"""The launch gate: spark-submit starts while `eosmirror run` still plans, and its job waits at the gate.

`eosmirror run` plans before it chooses how a run executes (spark/launch.py: a run with nothing to copy
never starts Spark). Started after that plan, spark-submit's own start (two JVMs, then Spark's Python
driver: about 1 s) came on top of the plan (about 1 s with the source 100 ms away). Through the gate the
two overlap:

1. The launcher makes the gate (a private directory) and starts spark-submit with ``EOSMIRROR_LAUNCH_GATE``
   naming it and ``EOSMIRROR_LAUNCH_GATE_PID`` its own pid.
2. The job, first thing in its Python driver, before it starts Spark or reaches a cluster, waits for the
   gate's answer (``wait``).
3. The launcher plans, then answers: ``go`` (the run goes through this spark-submit) or ``stop`` (it
   goes another way). An answer is written by rename, so it is read whole or not at all. After ``stop``
   the launcher ends spark-submit; the job, which has done nothing yet (step 2), leaves at once too.
4. The job gives up, loudly, if its launcher dies or no answer comes within ``BUDGET_SECONDS``.

Without ``EOSMIRROR_LAUNCH_GATE`` (the Airflow copy task, a user's own spark-submit) the job starts at once.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Mapping

from eosmirror.core.errors import EosMirrorError

GATE_ENV = "EOSMIRROR_LAUNCH_GATE"
PID_ENV = "EOSMIRROR_LAUNCH_GATE_PID"
GO, STOP = "go", "stop"
# The launcher's plan reads both clusters once (a few round trips; seconds at 5,000 partitions): a
# minute without an answer means the launcher is stuck, and a stuck gate must not hold a Spark driver.
BUDGET_SECONDS = 60.0
POLL_SECONDS = 0.02


class LaunchGate:
    """The launcher's side (steps 1 and 3)."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="eosmirror-gate-"))   # 0700: only this user answers
        self.answered: str | None = None

    def env(self) -> dict[str, str]:
        return {GATE_ENV: str(self.path), PID_ENV: str(os.getpid())}

    def answer(self, word: str) -> None:
        if self.answered is not None:
            return
        partial = self.path / f".{word}.partial"
        partial.write_text(word)
        partial.replace(self.path / "answer")
        self.answered = word

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # another user's process of that pid: ours is gone
        return False
    return True


def wait(environ: Mapping[str, str] | None = None, budget: float = BUDGET_SECONDS) -> tuple[bool, float]:
    """Steps 2 and 4, in the job: (whether to run, seconds waited). True at once without a gate; False
    on ``stop`` or when the gate is gone (the launcher removes it once it no longer needs this job)."""
    environ = os.environ if environ is None else environ
    if not environ.get(GATE_ENV):
        return True, 0.0
    gate = Path(environ[GATE_ENV])
    answer = gate / "answer"
    launcher = int(environ.get(PID_ENV) or 0)
    started = time.monotonic()
    while True:
        try:
            word = answer.read_text().strip()
        except FileNotFoundError:
            word = ""
        waited = time.monotonic() - started
        if word in (GO, STOP):
            return word == GO, waited
        if not word and not gate.is_dir():   # removed: the launcher went another way and cleaned up
            return False, waited
        if word:
            raise EosMirrorError(f"launch gate {answer}: unknown answer {word!r} (expected {GO!r} or {STOP!r})")
        if launcher and not _alive(launcher):
            raise EosMirrorError(f"launch gate: the launcher (pid {launcher}) ended without answering; this "
                                 f"Spark driver leaves without running")
        if waited > budget:
            raise EosMirrorError(f"launch gate: no answer from the launcher (pid {launcher}) in {budget:.0f} s "
                                 f"({answer} is still empty); this Spark driver leaves without running")
        time.sleep(POLL_SECONDS)
