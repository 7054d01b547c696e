"""Fault injection for tests and the chaos suite. Inert unless ``EOSMIRROR_FAULTS`` is set.

``EOSMIRROR_FAULTS`` holds a JSON list of rules; a rule fires at a named point of the copy::

    [{"point": "before_commit", "action": "kill", "slot": 0, "once": "/tmp/marker"}]

points:  after_init (after init_transactions), in_transaction (after the first records of a
         transaction were produced), before_commit (records, syncs and offsets sent; commit not yet
         called), after_commit
actions: kill (SIGKILL this process), exit (os._exit(3)), abort (raise an injected abortable
         error, exercising abort + rewind), sleep (``seconds``), stop (SIGSTOP this process)
filters: ``slot`` (only that slot), ``probability`` (0..1), ``once`` (a marker file created
         atomically: the rule fires in exactly one process, ever)
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from dataclasses import dataclass

ENV = "EOSMIRROR_FAULTS"
POINTS = ("after_init", "in_transaction", "before_commit", "after_commit")
ACTIONS = ("kill", "exit", "abort", "sleep", "stop")


class InjectedAbort(Exception):
    """Raised by the ``abort`` action; the copy treats it like an abortable Kafka error."""


@dataclass(frozen=True)
class Rule:
    point: str
    action: str
    slot: int | None = None
    probability: float = 1.0
    once: str | None = None
    seconds: float = 0.0

    def applies(self, point: str, slot: int) -> bool:
        if point != self.point or (self.slot is not None and self.slot != slot):
            return False
        if self.probability < 1.0 and random.random() >= self.probability:
            return False
        if self.once:
            try:
                os.close(os.open(self.once, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            except FileExistsError:
                return False
        return True


class Faults:
    def __init__(self, rules: list[Rule] | None = None):
        self.rules = rules or []

    @classmethod
    def from_env(cls) -> "Faults":
        raw = os.environ.get(ENV)
        if not raw:
            return cls()
        rules = []
        for item in json.loads(raw):
            rule = Rule(**item)
            if rule.point not in POINTS or rule.action not in ACTIONS:
                raise ValueError(f"{ENV}: unknown point or action in {item}")
            rules.append(rule)
        return cls(rules)

    def hit(self, point: str, slot: int) -> None:
        for rule in self.rules:
            if not rule.applies(point, slot):
                continue
            if rule.action == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            elif rule.action == "stop":
                os.kill(os.getpid(), signal.SIGSTOP)
            elif rule.action == "exit":
                os._exit(3)
            elif rule.action == "sleep":
                time.sleep(rule.seconds)
            elif rule.action == "abort":
                raise InjectedAbort(f"injected abort at {point} (slot {slot})")
