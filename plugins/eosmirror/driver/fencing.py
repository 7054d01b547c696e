"""Fence a mirror's zombie producers and prove the target is unblocked (the fencing DAG's work).

1. Fence every transactional id the mirror may have used: the planner id and slot ids 0..max
   slot count of any recorded generation (or of the configured slot count when none is recorded).
   Each ``init_transactions`` aborts (or completes) the open transaction of a stalled or killed
   producer, so read_committed consumers are no longer held back by it.
2. For every target partition the mirror ever committed progress for (from its offset syncs, read
   on the target, so the source cluster may be down), wait until the last stable offset equals
   the high watermark: no open transaction is left.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from eosmirror.core import naming
from eosmirror.core.config import MirrorConfig
from eosmirror.kafka import offsets, state, syncstore
from eosmirror.kafka.cluster import Cluster


def mirrored_partitions(target: Cluster, mirror: MirrorConfig) -> list[tuple[str, int]]:
    """Every target partition the mirror ever committed progress for: each such commit wrote an
    offset sync (read from the target only, so the source may be down)."""
    return sorted(syncstore.latest(target, mirror.name, mirror.progress_group).newest)


def open_transactions(target: Cluster, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
    """{partition: (last stable offset, high watermark)} for partitions with an open transaction."""
    from confluent_kafka.admin import OffsetSpec

    specs = {tp: OffsetSpec.latest() for tp in partitions}
    stable = offsets.list_offsets_of(target, specs, read_committed=True)
    high = offsets.list_offsets_of(target, specs, read_committed=False)
    return {tp: (stable[tp], high[tp]) for tp in partitions if stable[tp] != high[tp]}


def fence_mirror(mirror: MirrorConfig, all_generations: bool = True, settle_seconds: float = 60.0,
                 timeout: float = 60.0, on_fenced: Callable[[list[str]], None] | None = None) -> dict[str, Any]:
    """Step 1, then step 2 for at most ``settle_seconds``. ``timeout`` bounds each init_transactions;
    ``on_fenced`` hears the fenced ids as soon as step 1 is done (step 2 reads every offset sync of
    the mirror, which takes a while for an old mirror)."""
    target = Cluster.resolve("target", mirror.target, mirror.name)
    target.client_name = f"{mirror.name}-fence"   # its admin client is the fencing's, not a run's
    current = state.read_generation(target, mirror.name, mirror.progress_group)
    slots = current.max_slots if (current and all_generations) else (current.slots if current else mirror.slots)
    ids = [naming.planner_transactional_id(mirror.transactional_id_prefix, mirror.name)]
    ids += naming.slot_transactional_ids(mirror.transactional_id_prefix, mirror.name, max(slots, mirror.slots))
    started = time.monotonic()
    fenced = state.fence(target, ids, timeout)
    if on_fenced is not None:
        on_fenced(fenced)
    partitions = mirrored_partitions(target, mirror)
    deadline = time.monotonic() + settle_seconds
    blocked = open_transactions(target, partitions)
    while blocked and time.monotonic() < deadline:   # markers are written just after the fence
        time.sleep(0.5)
        blocked = open_transactions(target, list(blocked))
    return {"mirror": mirror.name, "target": target.label, "generation": current.number if current else 0,
            "fenced": fenced, "partitions_checked": len(partitions),
            "blocked": {f"{t}[{p}]": {"last_stable": ls, "high_watermark": hw,
                                      "clear": clear_command(target.first_bootstrap, t, p, ls)}
                        for (t, p), (ls, hw) in sorted(blocked.items())},
            "unblocked": not blocked, "seconds": round(time.monotonic() - started, 2)}


def clear_command(bootstrap: str, topic: str, partition: int, last_stable: int) -> str:
    """Kafka's commands that find the producer holding ``topic[partition]`` from ``last_stable`` on, and
    abort its transaction when that producer is gone (a hanging transaction)."""
    tool = f"kafka-transactions.sh --bootstrap-server {bootstrap}"
    return (f"{tool} describe-producers --topic {topic} --partition {partition} (stop that producer); if it is gone: "
            f"{tool} abort --topic {topic} --partition {partition} --start-offset {last_stable}")


def blocked_lines(outcome: dict[str, Any]) -> list[str]:
    """Every partition still held after the fence, each with the commands that clear it."""
    return [f"{tp} held from offset {o['last_stable']} (high watermark {o['high_watermark']}): {o['clear']}"
            for tp, o in outcome.get("blocked", {}).items()]


def format_outcome(outcome: dict[str, Any]) -> str:
    lines = [f"mirror {outcome['mirror']}: fenced {len(outcome['fenced'])} transactional ids on {outcome['target']}"]
    lines += [f"  fenced {txn_id}" for txn_id in outcome["fenced"]]
    if outcome["unblocked"]:
        lines.append(f"  all {outcome['partitions_checked']} mirrored partitions are unblocked "
                     f"(last stable offset = high watermark)")
    else:
        for tp, offsets in outcome["blocked"].items():
            lines.append(f"  STILL BLOCKED {tp}: last stable {offsets['last_stable']} < high watermark "
                         f"{offsets['high_watermark']}: a producer outside this mirror holds a transaction open; "
                         f"{offsets['clear']}")
    return "\n".join(lines)
