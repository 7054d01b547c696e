"""Fixtures of the unit tests that run the slot copier over the scripted fakes (tests/support/fakes.py)."""

from __future__ import annotations

import pytest

from eosmirror.slot import atleastonce, classify, copier, recordloop, syncwrites, targetcheck
from tests.support.fakes import Clock


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    for module in (copier, classify, recordloop, atleastonce, syncwrites, targetcheck):   # every slot module using time
        monkeypatch.setattr(module, "time", fake)
    return fake


@pytest.fixture
def wall(clock, monkeypatch):
    """Wall time that moves with the fake monotonic clock (the follow bound is wall-clock)."""
    monkeypatch.setattr(type(clock), "time", lambda self: 50_000.0 + self.now, raising=True)
    return clock
