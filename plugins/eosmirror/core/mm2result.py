"""What ``eosmirror import-mm2`` makes of an mm2.properties: the mirrors, and everything it did not translate."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Imported:
    """The translation: mirrors (as YAML-ready dicts), what was not translated, what differs from MM2."""

    mirrors: list[dict[str, Any]] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)       # "key = value: why"
    partial: list[str] = field(default_factory=list)        # where the mirror cannot select as MM2 does
    notes: list[str] = field(default_factory=list)          # what the reader should know, not a difference
    env_vars: list[str] = field(default_factory=list)
    translated: list[str] = field(default_factory=list)     # the keys the mirrors express
