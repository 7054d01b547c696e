"""Where eosmirror keeps its local state.

Everything the project writes at run time (Kafka jars, broker data and logs, the Airflow home,
benchmark and chaos reports) lives under one git-ignored folder, ``var/`` at the repository root,
unless ``EOSMIRROR_HOME`` points elsewhere. Nothing here touches the network.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# plugins/eosmirror -> plugins -> repository root (valid for the editable install used by the
# driver, the CLI and tests; executors never need it).
REPO_ROOT = PACKAGE_DIR.parent.parent


def home() -> Path:
    """The project's git-ignored state folder (created on first use)."""
    path = Path(os.environ.get("EOSMIRROR_HOME") or REPO_ROOT / "var").resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def under_home(*parts: str) -> Path:
    path = home().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def build_dir(*parts: str) -> Path:
    """``build/`` at the repository root: reports a person reads (bench, chaos)."""
    path = REPO_ROOT.joinpath("build", *parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
