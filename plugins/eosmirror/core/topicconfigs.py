"""Which topic configs the mirror keeps in step on the target, and which it never touches."""

# Topic configs copied to target topics when they are created or drift (MirrorMaker 2 copies a
# similar set). message.timestamp.type is deliberately absent: target topics are always CreateTime
# so that the source timestamps (CreateTime or LogAppendTime) are kept as they were.
DEFAULT_SYNC_TOPIC_CONFIGS = (
    "cleanup.policy", "compression.type", "delete.retention.ms", "max.compaction.lag.ms",
    "max.message.bytes", "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "retention.bytes",
    "retention.ms", "segment.bytes", "segment.ms",
)
NEVER_SYNCED_CONFIGS = ("message.timestamp.type", "min.insync.replicas", "unclean.leader.election.enable",
                        "follower.replication.throttled.replicas", "leader.replication.throttled.replicas")
