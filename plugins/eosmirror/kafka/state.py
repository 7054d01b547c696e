"""The mirror's state topic on the target (slot generations, the disaster-recovery state, audit
records) and fencing of transactional ids.

See ``generation.py`` for the protocol and why the generation is recorded before fencing.
"""

from __future__ import annotations

import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from eosmirror.core import naming
from eosmirror.core.errors import FencedError
from eosmirror.core.generation import STATE_KEY, Generation, ids_to_fence, next_generation
from eosmirror.core.migration import AuditRecord, is_audit_key
from eosmirror.core.mirrorstate import STATE_RECORD_KEY, MirrorState
from eosmirror.core.transitions import check_may_copy, initial_state, may_copy
from eosmirror.kafka import calls, clients, readers
from eosmirror.kafka.cluster import Cluster

log = logging.getLogger(__name__)


def _latest(target: Cluster, mirror: str, group: str) -> tuple[Generation | None, MirrorState]:
    """One read of the state topic (``group``: the progress group, the only group the principal has):
    the current generation and the mirror's disaster-recovery state (``transitions.initial_state`` when
    none is recorded: ``mirroring``, or ``not-prepared`` for a generated reverse mirror)."""
    records = readers.read_all(target, naming.state_topic(mirror), 0,
                               client_id=f"eosmirror-{mirror}-state-reader", missing_ok=True, group_id=group)
    generation, mirror_state = None, initial_state(mirror)
    for record in records:
        if record.key == STATE_KEY and record.value is not None:
            generation = Generation.decode(record.value)
        elif record.key == STATE_RECORD_KEY and record.value is not None:
            mirror_state = MirrorState.decode(record.value)
    return generation, mirror_state


def read_generation(target: Cluster, mirror: str, group: str) -> Generation | None:
    """The mirror's current generation."""
    return _latest(target, mirror, group)[0]


def read_mirror_state(target: Cluster, mirror: str, group: str) -> MirrorState:
    """The mirror's disaster-recovery state (core/mirrorstate.py)."""
    return _latest(target, mirror, group)[1]


def _planner(target: Cluster, mirror: str, prefix: str) -> Any:
    """The mirror's planner producer, initialised: from here on only this process writes the state."""
    planner_id = naming.planner_transactional_id(prefix, mirror)
    planner = clients.transactional_producer(target.settings, {}, planner_id, transaction_timeout_ms=60000,
                                             client_id=f"eosmirror-{mirror}-planner")
    calls.call(planner.init_transactions, "initialise the planner producer", target.label,
               f"Write on transactional id {planner_id} (grant Write on the PREFIXED transactional id "
               f"'{prefix}.{mirror}.' to cover the planner and every slot)", 60)
    return planner


def _write_state(planner: Any, target: Cluster, mirror: str, key: bytes, value: bytes, what: str) -> None:
    try:
        planner.begin_transaction()
        planner.produce(naming.state_topic(mirror), value=value, key=key, partition=0)
        planner.commit_transaction()
    except Exception as exc:  # noqa: BLE001
        if calls.error_name(exc) == "_FENCED":
            raise FencedError(f"{target.label}: another run of mirror {mirror!r} took over planning; this run "
                              f"stops") from None
        raise calls.translate(exc, what, target.label, f"Write on topic {naming.state_topic(mirror)}") from None


def recorder(target: Cluster, mirror: str, prefix: str) -> Callable[[MirrorState], None]:
    """The writer of ``mirror``'s state records on ``target`` (a transition's ``record_to``)."""
    return lambda new: write_mirror_state(target, mirror, prefix, new)


def write_mirror_state(target: Cluster, mirror: str, prefix: str, new: MirrorState) -> None:
    """Record a state transition through the planner producer (it fences any older planner first, so
    a run planning at the same moment can no longer record a generation)."""
    planner = _planner(target, mirror, prefix)
    _write_state(planner, target, mirror, STATE_RECORD_KEY, new.encode(), f"record the mirror's state {new.phase.value}")
    planner.flush(5)
    log.info("mirror %s: state %s", mirror, new.describe())


def auditor(target: Cluster, mirror: str, prefix: str, action: str, origin: str, who: str) -> Callable[[str], None]:
    """A writer of audit records ``action`` (from ``origin``, by ``who``) with a note, on ``mirror``'s state topic."""
    def write(note: str) -> None:
        record = AuditRecord(action=action, mirror=mirror, origin=origin, who=who, at_ms=int(time.time() * 1000),
                             note=note)
        planner = _planner(target, mirror, prefix)
        _write_state(planner, target, mirror, record.key(uuid.uuid4().hex[:12]), record.encode(),
                     f"record the audit record {action}")
        planner.flush(5)
    return write


def read_audit(target: Cluster, mirror: str, group: str) -> list[Any]:
    """The mirror's audit records (migrations and resets, ``core/migration.py``), oldest first."""

    records = readers.read_all(target, naming.state_topic(mirror), 0,
                               client_id=f"eosmirror-{mirror}-audit-reader", missing_ok=True, group_id=group)
    return [AuditRecord.decode(r.value) for r in records if is_audit_key(r.key) and r.value is not None]


def fence(target: Cluster, transactional_ids: list[str], timeout: float = 60.0) -> list[str]:
    """init_transactions on each id: the broker bumps its epoch and aborts (or completes) its open
    transaction, so any older instance can no longer produce or commit. Returns the ids fenced."""

    def fence_one(txn_id: str) -> str:
        producer = clients.transactional_producer(target.settings, {}, txn_id, transaction_timeout_ms=60000,
                                                  client_id=f"eosmirror-fence-{txn_id}")
        calls.call(producer.init_transactions, f"fence transactional id {txn_id}", target.label,
                     f"Write and Describe on transactional id {txn_id}", timeout)
        producer.flush(5)
        return txn_id

    if not transactional_ids:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(transactional_ids))) as pool:
        return list(pool.map(fence_one, transactional_ids))


def establish_generation(target: Cluster, mirror: str, prefix: str, slots: int, group: str,
                         now_ms: int | None = None, final_of_switchover: bool = False) -> tuple[Generation, list[str]]:
    """Steps 1-4 of the generation protocol. Returns (current generation, ids fenced by this call)."""
    run_id = uuid.uuid4().hex[:12]
    # 1. Fence older planners: from here on only this process may write the state.
    planner = _planner(target, mirror, prefix)
    # 2. The current generation and state, read after fencing (an older planner's open write was
    #    aborted). A switched-over or promoted mirror copies nothing: refused before anything is fenced.
    current, mirror_state = _latest(target, mirror, group)
    check_may_copy(mirror_state, mirror, final_of_switchover)
    new = next_generation(current, slots, now_ms or int(time.time() * 1000), run_id)
    if new is None:
        planner.flush(5)
        return current, []  # type: ignore[return-value]
    # 3. Record the new generation and commit it BEFORE fencing (see generation.py).
    _write_state(planner, target, mirror, STATE_KEY, new.encode(), f"record generation {new.number}")
    log.info("mirror %s: generation %d with %d slots (was %s)", mirror, new.number, new.slots,
             f"{current.slots} slots" if current else "none")
    # 4. Fence every slot id any generation may have used.
    fenced = fence(target, ids_to_fence(new, prefix, mirror))
    return new, fenced


def check_generation(target: Cluster, mirror: str, expected: int, group: str, final_of_switchover: bool = False) -> None:
    """Slot step 2 (docs/architecture.md): after its init_transactions, a slot stops if the mirror was re-planned."""
    current, mirror_state = _latest(target, mirror, group)
    number = current.number if current else 0
    if number != expected:
        raise FencedError(f"mirror {mirror!r} moved to generation {number} (this slot belongs to {expected}); "
                          f"a newer run re-planned the slots, so this slot stops without copying")
    # A switchover or promotion records its state BEFORE it fences the slots: a slot initialised
    # after that fence reads the state here and stops, so none copies past the transition.
    if not may_copy(mirror_state, final_of_switchover):
        raise FencedError(f"mirror {mirror!r} is {mirror_state.describe()}; this slot stops without copying")
