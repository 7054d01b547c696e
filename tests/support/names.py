"""Names unique to a test (or a module) and run: tests never see each other's topics, groups or ids."""

from __future__ import annotations

import re
import uuid
from typing import Callable


def unique_names(owner: str) -> Callable[..., str]:
    """``make(kind)`` -> '<kind>-<owner, shortened>-<random>-<n>'."""
    base = re.sub(r"[^A-Za-z0-9]+", "-", owner).strip("-").lower()[:40]
    counter = iter(range(1000))

    def make(kind: str = "t") -> str:
        return f"{kind}-{base}-{uuid.uuid4().hex[:6]}-{next(counter)}"

    return make
