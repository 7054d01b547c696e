"""Mirror definitions: ``dags/mirrors.yaml`` (or ``$EOSMIRROR_CONFIG``), typed and validated on load.

Every error names the file, the mirror, the field, the bad value and what is allowed. Unknown keys
are errors (a misspelt ``max_records_per_partiton`` must not silently mean "no limit").

File shape::

    defaults:            # optional, merged under every mirror
      slots: 2
    mirrors:
      - name: orders
        source: {local: source}            # or {connection: <airflow conn id>} or {config: {...}}
        target: {connection: kafka_dr}
        topics: ["orders\\..*"]
        ...
"""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from eosmirror import paths
from eosmirror.errors import ConfigError

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
ENV_REF_RE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
POLICIES = ("identity", "prefix")
DELIVERIES = ("exactly_once", "at_least_once")
TRUNCATION_POLICIES = ("fail", "skip_to_log_start")
LOCAL_CLUSTERS = ("source", "target")

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


def default_config_path() -> Path:
    return Path(os.environ.get("EOSMIRROR_CONFIG") or paths.REPO_ROOT / "dags" / "mirrors.yaml")


@dataclass(frozen=True)
class ClusterRef:
    """Where a cluster's client settings come from. Exactly one of the three is set."""

    local: str | None = None           # an embedded local cluster: "source" or "target"
    connection: str | None = None      # an Airflow connection id (type kafka; librdkafka config in extra)
    config: Mapping[str, Any] | None = None  # inline librdkafka settings; secrets only as ${ENV_VAR}

    def describe(self) -> str:
        if self.local:
            return f"local cluster {self.local!r}"
        if self.connection:
            return f"connection {self.connection!r}"
        return "inline config"


@dataclass(frozen=True)
class AirflowSettings:
    schedule: str | None = "*/15 * * * *"  # cron for a data-interval timetable; null = manual only
    start_date: dt.datetime = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    catchup: bool = False
    retries: int = 2
    owner: str = "data-platform"
    spark_conn_id: str = "spark_default"
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class MirrorConfig:
    name: str
    source: ClusterRef
    target: ClusterRef
    topics: tuple[str, ...]
    topics_exclude: tuple[str, ...] = ()
    replication_policy: str = "identity"
    source_alias: str | None = None
    target_alias: str | None = None
    slots: int = 2
    delivery: str = "exactly_once"
    max_records_per_partition: int | None = None
    max_bytes_per_slot: int | None = None
    max_transaction_seconds: float = 30.0
    start_from: str | dt.datetime = "earliest"
    on_truncation: str = "fail"
    sync_topic_configs: tuple[str, ...] = DEFAULT_SYNC_TOPIC_CONFIGS
    target_replication_factor: int = -1
    transactional_id_prefix: str = "eosmirror"
    progress_group: str = ""
    source_consumer: Mapping[str, Any] = field(default_factory=dict)
    target_producer: Mapping[str, Any] = field(default_factory=dict)
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    airflow: AirflowSettings = field(default_factory=AirflowSettings)

    def with_bounds(self, max_records_per_partition: int | None = None,
                    max_bytes_per_slot: int | None = None) -> "MirrorConfig":
        """This mirror with per-run bounds overridden (None keeps the configured one)."""
        return replace(
            self,
            max_records_per_partition=(max_records_per_partition if max_records_per_partition is not None
                                       else self.max_records_per_partition),
            max_bytes_per_slot=max_bytes_per_slot if max_bytes_per_slot is not None else self.max_bytes_per_slot)

    @property
    def transaction_timeout_ms(self) -> int:
        """Broker-side transaction timeout: twice the copy budget plus room for flush and commit.

        A librdkafka producer whose transaction outlives this is fenced (KIP-588 unsupported), so
        the copy loop stops at ``max_transaction_seconds`` and commits well before it.
        """
        return int((2 * self.max_transaction_seconds + 30) * 1000)


@dataclass(frozen=True)
class MirrorsFile:
    path: Path
    mirrors: tuple[MirrorConfig, ...]

    def get(self, name: str) -> MirrorConfig:
        for mirror in self.mirrors:
            if mirror.name == name:
                return mirror
        known = ", ".join(m.name for m in self.mirrors) or "none"
        raise ConfigError(f"{self.path}: no mirror named {name!r} (configured: {known})")

    def names(self) -> list[str]:
        return [m.name for m in self.mirrors]


# --- validation -------------------------------------------------------------------------------------

class _Field:
    """Reads one field of one mirror and raises errors that say exactly what is wrong."""

    def __init__(self, path: Path, mirror: str, raw: Mapping[str, Any]):
        self.path, self.mirror, self.raw = path, mirror, raw

    def fail(self, key: str, value: Any, allowed: str) -> ConfigError:
        return ConfigError(f"{self.path}: mirror {self.mirror!r}: field `{key}`: {value!r} is not allowed; "
                           f"expected {allowed}")

    def integer(self, key: str, default: Any, low: int, high: int, optional: bool = False) -> Any:
        value = self.raw.get(key, default)
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            what = f"an integer from {low} to {high}" + (" or null" if optional else "")
            raise self.fail(key, value, what)
        return value

    def number(self, key: str, default: float, low: float, high: float) -> float:
        value = self.raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            raise self.fail(key, value, f"a number of seconds from {low} to {high}")
        return float(value)

    def choice(self, key: str, default: str, choices: tuple[str, ...]) -> str:
        value = self.raw.get(key, default)
        if value not in choices:
            raise self.fail(key, value, "one of " + ", ".join(choices))
        return value

    def name(self, key: str, default: str | None, optional: bool = False) -> str | None:
        value = self.raw.get(key, default)
        if value is None and optional:
            return None
        if not isinstance(value, str) or not NAME_RE.match(value):
            raise self.fail(key, value, "a name of letters, digits, '.', '_' or '-' (at most 100 characters)")
        return value

    def regex_list(self, key: str, required: bool) -> tuple[str, ...]:
        value = self.raw.get(key, [] if not required else None)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or (required and not value) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, value, "a non-empty list of regular expressions" if required
                            else "a list of regular expressions")
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise self.fail(key, pattern, f"a valid regular expression ({exc})") from None
        return tuple(value)

    def mapping(self, key: str) -> dict[str, Any]:
        value = self.raw.get(key, {}) or {}
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise self.fail(key, value, "a mapping of librdkafka/Spark property names to values")
        return dict(value)


def _cluster_ref(f: _Field, key: str) -> ClusterRef:
    value = f.raw.get(key)
    allowed = ("a mapping with exactly one of `local: source|target`, `connection: <airflow conn id>`, "
               "`config: {bootstrap.servers: ...}`")
    if not isinstance(value, dict) or len(value) != 1:
        raise f.fail(key, value, allowed)
    (kind, inner), = value.items()
    if kind == "local":
        if inner not in LOCAL_CLUSTERS:
            raise f.fail(f"{key}.local", inner, "source or target")
        return ClusterRef(local=inner)
    if kind == "connection":
        if not isinstance(inner, str) or not NAME_RE.match(inner):
            raise f.fail(f"{key}.connection", inner, "an Airflow connection id")
        return ClusterRef(connection=inner)
    if kind == "config":
        if not isinstance(inner, dict) or "bootstrap.servers" not in inner:
            raise f.fail(f"{key}.config", inner, "librdkafka settings including bootstrap.servers")
        _refuse_inline_secrets(f, f"{key}.config", inner)
        return ClusterRef(config=dict(inner))
    raise f.fail(key, value, allowed)


def _refuse_inline_secrets(f: _Field, key: str, settings: Mapping[str, Any]) -> None:
    from eosmirror.clients import is_secret_key

    for name, value in settings.items():
        if is_secret_key(name) and not (isinstance(value, str) and ENV_REF_RE.match(value)):
            # Never echo the value: it may be a real secret.
            raise ConfigError(f"{f.path}: mirror {f.mirror!r}: field `{key}.{name}` holds a secret inline; "
                              f"secrets never go into the mirror file. Use an Airflow connection, or write "
                              f"`{name}: ${{ENV_VAR}}` and export ENV_VAR")


def _start_from(f: _Field) -> str | dt.datetime:
    value = f.raw.get("start_from", "earliest")
    if value in ("earliest", "latest"):
        return value
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    if isinstance(value, str):
        try:
            parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)
        except ValueError:
            pass
    raise f.fail("start_from", value, "earliest, latest or an ISO-8601 timestamp such as 2026-01-31T00:00:00Z")


_AIRFLOW_KEYS = {"schedule", "start_date", "catchup", "retries", "owner", "spark_conn_id", "tags"}


def _airflow(f: _Field) -> AirflowSettings:
    raw = f.raw.get("airflow", {}) or {}
    if not isinstance(raw, dict):
        raise f.fail("airflow", raw, "a mapping with " + ", ".join(sorted(_AIRFLOW_KEYS)))
    unknown = sorted(set(raw) - _AIRFLOW_KEYS)
    if unknown:
        raise f.fail(f"airflow.{unknown[0]}", raw[unknown[0]], "no such key; known: " + ", ".join(sorted(_AIRFLOW_KEYS)))
    sub = _Field(f.path, f.mirror, raw)
    defaults = AirflowSettings()
    schedule = raw.get("schedule", defaults.schedule)
    if schedule is not None:
        if not isinstance(schedule, str) or len(schedule.split()) != 5:
            raise f.fail("airflow.schedule", schedule, "a 5-field cron expression (for example '*/15 * * * *') or null")
    start = raw.get("start_date", defaults.start_date)
    if isinstance(start, dt.date) and not isinstance(start, dt.datetime):
        start = dt.datetime(start.year, start.month, start.day)
    if isinstance(start, str):
        try:
            start = dt.datetime.fromisoformat(start.replace("Z", "+00:00"))
        except ValueError:
            raise f.fail("airflow.start_date", start, "an ISO-8601 date or timestamp") from None
    if not isinstance(start, dt.datetime):
        raise f.fail("airflow.start_date", start, "an ISO-8601 date or timestamp")
    catchup = raw.get("catchup", defaults.catchup)
    if not isinstance(catchup, bool):
        raise f.fail("airflow.catchup", catchup, "true or false")
    tags = raw.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise f.fail("airflow.tags", tags, "a list of strings")
    owner = raw.get("owner", defaults.owner)
    if not isinstance(owner, str) or not owner:
        raise f.fail("airflow.owner", owner, "a non-empty string")
    return AirflowSettings(
        schedule=schedule,
        start_date=start if start.tzinfo else start.replace(tzinfo=dt.timezone.utc),
        catchup=catchup,
        retries=sub.integer("retries", defaults.retries, 0, 20),
        owner=owner,
        spark_conn_id=sub.name("spark_conn_id", defaults.spark_conn_id),
        tags=tuple(tags),
    )


_MIRROR_KEYS = {
    "name", "source", "target", "topics", "topics_exclude", "replication_policy", "source_alias",
    "target_alias", "slots", "delivery", "max_records_per_partition", "max_bytes_per_slot",
    "max_transaction_seconds", "start_from", "on_truncation", "sync_topic_configs",
    "target_replication_factor", "transactional_id_prefix", "progress_group", "source_consumer",
    "target_producer", "spark_conf", "airflow",
}


def parse_mirror(raw: Any, path: Path, index: int) -> MirrorConfig:
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: mirrors[{index}] is {type(raw).__name__}, expected a mapping with at least "
                          f"name, source, target and topics")
    label = raw.get("name") if isinstance(raw.get("name"), str) else f"mirrors[{index}]"
    f = _Field(path, label, raw)
    unknown = sorted(set(raw) - _MIRROR_KEYS)
    if unknown:
        raise f.fail(unknown[0], raw[unknown[0]], "no such field; known fields: " + ", ".join(sorted(_MIRROR_KEYS)))
    for required in ("name", "source", "target", "topics"):
        if required not in raw:
            raise ConfigError(f"{path}: mirror {label!r}: field `{required}` is missing")
    name = f.name("name", None)
    policy = f.choice("replication_policy", "identity", POLICIES)
    source_alias = f.name("source_alias", None, optional=True)
    if policy == "prefix" and not source_alias:
        raise f.fail("source_alias", source_alias, "a cluster alias (required by replication_policy: prefix)")
    sync_configs = raw.get("sync_topic_configs", list(DEFAULT_SYNC_TOPIC_CONFIGS))
    if not isinstance(sync_configs, list) or not all(isinstance(c, str) for c in sync_configs):
        raise f.fail("sync_topic_configs", sync_configs, "a list of topic config names")
    for c in sync_configs:
        if c in NEVER_SYNCED_CONFIGS:
            raise f.fail("sync_topic_configs", c, "a topic config other than " + ", ".join(NEVER_SYNCED_CONFIGS)
                         + " (these are owned by the target cluster or by the mirror)")
    for role in ("source_consumer", "target_producer"):
        _refuse_inline_secrets(f, role, f.mapping(role))
    spark_conf = f.mapping("spark_conf")
    for key, value in spark_conf.items():
        if not key.startswith("spark."):
            raise f.fail(f"spark_conf.{key}", value, "a Spark property whose name starts with 'spark.'")
    mirror = MirrorConfig(
        name=name,
        source=_cluster_ref(f, "source"),
        target=_cluster_ref(f, "target"),
        topics=f.regex_list("topics", required=True),
        topics_exclude=f.regex_list("topics_exclude", required=False),
        replication_policy=policy,
        source_alias=source_alias,
        target_alias=f.name("target_alias", None, optional=True),
        slots=f.integer("slots", 2, 1, 1024),
        delivery=f.choice("delivery", "exactly_once", DELIVERIES),
        max_records_per_partition=f.integer("max_records_per_partition", None, 1, 10**12, optional=True),
        max_bytes_per_slot=f.integer("max_bytes_per_slot", None, 1024, 10**15, optional=True),
        max_transaction_seconds=f.number("max_transaction_seconds", 30.0, 1.0, 300.0),
        start_from=_start_from(f),
        on_truncation=f.choice("on_truncation", "fail", TRUNCATION_POLICIES),
        sync_topic_configs=tuple(sync_configs),
        target_replication_factor=f.integer("target_replication_factor", -1, -1, 32),
        transactional_id_prefix=f.name("transactional_id_prefix", "eosmirror"),
        progress_group=f.name("progress_group", f"eosmirror.{name}"),
        source_consumer=f.mapping("source_consumer"),
        target_producer=f.mapping("target_producer"),
        spark_conf={k: str(v) for k, v in spark_conf.items()},
        airflow=_airflow(f),
    )
    # Fail at load, not at run, when a role override contradicts exactly-once.
    from eosmirror import clients

    clients.check_overrides(mirror, where=f"{path}: mirror {name!r}")
    return mirror


def parse(document: Any, path: Path) -> MirrorsFile:
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: expected a mapping with a `mirrors` list, found {type(document).__name__}")
    unknown = sorted(set(document) - {"mirrors", "defaults"})
    if unknown:
        raise ConfigError(f"{path}: unknown top-level key `{unknown[0]}`; expected `mirrors` and optional `defaults`")
    defaults = document.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise ConfigError(f"{path}: `defaults` must be a mapping of mirror fields")
    raw_mirrors = document.get("mirrors") or []
    if not isinstance(raw_mirrors, list):
        raise ConfigError(f"{path}: `mirrors` must be a list of mirror definitions")
    mirrors = []
    for index, raw in enumerate(raw_mirrors):
        merged = {**defaults, **raw} if isinstance(raw, dict) else raw
        mirrors.append(parse_mirror(merged, path, index))
    names = [m.name for m in mirrors]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise ConfigError(f"{path}: mirror name {duplicate!r} is defined more than once; names must be unique")
    return MirrorsFile(path=path, mirrors=tuple(sorted(mirrors, key=lambda m: m.name)))


def load(path: str | Path | None = None) -> MirrorsFile:
    import yaml

    path = Path(path) if path else default_config_path()
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read the mirror definitions {path}: {exc.strerror}; set EOSMIRROR_CONFIG or "
                          f"pass --config") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    return parse(document, path)
