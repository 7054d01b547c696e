"""The mirror's lag topic on the target: lag samples and run outcomes, kept ``lag.history_days``.

``eosmirror-lag.<mirror>.internal``: one partition, ``cleanup.policy=delete``, time-retained, so the
history survives restarts of Airflow and of the brokers' clients, stays bounded without a clean-up
job, and lives next to the data it describes (the target cluster), readable without Airflow. A
window of it is read from the offset ``offsets_for_times`` gives for the window's start.

Record kinds, by key: ``sample`` (one per mirror and evaluation, see core/lag.MirrorSample),
``run`` (one per mirror run, written by the run itself: its outcome), ``observed`` (what a run saw of
the source), ``readiness`` (one per readiness report, core/readiness.Report) and ``verify`` (one per
`eosmirror verify`, core/readiness.VerifyResult).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from eosmirror.core import naming
from eosmirror.core.lag import OBSERVED_KEY, RUN_KEY, SAMPLE_KEY, MirrorSample, RunOutcome, SourceObservation
from eosmirror.core.readiness import REPORT_KEY, VERIFY_KEY, Report, VerifyResult
from eosmirror.kafka import calls, clients, readers
from eosmirror.kafka.cluster import Cluster
from eosmirror.kafka.retry import retry_until

log = logging.getLogger(__name__)
DAY_MS = 86_400_000


def topic_config(history_days: int) -> dict[str, str]:
    return {"cleanup.policy": "delete", "retention.ms": str(history_days * DAY_MS),
            "segment.ms": str(min(history_days * DAY_MS, DAY_MS))}   # whole segments expire: keep them a day


def exists(admin: Any, topic: str, timeout: float = 10.0) -> bool:
    """Asked through the admin client, whose metadata request never auto-creates the topic."""
    meta = admin.list_topics(topic=topic, timeout=timeout)
    found = meta.topics.get(topic)
    return found is not None and found.error is None


def ensure_topic(target: Cluster, mirror: str, history_days: int, replication_factor: int,
                 timeout: float = 10.0) -> None:
    """Create the lag topic when missing (a concurrent creator is fine)."""
    from confluent_kafka.admin import NewTopic

    topic = naming.lag_topic(mirror)
    if exists(target.admin, topic, timeout):
        return
    future = target.admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=replication_factor,
                                           config=topic_config(history_days))],
                                 request_timeout=calls.DEFAULT_TIMEOUT)[topic]
    try:
        future.result(timeout=calls.DEFAULT_TIMEOUT)
        log.info("created lag topic %s (kept %d days)", topic, history_days)
    except Exception as exc:  # noqa: BLE001
        if calls.error_name(exc) != "TOPIC_ALREADY_EXISTS":
            raise calls.translate(exc, f"create the lag topic {topic}", target.label,
                                  f"Create on topic {topic}") from None
    # A topic just created has no leader for a moment.
    retry_until(15, lambda: _leader_or_raise(target.admin, topic), lambda exc: isinstance(exc, LookupError), pause=0.2)


def _leader_or_raise(admin: Any, topic: str) -> None:
    meta = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
    if meta is None or meta.error is not None or not meta.partitions or meta.partitions[0].leader < 0:
        raise LookupError(topic)


def append(target: Cluster, mirror: str, key: bytes, values: list[bytes], timeout: float = 15.0) -> None:
    """Write records to the lag topic and wait until they are acknowledged."""
    append_keyed(target, mirror, [(key, value) for value in values], timeout)


def append_keyed(target: Cluster, mirror: str, records: list[tuple[bytes, bytes]], timeout: float = 15.0) -> None:
    """Write (key, value) records to the lag topic in one flush and wait until they are acknowledged."""
    topic = naming.lag_topic(mirror)
    errors: list[Any] = []      # the KafkaErrors, so that a refusal is named with the ACL it lacks

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    producer = clients.observation_producer(target.settings, f"eosmirror-{mirror}-lag-writer",
                                            extra={"allow.auto.create.topics": False, "compression.type": "lz4"})
    for key, value in records:
        producer.produce(topic, value=value, key=key, partition=0, on_delivery=on_delivery)
    left = producer.flush(timeout)
    if left or errors:
        from confluent_kafka import KafkaException

        raise calls.translate(KafkaException(errors[0]) if errors else Exception(
                                  f"{left} records unacknowledged after {timeout} s"),
                              f"write to the lag topic {topic}", target.label, f"Write on topic {topic}")


def _records_since(target: Cluster, mirror: str, since_ms: int, group: str) -> list[Any]:
    """The lag topic's records at or after ``since_ms`` (by record timestamp), oldest first."""
    from confluent_kafka import TopicPartition

    topic = naming.lag_topic(mirror)
    consumer = clients.plain_consumer(target.settings, f"eosmirror-{mirror}-lag-reader", group_id=group)
    try:
        found = consumer.offsets_for_times([TopicPartition(topic, 0, max(0, since_ms))], timeout=15)[0]
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=15, cached=False)
    except Exception as exc:  # noqa: BLE001
        if calls.error_name(exc) in calls.MISSING_TOPIC:
            return []
        raise calls.translate(exc, f"read the lag topic {topic}", target.label, f"Read on topic {topic}") from None
    finally:
        consumer.close()
    start = found.offset if found.offset >= 0 else high   # -1: nothing that recent
    return list(readers.read_range(target, topic, 0, max(start, low), high,
                                   client_id=f"eosmirror-{mirror}-lag-reader", group_id=group))


def read_since(target: Cluster, mirror: str, since_ms: int, group: str) -> tuple[list[MirrorSample], list[RunOutcome]]:
    """Samples and run outcomes recorded at or after ``since_ms`` (by record timestamp), oldest first."""
    samples, runs = [], []
    for record in _records_since(target, mirror, since_ms, group):
        try:
            if record.key == SAMPLE_KEY and record.value:
                samples.append(MirrorSample.decode(record.value))
            elif record.key == RUN_KEY and record.value:
                runs.append(RunOutcome.decode(record.value))
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("%s: skipped record %d of %s that is not a lag record (%s)", target.label, record.offset,
                        naming.lag_topic(mirror), exc)
    return samples, runs


def read_reports(target: Cluster, mirror: str, since_ms: int, group: str) -> list[Report]:
    """The readiness reports (core/readiness.Report, key ``readiness``) recorded at or after ``since_ms``."""
    found = []
    for record in _records_since(target, mirror, since_ms, group):
        if record.key == REPORT_KEY and record.value:
            try:
                found.append(Report.decode(record.value))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("%s: skipped record %d of %s that is not a readiness report (%s)", target.label,
                            record.offset, naming.lag_topic(mirror), exc)
    return found


def latest_report(target: Cluster, mirror: str, now_ms: int, group: str) -> Report | None:
    """The newest readiness report of the last day, else of the last week; None when none was recorded."""
    for back_ms in (86_400_000, 7 * 86_400_000):
        found = read_reports(target, mirror, now_ms - back_ms, group)
        if found:
            return found[-1]
    return None


def latest_verify(target: Cluster, mirror: str, now_ms: int, group: str) -> VerifyResult | None:
    """The newest recorded verify of the last week; None when none was recorded."""
    found = None
    for record in _records_since(target, mirror, now_ms - 7 * DAY_MS, group):
        if record.key == VERIFY_KEY and record.value:
            try:
                found = VerifyResult.decode(record.value)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("%s: skipped record %d of %s that is not a verify result (%s)", target.label,
                            record.offset, naming.lag_topic(mirror), exc)
    return found


def now_ms() -> int:
    return int(time.time() * 1000)


def newest_observations(target: Cluster, mirror: str, now_ms: int, group: str
                        ) -> tuple[list[MirrorSample], list[SourceObservation]]:
    """The lag samples and the runs' source observations of the last hour, else of the last day,
    else of the last week (the lag topic's default history): a promotion needs the newest, and reads
    no more than it must (a week of samples of a large mirror is hundreds of megabytes)."""
    for back_ms in (3_600_000, 86_400_000, 7 * 86_400_000):
        samples, observed = [], []
        for record in _records_since(target, mirror, now_ms - back_ms, group):
            if record.key == OBSERVED_KEY and record.value:
                observed.append(SourceObservation.decode(record.value))
            elif record.key == SAMPLE_KEY and record.value:
                samples.append(MirrorSample.decode(record.value))
        if samples or observed:
            return samples, observed
    return [], []
