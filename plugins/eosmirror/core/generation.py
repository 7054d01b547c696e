"""Slot generations (KIP-618 style task-count records), decided by pure functions.

A mirror runs with S slots; slot k always uses transactional id ``<prefix>.<mirror>.<k>``. Which
partitions belong to slot k depends on S, so when S changes, the slots of the old generation
(including zombies of them that are still alive somewhere) must be unable to commit before any slot
of the new generation copies anything. The protocol, executed by ``state.py`` on the driver:

  1. init_transactions on the planner id: fences older planners, so at most one writes the state.
  2. Read the current generation from the state topic (read_committed, to its end).
  3. If the slot count changed: write generation N+1 (new S, max S ever) and commit it FIRST,
  4. THEN fence every slot id of every generation (0 .. max S ever - 1).
  5. Every slot, after its own init_transactions, reads the generation and stops unless it is N+1.

Why this order is enough: a slot of generation N that reads the state before step 3 commits was
initialised before step 4, so step 4 fences it; one that reads after step 3 sees N+1 and stops.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from eosmirror.core import naming

STATE_KEY = b"generation"


@dataclass(frozen=True)
class Generation:
    number: int
    slots: int
    max_slots: int      # the largest slot count any generation used: the ids that may exist
    created_ms: int
    run_id: str = ""

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @staticmethod
    def decode(raw: bytes) -> "Generation":
        data = json.loads(raw)
        return Generation(number=int(data["number"]), slots=int(data["slots"]),
                          max_slots=int(data["max_slots"]), created_ms=int(data["created_ms"]),
                          run_id=str(data.get("run_id", "")))


def next_generation(current: Generation | None, slots: int, now_ms: int, run_id: str) -> Generation | None:
    """The generation to record before this run, or None when the current one fits."""
    if current is not None and current.slots == slots:
        return None
    number = (current.number + 1) if current else 1
    max_slots = max(slots, current.max_slots if current else 0)
    return Generation(number=number, slots=slots, max_slots=max_slots, created_ms=now_ms, run_id=run_id)


def ids_to_fence(generation: Generation | None, prefix: str, mirror: str) -> list[str]:
    """Every slot id any generation of the mirror may have used."""
    if generation is None:
        return []
    return naming.slot_transactional_ids(prefix, mirror, generation.max_slots)
