"""Topics and groups the suites make and clear: created (and seen by every client) before a workload
writes, deleted by name or by a run's unique fragment once a run is measured.

Creation is strict by default: a suite's topic that already exists would be counted twice, so it is
an error unless ``exist_ok`` (the demo appends to its topics on every call). Clean-up is best effort:
a topic or group that is already gone, or still in use, stays, and never fails the run that made it.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from eosmirror.kafka import calls
from eosmirror.kafka.cluster import Cluster
from eosmirror_tools.kit import waits

VISIBLE_WITHIN_S = 30.0


def _admin(conf: dict[str, Any], client_name: str) -> Any:
    return Cluster.from_settings("tools", conf, client_name=client_name).admin


def create_topics(conf: dict[str, Any], names: list[str], partitions: int, cluster_label: str = "source",
                  configs: dict[str, dict[str, str]] | None = None, replication: int = 1,
                  exist_ok: bool = False) -> None:
    """Create ``names`` with ``partitions`` each (``configs``: topic settings by name; ``replication``
    -1 = the broker's default), then wait until every one is visible with all its partitions."""
    from confluent_kafka.admin import NewTopic

    admin = _admin(conf, "eosmirror-tools-admin")
    existing = set(admin.list_topics(timeout=15).topics) if exist_ok else set()
    new = [NewTopic(n, num_partitions=partitions, replication_factor=replication, config=(configs or {}).get(n, {}))
           for n in names if n not in existing]
    if new:
        for name, future in admin.create_topics(new, request_timeout=30).items():
            try:
                future.result(timeout=30)
            except Exception as exc:  # noqa: BLE001 - named and re-raised below
                if not (exist_ok and calls.error_name(exc) == "TOPIC_ALREADY_EXISTS"):
                    raise calls.translate(exc, f"create topic {name}", cluster_label) from None
    # Metadata reaches every client asynchronously: a producer that starts before it sees no leader.
    # 30 s on a quiet machine; a loaded one gets more (seen: the bench smoke's topic, not visible in 30 s at
    # load 10 while other engineers' suites ran), capped so a broker that never answers still fails.
    budget = waits.service_budget(VISIBLE_WITHIN_S, cap_seconds=4 * VISIBLE_WITHIN_S)
    deadline = time.monotonic() + budget
    while True:
        visible = admin.list_topics(timeout=10).topics
        made = {t.topic for t in new}
        missing = [n for n in names if n not in visible or n in made and len(visible[n].partitions) != partitions]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{cluster_label}: topics {missing} did not become visible within {budget:.0f} s "
                               f"({waits.machine_now()})")
        time.sleep(0.1)


def delete_topics(conf: dict[str, Any], names: list[str], say: Callable[[str], None] | None = None) -> list[str]:
    """Delete the named topics that exist; returns those asked to go (best effort, see the module doc;
    ``say`` hears of each one that could not be deleted)."""
    if not names:
        return []
    admin = _admin(conf, "eosmirror-tools-cleanup")
    try:
        existing = set(admin.list_topics(timeout=10).topics)
        doomed = [n for n in names if n in existing]
        if doomed:
            for name, future in admin.delete_topics(doomed, request_timeout=30).items():
                try:
                    future.result(timeout=60)
                except Exception as exc:  # noqa: BLE001 - already gone or not deletable: leave it
                    if say is not None:
                        say(f"could not delete topic {name}: {exc}")
        return doomed
    except Exception:  # noqa: BLE001
        return []


def topics_containing(conf: dict[str, Any], fragment: str) -> list[str]:
    """Topics whose name contains ``fragment`` (a unique run/alias string: never someone else's topic)."""
    admin = _admin(conf, "eosmirror-tools-cleanup")
    try:
        return sorted(t for t in admin.list_topics(timeout=10).topics if fragment in t)
    except Exception:  # noqa: BLE001
        return []


def delete_groups(conf: dict[str, Any], groups: list[str]) -> None:
    """Delete consumer groups (best effort; a group that is unknown or still active stays)."""
    if not groups:
        return
    admin = _admin(conf, "eosmirror-tools-cleanup")
    try:
        for future in admin.delete_consumer_groups(groups, request_timeout=30).values():
            try:
                future.result(timeout=30)
            except Exception:  # noqa: BLE001
                pass
    except Exception:  # noqa: BLE001
        pass
