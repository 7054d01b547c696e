"""Process-tree helpers for fault injection (Linux /proc): find, signal and reap what a run started."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def _stat(pid: int) -> tuple[int, str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # pid (comm) state ppid ...: comm may contain spaces, so split after the last ')'
    rest = text[text.rindex(")") + 2:].split()
    return int(rest[1]), rest[0]


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            info = _stat(int(entry.name))
            if info:
                children.setdefault(info[0], []).append(int(entry.name))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def alive(pid: int) -> bool:
    info = _stat(pid)
    return info is not None and info[1] != "Z"


def python_workers(root: int) -> list[int]:
    """Spark's Python worker processes under a spark-submit process (not the Python driver)."""
    return [p for p in descendants(root) if "pyspark" in cmdline(p) and ("daemon" in cmdline(p) or "worker" in cmdline(p))
            and "spark/job.py" not in cmdline(p)]


def signal_all(pids: list[int], sig: int) -> int:
    sent = 0
    for pid in pids:
        try:
            os.kill(pid, sig)
            sent += 1
        except ProcessLookupError:
            pass
    return sent


def kill_tree(root: int, grace: float = 10.0) -> None:
    """SIGTERM a process and everything under it, then SIGKILL what is left."""
    tree = [root, *descendants(root)]
    signal_all(tree, signal.SIGCONT)
    signal_all(tree, signal.SIGTERM)
    deadline = time.time() + grace
    while time.time() < deadline and any(alive(p) for p in tree):
        time.sleep(0.2)
    signal_all([p for p in tree if alive(p)], signal.SIGKILL)
