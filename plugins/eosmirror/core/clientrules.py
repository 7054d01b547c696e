"""What exactly-once forces on each Kafka client role, and the check that refuses a contradiction.

Pure rules (no client is built here): ``kafka.clients`` builds the clients with them, and the config
loader refuses a mirror definition whose role overrides contradict them, at load time.
"""

from __future__ import annotations

from typing import Any, Mapping

from eosmirror.core.errors import ConfigError

# (forced value, accepted spellings of it, why exactly-once needs it)
SOURCE_CONSUMER_FORCED: dict[str, tuple[Any, set[str], str]] = {
    "isolation.level": ("read_committed", {"read_committed"},
                        "records of aborted or still-open source transactions must never be mirrored"),
    "enable.auto.commit": (False, {"false"},
                           "progress is committed inside the target transaction, never by the consumer"),
    "enable.auto.offset.store": (False, {"false"}, "the consumer's own offset store is never used"),
    "auto.offset.reset": ("error", {"error"},
                          "a start offset whose data was deleted must fail loudly instead of jumping "
                          "to another offset and skipping records"),
    "enable.partition.eof": (True, {"true"},
                             "a range that ends on transaction markers or aborted records is only "
                             "known to be finished by the end-of-partition event"),
}

TRANSACTIONAL_PRODUCER_FORCED: dict[str, tuple[Any, set[str], str]] = {
    "enable.idempotence": (True, {"true"}, "transactions require the idempotent producer"),
    "acks": ("all", {"all", "-1"}, "a committed transaction must survive the loss of a broker"),
    # No global delivery callback: a failed delivery fails commit_transaction() (abortable), and the
    # copy asks for a report only for the first record per partition (the exact base offset).
    "delivery.report.only.error": (False, {"false"},
                                   "the first record's delivery report gives the exact target offset"),
}

IDEMPOTENT_PRODUCER_FORCED: dict[str, tuple[Any, set[str], str]] = {
    "enable.idempotence": (True, {"true"}, "retries must not duplicate records"),
    "acks": ("all", {"all", "-1"}, "progress is committed only for records no broker loss can undo"),
    "delivery.report.only.error": (True, {"true"}, "only failed deliveries are reported"),
}

# Defaults (not forced) for every producer the mirror builds. librdkafka connects only to brokers it has a
# request for (sparse connections); a producer's first InitProducerId then often finds no broker up ("No
# brokers available for Transactions") and librdkafka asks again only after a fixed 500 ms. Connecting to
# every broker at once removes that wait from fencing and from a follow run's hand-over (figures:
# docs/results.md, "Figures behind the code"). Cost: one connection per target
# broker per producer; a slot's producer writes to most of them anyway.
# And no topic is ever created by a producer (librdkafka's producer default asks the broker to auto-create a
# topic it writes or asks metadata for): a mirror writes only topics it prepared, so a target topic deleted
# mid-run must fail the slot loudly, never come back with the broker's default partition count (a slot also
# asks each chunk's target topics' metadata ahead of its first record: recordloop._learn_leaders).
PRODUCER_DEFAULTS: dict[str, Any] = {"enable.sparse.connections": False, "allow.auto.create.topics": False}

# Defaults (not forced) for every admin client: with sparse connections an admin client's first request
# waits for its broker connection, and a run's driver starts several (figures:
# docs/results.md, "Figures behind the code"). Cost: one connection per broker per admin
# client, for seconds.
ADMIN_DEFAULTS: dict[str, Any] = {"enable.sparse.connections": False}

# Defaults (not forced: the cluster's or the mirror's own setting wins) for every consumer that reads ranges.
# librdkafka stops fetching a partition whose local queue passed queued.min.messages (100,000) or
# queued.max.messages.kbytes (64 MB) and, since 2.1, waits fetch.queue.backoff.ms (1,000 ms by default) before it
# fetches that partition again: a copy that drains the queue in a fraction of that second then idles for the rest.
# A short backoff keeps it fetching, with the same peak memory (the queue bounds stay as they are; figures:
# docs/results.md, "Figures behind the code").
READER_CONSUMER_DEFAULTS: dict[str, Any] = {"fetch.queue.backoff.ms": 10}

# And for the readers of internal topics and of verification, which read a range to its end: a range ending
# on a transaction marker is only known complete by the end-of-partition event, which a fetch at the log's end
# delivers after fetch.wait.max.ms (500 ms by default). Each such read cost half a second of every run
# (reading the generation, the syncs snapshot, the lag history). Also for the source consumer of a bounded
# run's slot: a chunked slot's next chunk is assigned while the fetch of the last one is parked at the log's end,
# and its first fetch waited for that one (0.5 s a chunk: a 1,000-topic first run read each chunk of 50,000
# records in 0.5 s, 0.06-0.10 s with 20 ms). Not for a follow run's slot (below): it would multiply the fetch
# requests of an idle follower.
RANGE_READER_DEFAULTS: dict[str, Any] = {"fetch.wait.max.ms": 20}

# And for the source consumer of a follow run's slot: at the log's end the broker parks a fetch until the
# source's last stable offset moves or fetch.wait.max.ms (500 ms by default) passes. A follower reads on
# without pausing, so a parked fetch returns as soon as a source transaction commits; the shorter wait
# bounds how late a fetch sent just after a seek (a rewind after an abort, the start of following) can be
# (figures: docs/results.md, "Figures behind the code"). Cost: up to 10 fetch requests a
# second of an idle follower (2 by default).
FOLLOW_READER_DEFAULTS: dict[str, Any] = {"fetch.wait.max.ms": 100}

# And for the source consumer of every slot (not the internal readers): librdkafka keeps one fetch in flight per
# broker, and a fetch returns at most max.partition.fetch.bytes (1 MB by default) per partition, so a slot of four
# partitions read at most 4 MB per round trip: 40 MB/s a slot with the source 100 ms away. 8 MB per partition
# (fetch.max.bytes, 50 MB, still bounds a response; the prefetch queue stays 64 MB): 2 KB records with the source
# 100 ms away copied in 2.66 s of slot time instead of 5.89 (figures: docs/results.md, "Across distance").
SOURCE_CONSUMER_DEFAULTS: dict[str, Any] = {"max.partition.fetch.bytes": 8 * 1024 * 1024}

# Keys the mirror owns; a user must not set them at all.
OWNED_KEYS = {
    "transactional.id": "the mirror derives one transactional id per slot from transactional_id_prefix",
    "group.id": "the progress group is set by the mirror's `progress_group` field",
}

# librdkafka warns when a client receives a property of another role; we drop such properties
# from the shared cluster config so that the logs stay readable.
CONSUMER_ONLY_PREFIXES = ("fetch.", "isolation.level", "auto.offset.reset", "enable.auto.commit",
                           "enable.partition.eof", "queued.", "max.poll.interval.ms", "session.timeout.ms",
                           "heartbeat.interval.ms", "partition.assignment.strategy", "check.crcs",
                           "enable.auto.offset.store", "group.", "auto.commit.interval.ms")
PRODUCER_ONLY_PREFIXES = ("acks", "linger.ms", "batch.", "queue.buffering.", "compression.", "transaction.",
                           "enable.idempotence", "message.timeout.ms", "delivery.", "retries",
                           "request.required.acks", "sticky.partitioning", "partitioner",
                           "enable.gapless.guarantee", "message.send.max.retries", "retry.backoff.ms")


def drop_foreign(conf: Mapping[str, Any], foreign: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in conf.items() if not k.startswith(foreign)}


def _spelling(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip().lower()


def merge_forced(role: str, user: Mapping[str, Any], forced: Mapping[str, tuple[Any, set[str], str]],
                  where: str) -> dict[str, Any]:
    merged = dict(user)
    for key, why in OWNED_KEYS.items():
        if key in user:
            raise ConfigError(f"{where}: `{key}` must not be set for the {role}: {why}. Remove it.")
    for key, (value, accepted, why) in forced.items():
        if key in user and _spelling(user[key]) not in accepted:
            raise ConfigError(f"{where}: `{key}: {user[key]}` contradicts exactly-once copying; the {role} "
                              f"needs `{key}: {_spelling(value)}` because {why}. Remove the setting.")
        merged[key] = value
    return merged



def check_overrides(mirror: Any, where: str) -> None:
    """Refuse, at config load, role overrides in a mirror definition that contradict its delivery mode."""
    merge_forced("source consumer", mirror.source_consumer, SOURCE_CONSUMER_FORCED, f"{where}: source_consumer")
    forced = (TRANSACTIONAL_PRODUCER_FORCED if mirror.delivery == "exactly_once"
              else IDEMPOTENT_PRODUCER_FORCED)
    merge_forced("target producer", mirror.target_producer, forced, f"{where}: target_producer")
