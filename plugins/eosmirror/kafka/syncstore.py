"""Reading the mirror's offset-sync topic (the I/O half of ``offsetsync``)."""

from __future__ import annotations

import logging
from typing import Any

from eosmirror.core import naming
from eosmirror.kafka import readers
from eosmirror.core.errors import ProgressUnavailableError
from eosmirror.core.offsetsync import OffsetSync, PartitionSyncs, group_by_partition

log = logging.getLogger(__name__)


def load(target_conf: dict[str, Any], mirror: str, cluster: str, group: str) -> dict[tuple[str, int], PartitionSyncs]:
    """All committed offset syncs of a mirror, grouped by target partition."""
    syncs = []
    for record in readers.read_all(target_conf, naming.offset_sync_topic(mirror), 0, cluster,
                                   client_id=f"eosmirror-{mirror}-sync-reader", timeout=300, missing_ok=True,
                                   group_id=group):
        if record.value is None:
            continue
        try:
            syncs.append(OffsetSync.decode(record.value))
        except (ValueError, KeyError) as exc:
            # Skipping it would make translation silently inexact: refuse instead.
            raise ProgressUnavailableError(
                f"{cluster}: record {record.offset} of {naming.offset_sync_topic(mirror)} is not an eosmirror "
                f"offset sync ({exc}); only eosmirror may write to that topic") from None
    return group_by_partition(syncs)
