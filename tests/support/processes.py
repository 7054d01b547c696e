"""A started process waited for within a budget, and a whole process group (a started service and
everything it spawned) stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest


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
