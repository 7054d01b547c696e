"""A mirror parsed from the smallest valid definition, and the error a definition gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from eosmirror.core import config
from eosmirror.core.errors import ConfigError

P = Path("mirrors.yaml")


def one(**fields):
    raw = {"name": "m1", "source": {"local": "source"}, "target": {"local": "target"}, "topics": ["a\\..*"], **fields}
    return config.parse({"mirrors": [raw]}, P).mirrors[0]


def error_of(**fields) -> str:
    with pytest.raises(ConfigError) as info:
        one(**fields)
    return str(info.value)
