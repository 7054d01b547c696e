"""A started process waited for within a budget, and a whole process group (a started service and
everything it spawned) stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest

from tests.support.waiting import wait_for


def stop_process_group(pgid: int, grace: float = 45.0) -> None:
    """SIGTERM to every process of the group, SIGKILL to whatever is left after ``grace`` seconds.

    Waiting for the standalone parent is not enough: its scheduler once outlived the SIGTERM (left
    behind with its LocalExecutor workers, re-parented to init, for the rest of the session)."""
    import psutil

    def alive() -> bool:   # a member that is not a zombie (init may be slow to reap re-parented ones)
        for process in psutil.process_iter(["status"]):
            try:
                if os.getpgid(process.pid) == pgid and process.info["status"] != psutil.STATUS_ZOMBIE:
                    return True
            except (ProcessLookupError, psutil.Error):
                continue
        return False

    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while alive() and time.monotonic() < deadline:
        try:
            os.waitpid(-pgid, os.WNOHANG)   # reap our own child, the standalone parent
        except ChildProcessError:
            pass
        time.sleep(0.5)
    if alive():
        os.killpg(pgid, signal.SIGKILL)


def ended(proc: subprocess.Popen, what: str, budget: float) -> tuple[int, str]:
    """(exit code, output) of ``proc`` once it ends; it is killed and the test fails if it runs past ``budget``."""
    try:
        out, _ = proc.communicate(timeout=budget)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"{what} did not end within {budget:.0f} s; it printed:\n{out[-3000:]}")
    return proc.returncode, out


class Output:
    """A started process whose merged output (``stdout=PIPE``, text) is read as it comes, in a thread,
    so a test can wait for a line it prints while it runs."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.lines = proc, []
        self.thread = threading.Thread(target=self._read, name="process-output", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def text(self) -> str:
        return "".join(self.lines)

    def wait_for(self, needle: str, budget: float, what: str) -> None:
        """Until the output holds ``needle``; fails if the process ends first or ``budget`` passes."""
        wait_for(what, lambda: (needle in self.text() or self.proc.poll() is not None, self.text()[-2000:]), budget)
        assert needle in self.text(), (f"{what}: the process exited {self.proc.poll()} without printing "
                                       f"{needle!r}:\n{self.text()[-3000:]}")

    def ended(self, what: str, budget: float) -> tuple[int, str]:
        """(exit code, everything it printed) once it ends; killed, and the test fails, past ``budget``."""
        try:
            self.proc.wait(budget)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
            self.thread.join(10)
            pytest.fail(f"{what} did not end within {budget:.0f} s; it printed:\n{self.text()[-3000:]}")
        self.thread.join(30)
        return self.proc.returncode, self.text()
