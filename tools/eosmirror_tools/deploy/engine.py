"""The Docker engine: Debian's docker.io (and debootstrap, docker-compose) installed when missing,
dockerd started when none runs, and stopped again if this test started it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from eosmirror_tools.deploy.shell import DeployError, log, run, wait_for

PACKAGES = {"dockerd": "docker.io", "debootstrap": "debootstrap", "docker-compose": "docker-compose"}


def ensure_packages() -> list[str]:
    """apt-get install what is missing; returns the packages installed."""
    missing = [pkg for binary, pkg in PACKAGES.items() if not shutil.which(binary)]
    if missing:
        log.info("installing %s", " ".join(missing))
        env = {"DEBIAN_FRONTEND": "noninteractive"}
        run(["apt-get", "update", "-q"], "apt-get update", 600, env)
        run(["apt-get", "install", "-y", "-q", *missing], f"apt-get install {' '.join(missing)}", 900, env)
    return missing


def engine_answers() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode == 0


def ensure_dockerd(log_file: Path) -> subprocess.Popen | None:
    """Start dockerd when no engine answers. Returns the process if we started it, else None."""
    if engine_answers():
        return None
    log.info("starting dockerd (log: %s)", log_file)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(["dockerd"], stdout=log_file.open("ab"), stderr=subprocess.STDOUT,
                               start_new_session=True)
    wait_for(lambda: (engine_answers() or process.poll() is not None, f"dockerd exit code {process.poll()}"),
             "dockerd to answer", 90)
    if process.poll() is not None:
        raise DeployError(f"dockerd exited with {process.returncode}; see {log_file}")
    return process


def stop_dockerd(process: subprocess.Popen | None) -> None:
    """Stop the dockerd this test started (SIGTERM, then SIGKILL after 60 s); leave any other alone."""
    if process is None or process.poll() is not None:
        return
    log.info("stopping the dockerd this test started (pid %d)", process.pid)
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(30)
    time.sleep(1)
