"""Running commands for the deployment test: bounded, and loud about what they printed when they fail."""

from __future__ import annotations

import logging
import os
import subprocess
import time
from typing import Sequence

log = logging.getLogger("eosmirror.deploy")


class DeployError(RuntimeError):
    """A step of the deployment test failed; the message says which and what it saw."""


def run(cmd: Sequence[str], what: str, timeout: float, env: dict[str, str] | None = None, check: bool = True,
        input_bytes: bytes | None = None) -> str:
    """Run ``cmd``; return its stdout. ``env`` is added to this process's environment."""
    full_env = {**os.environ, **(env or {})}
    started = time.monotonic()
    try:
        done = subprocess.run(list(cmd), env=full_env, input=input_bytes, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        tail = (exc.stdout or b"")[-2000:].decode(errors="replace") + (exc.stderr or b"")[-2000:].decode(errors="replace")
        raise DeployError(f"{what}: still running after {timeout:.0f} s; last output:\n{tail}") from None
    out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    log.debug("%s: exit %d in %.1f s", what, done.returncode, time.monotonic() - started)
    if check and done.returncode != 0:
        raise DeployError(f"{what} failed (exit {done.returncode}):\n{out[-3000:]}\n{err[-3000:]}")
    return out


def wait_for(check, what: str, budget: float, interval: float = 2.0):
    """Call ``check()`` until it returns (ok, seen) with ok true; give up after ``budget`` seconds
    saying what the last check saw. Returns the last ``seen``."""
    deadline = time.monotonic() + budget
    seen = None
    while True:
        try:
            ok, seen = check()
        except DeployError as exc:
            ok, seen = False, str(exc)[-600:]
        if ok:
            return seen
        if time.monotonic() > deadline:
            raise DeployError(f"gave up waiting for {what} after {budget:.0f} s; last seen: {seen}")
        time.sleep(interval)
