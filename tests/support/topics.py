"""A compacted source topic frozen for a comparison: no more cleaning, nothing removed by retention."""

from __future__ import annotations

import time

from tests.helpers import read_all
from tests.support.waiting import wait_for

QUIET_SECONDS = 1.0   # a log unchanged this long under the frozen configuration is no longer being cleaned


def freeze_compaction(conf, topic: str, partitions: int) -> None:
    """Sets ``cleanup.policy=delete`` and ``retention.ms=-1`` on ``topic``, then waits until the broker
    reports them and every partition's offsets (read_committed, real reads) stay unchanged for
    QUIET_SECONDS: a cleaner pass that was under way has ended."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    freeze = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", "-1", incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient(conf)
    admin.incremental_alter_configs([freeze])[freeze].result(30)
    last: dict[str, object] = {"offsets": None, "since": time.monotonic()}

    def frozen() -> tuple[bool, str]:
        resource = ConfigResource(ResourceType.TOPIC, topic)
        configs = admin.describe_configs([resource])[resource].result(30)
        policy, retention = configs["cleanup.policy"].value, configs["retention.ms"].value
        offsets = [[r.offset for r in read_all(conf, topic, k)] for k in range(partitions)]
        if offsets != last["offsets"]:
            last["offsets"], last["since"] = offsets, time.monotonic()
        quiet = time.monotonic() - last["since"]
        return ((policy, retention) == ("delete", "-1") and quiet >= QUIET_SECONDS,
                f"cleanup.policy={policy}, retention.ms={retention}, offsets unchanged for {quiet:.1f} s")

    wait_for(f"{topic} frozen (no cleaner pass under way)", frozen, 60)
