"""Where eosmirror keeps its local state and finds its mirror definitions.

Two ways to run: from a checkout (``make demo``, ``make test``: state under ``var/`` at the
repository root) or from an installed wheel with one's own Airflow (state under
``~/.eosmirror``). ``EOSMIRROR_HOME`` overrides both. Nothing here touches the network.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def checkout_root() -> Path | None:
    """The repository root when eosmirror runs from a checkout (plugins/eosmirror), else None."""
    root = PACKAGE_DIR.parent.parent
    if PACKAGE_DIR.parent.name == "plugins" and (root / "pyproject.toml").is_file() and (root / "dags").is_dir():
        return root
    return None


def home() -> Path:
    """The project's state folder (created on first use)."""
    root = checkout_root()
    default = root / "var" if root else Path.home() / ".eosmirror"
    path = Path(os.environ.get("EOSMIRROR_HOME") or default).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def under_home(*parts: str) -> Path:
    path = home().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def build_dir(*parts: str) -> Path:
    """``build/`` at the repository root (or under the home): reports a person reads (bench, chaos, demo)."""
    root = checkout_root()
    path = (root / "build" if root else home() / "build").joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_mirrors_file() -> Path:
    """``$EOSMIRROR_CONFIG``, else ``mirrors.yaml`` in Airflow's DAGs folder, else the checkout's ``dags/``."""
    if os.environ.get("EOSMIRROR_CONFIG"):
        return Path(os.environ["EOSMIRROR_CONFIG"])
    dags = os.environ.get("AIRFLOW__CORE__DAGS_FOLDER")
    if dags:
        return Path(dags) / "mirrors.yaml"
    root = checkout_root()
    return (root / "dags" if root else Path.cwd() / "dags") / "mirrors.yaml"
