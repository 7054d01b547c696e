"""Mirror definitions: ``dags/mirrors.yaml`` (or ``$EOSMIRROR_CONFIG``), typed and validated on load.

Every field is declared once, on the frozen dataclass that holds it (:class:`MirrorConfig`,
:class:`AirflowSettings`, :class:`ClusterRef`): its name, type and default, a *kind* that reads and
checks the YAML value (bounds, choices, formats) and a one-line meaning. The loader, the error
messages and the Markdown field reference (:func:`field_reference`, the table in docs/configuration.md) are all derived
from those declarations, so they cannot drift apart.

Every error names the file, the mirror, the field (dotted when nested: ``airflow.schedule``), the bad
value and what is allowed. A value under a secret-looking key is never echoed. Unknown keys are
errors that suggest the nearest known name (a misspelt ``max_records_per_partiton`` must not silently
mean "no limit"), and so is a key written twice in one YAML mapping (PyYAML would keep the last).

Plain dataclasses rather than pydantic: the messages above (our wording, secret-safe values,
suggestions) would need a translation of every pydantic error type anyway, and ``core`` stays
standard-library only (it is shipped to executors on ``--py-files``).

File shape::

    defaults:            # optional, merged under every mirror (a mirror's own field replaces it whole)
      slots: 2
    mirrors:
      - name: orders
        source: {local: source}            # or {connection: <airflow conn id>} or {config: {...}}
        target: {connection: kafka_dr}
        topics: ["orders\\..*"]
        ...
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
import functools
import re
from dataclasses import MISSING, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Collection, Iterator, Mapping

from eosmirror.core import secrets
from eosmirror.core.errors import ConfigError

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
ENV_REF_RE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
POLICIES = ("identity", "prefix")
DELIVERIES = ("exactly_once", "at_least_once")
TRUNCATION_POLICIES = ("fail", "skip_to_log_start")
LOCAL_CLUSTERS = ("source", "target")
# Airflow's cron presets (airflow.sdk CronMixin maps them before croniter sees them).
CRON_PRESETS = {"@hourly": "0 * * * *", "@daily": "0 0 * * *", "@weekly": "0 0 * * 0",
                "@monthly": "0 0 1 * *", "@quarterly": "0 0 1 */3 *", "@yearly": "0 0 1 1 *"}

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
    # Imported here: eosmirror.paths is not in the executors' zip, and only loaders need it.
    from eosmirror import paths

    return paths.default_mirrors_file()


class FrozenMap(Mapping[str, Any]):
    """A read-only mapping of client or Spark settings.

    Keeps a "frozen" MirrorConfig really immutable, and hashable: the loader admits only scalar
    values (strings, numbers, booleans). Compares equal to a dict with the same items.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | None = None):
        self._items = dict(items or {})

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def __repr__(self) -> str:
        return f"FrozenMap({self._items!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return FrozenMap, (self._items,)


# --- how a field is read: kinds ----------------------------------------------------------------------

class _Invalid(Exception):
    """A value is wrong. ``path`` is relative to where it is caught; each level prefixes its field."""

    def __init__(self, problem: str, *path: str):
        super().__init__(problem)
        self.problem, self.path = problem, tuple(path)

    def under(self, *prefix: str) -> "_Invalid":
        return _Invalid(self.problem, *prefix, *self.path)


def _yaml_word(value: Any) -> str:
    return "null" if value is None else str(value).lower()


def _suggestion(word: Any, known: Collection[str]) -> str:
    close = difflib.get_close_matches(str(word), list(known), n=1) if isinstance(word, str) else []
    return f" (did you mean `{close[0]}`?)" if close else ""


def _bad(value: Any, allowed: str, key: str | None = None, choices: Collection[str] = ()) -> _Invalid:
    """``value`` is not allowed. ``key`` (a settings entry) extends the field path and decides redaction."""
    shown = _yaml_word(value) if value is None or isinstance(value, bool) else repr(secrets.redact(value, key))
    return _Invalid(f"{shown} is not allowed; expected {allowed}{_suggestion(value, choices)}",
                    *((key,) if key is not None else ()))


@dataclass(frozen=True, kw_only=True)
class _Kind:
    """How one field is read from YAML: ``parse`` checks and converts, ``what`` says what passes."""

    allowed: str = ""   # replaces the generated description when the field needs its own words

    def describe(self) -> str:
        raise NotImplementedError

    def what(self) -> str:
        return self.allowed or self.describe()

    def parse(self, value: Any) -> Any:
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class _Int(_Kind):
    low: int
    high: int
    optional: bool = False

    def describe(self) -> str:
        return f"an integer from {self.low} to {self.high}" + (" or null" if self.optional else "")

    def parse(self, value: Any) -> Any:
        if value is None and self.optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not self.low <= value <= self.high:
            raise _bad(value, self.what())
        return value


@dataclass(frozen=True, kw_only=True)
class _Seconds(_Kind):
    low: float
    high: float
    optional: bool = False

    def describe(self) -> str:
        return f"a number of seconds from {float(self.low)} to {float(self.high)}" + (" or null" if self.optional else "")

    def parse(self, value: Any) -> float | None:
        if value is None and self.optional:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not self.low <= value <= self.high:
            raise _bad(value, self.what())
        return float(value)


@dataclass(frozen=True, kw_only=True)
class _Choice(_Kind):
    choices: tuple[str, ...]

    def describe(self) -> str:
        return "one of " + ", ".join(self.choices)

    def parse(self, value: Any) -> str:
        if not isinstance(value, str) or value not in self.choices:
            raise _bad(value, self.what(), choices=self.choices)
        return value


@dataclass(frozen=True, kw_only=True)
class _Name(_Kind):
    optional: bool = False

    def describe(self) -> str:
        return ("a name of letters, digits, '.', '_' or '-' (at most 100 characters)"
                + (" or null" if self.optional else ""))

    def parse(self, value: Any) -> str | None:
        if value is None and self.optional:
            return None
        if not isinstance(value, str) or not NAME_RE.match(value):
            raise _bad(value, self.what())
        return value


DOTTED_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")


@dataclass(frozen=True, kw_only=True)
class _Dotted(_Kind):
    """A dotted Python name ``package.module.function``; only its form is checked here (importing
    user code at config load would run it in every DAG parse)."""

    def describe(self) -> str:
        return "a dotted Python name such as `mypackage.alerts.on_lag` or null"

    def parse(self, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or not DOTTED_NAME_RE.match(value):
            raise _bad(value, self.what())
        return value


@dataclass(frozen=True, kw_only=True)
class _Text(_Kind):
    def describe(self) -> str:
        return "a non-empty string"

    def parse(self, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise _bad(value, self.what())
        return value


@dataclass(frozen=True, kw_only=True)
class _Separator(_Kind):
    def describe(self) -> str:
        return "1 to 5 of the characters a topic name may hold (letters, digits, '.', '_', '-')"

    def parse(self, value: Any) -> str:
        if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9._-]{1,5}", value):
            raise _bad(value, self.what())
        return value


@dataclass(frozen=True, kw_only=True)
class _Flag(_Kind):
    def describe(self) -> str:
        return "true or false"

    def parse(self, value: Any) -> bool:
        if not isinstance(value, bool):
            raise _bad(value, self.what())
        return value


@dataclass(frozen=True, kw_only=True)
class _Strings(_Kind):
    noun: str = "strings"
    refused: tuple[str, ...] = ()
    refused_why: str = ""

    def describe(self) -> str:
        return f"a list of {self.noun}"

    def parse(self, value: Any) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _bad(value, self.what())
        for item in value:
            if item in self.refused:
                raise _bad(item, f"a topic config other than {', '.join(self.refused)} ({self.refused_why})")
        return tuple(value)


@dataclass(frozen=True, kw_only=True)
class _Patterns(_Kind):
    required: bool
    noun: str = "topic"

    def describe(self) -> str:
        return ("a non-empty list of regular expressions" if self.required
                else "a list of regular expressions") + f" (each must match a whole {self.noun} name)"

    def parse(self, value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or (self.required and not value) or not all(isinstance(v, str) for v in value):
            raise _bad(value, self.what())
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                # As written (one level of escaping), not a repr that doubles every backslash.
                raise _Invalid(f"`{pattern}` is not allowed; expected a valid regular expression ({exc})") from None
        return tuple(value)


@dataclass(frozen=True, kw_only=True)
class _Time(_Kind):
    """A timestamp, made timezone-aware (UTC when the file gives no zone); ``words`` pass unchanged."""

    words: tuple[str, ...] = ()

    def describe(self) -> str:
        return "an ISO-8601 date or timestamp"

    def parse(self, value: Any) -> str | dt.datetime:
        if isinstance(value, str) and value in self.words:
            return value
        parsed = None
        if isinstance(value, dt.datetime):
            parsed = value
        elif isinstance(value, dt.date):   # YAML reads an unquoted 2026-01-31 as a date
            parsed = dt.datetime(value.year, value.month, value.day)
        elif isinstance(value, str):
            try:
                parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                pass
        if parsed is None:
            raise _bad(value, self.what(), choices=self.words)
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


@dataclass(frozen=True, kw_only=True)
class _Cron(_Kind):
    """What airflow.sdk.CronDataIntervalTimetable accepts: a preset, or 5 cron fields croniter can run."""

    def describe(self) -> str:
        return (f"a 5-field cron expression (for example '*/15 * * * *'), one of {', '.join(CRON_PRESETS)}, "
                f"or null (manual runs only)")

    def parse(self, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            raise _bad(value, self.what())
        expression = CRON_PRESETS.get(value.strip(), value)
        if len(expression.split()) != 5:   # croniter would also take 6 or 7 fields; Airflow does not
            raise _bad(value, self.what(), choices=CRON_PRESETS)
        problem = _cron_problem(expression)
        if problem:
            raise _bad(value, f"{self.what()}; {problem}")
        return value


def _cron_problem(expression: str) -> str | None:
    # croniter is what Airflow's cron timetables run on (an Airflow dependency, so always installed).
    from croniter import CroniterBadCronError, CroniterBadDateError, croniter

    try:
        croniter(expression, dt.datetime(2026, 1, 1)).get_next(dt.datetime)
    except CroniterBadCronError as exc:
        return f"croniter refuses it: {exc}"
    except CroniterBadDateError:
        return "it never fires (no such date, e.g. February 30)"
    return None


@dataclass(frozen=True, kw_only=True)
class _Settings(_Kind):
    """A mapping of client or Spark property names to scalar values."""

    spark: bool = False                 # spark.* names; values become strings for --conf
    required: tuple[str, ...] = ()      # names that must be present (bootstrap.servers)
    no_inline_secrets: bool = True

    def describe(self) -> str:
        names = "Spark property names (spark.*)" if self.spark else "librdkafka property names"
        return f"a mapping of {names} to strings, numbers or booleans"

    def parse(self, value: Any) -> FrozenMap:
        if value is None and not self.required:
            return FrozenMap()
        if not isinstance(value, Mapping):
            # Only the type: a string here is often `name=value` text, possibly a secret's.
            shown = "null" if value is None else f"a {type(value).__name__}"
            raise _Invalid(f"{shown} is not allowed; expected {self.what()}")
        if not all(isinstance(k, str) for k in value) or any(k not in value for k in self.required):
            raise _bad(value, self.what())
        for key, item in value.items():
            self._check(key, item)
        if self.spark:   # Spark reads booleans as "true"/"false"
            return FrozenMap({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()})
        return FrozenMap(value)

    def _check(self, key: str, item: Any) -> None:
        if self.no_inline_secrets and secrets.is_secret_key(key) and not (isinstance(item, str) and ENV_REF_RE.match(item)):
            # Never echo the value: it may be a real secret.
            raise _Invalid(f"holds a secret inline; secrets never go into the mirror file. Use an Airflow "
                           f"connection, or write `{key}: ${{ENV_VAR}}` and export ENV_VAR", key)
        if not isinstance(item, (str, int, float)):   # bool is an int
            raise _bad(item, "a string, number or boolean", key)
        if self.spark and not key.startswith("spark."):
            raise _Invalid(f"the name `{key}` is not a Spark property; expected a name that starts with "
                           f"'spark.' (did you mean `spark.{key}`?)", key)


@dataclass(frozen=True, kw_only=True)
class _Section(_Kind):
    """A nested mapping read into the dataclass ``cls`` by the same field walk as a mirror."""

    cls: type
    exactly_one: bool = False   # a choice between alternatives (a ClusterRef)

    def describe(self) -> str:
        names = ", ".join(f.name for f in dataclasses.fields(self.cls))
        return f"a mapping with {'exactly one' if self.exactly_one else 'any'} of {names}"

    def parse(self, value: Any) -> Any:
        if value is None and not self.exactly_one:
            return self.cls()
        if not isinstance(value, Mapping) or (self.exactly_one and len(value) != 1):
            raise _bad(value, self.what())
        return self.cls(**_read_fields(self.cls, value))


def _field(kind: _Kind, doc: str, default: Any = MISSING, *, derive: Callable[[dict], Any] | None = None,
           shown_default: str | None = None) -> Any:
    """Declares one field: how it is read (``kind``), its default and what it means (``doc``).

    ``derive`` computes the default from the fields read before it (progress_group from name).
    """
    return field(default=default, metadata={"kind": kind, "doc": doc, "derive": derive,
                                            "shown_default": shown_default})


def _read_fields(cls: type, raw: Mapping[Any, Any]) -> dict[str, Any]:
    """Every declared field of ``cls`` read from ``raw``; an absent optional field keeps its default."""
    declared = dataclasses.fields(cls)
    _refuse_unknown(raw, [f.name for f in declared])
    values: dict[str, Any] = {}
    for f in declared:
        kind = f.metadata["kind"]
        if f.name in raw:
            try:
                values[f.name] = kind.parse(raw[f.name])
            except _Invalid as exc:
                raise exc.under(f.name) from None
        elif f.default is MISSING and f.default_factory is MISSING:
            raise _Invalid(f"missing; expected {kind.what()}", f.name)
        elif f.metadata["derive"] is not None:
            values[f.name] = f.metadata["derive"](values)
    return values


def _refuse_unknown(raw: Mapping[Any, Any], known: list[str]) -> None:
    for key in raw:
        if key not in known:
            raise _Invalid(f"no such field{_suggestion(key, known)}; known fields: {', '.join(sorted(known))}",
                           str(key))


# --- the declarations --------------------------------------------------------------------------------

@dataclass(frozen=True)
class ClusterRef:
    """Where a cluster's client settings come from. Exactly one of the three is set."""

    local: str | None = _field(
        _Choice(choices=LOCAL_CLUSTERS, allowed="source or target (the embedded clusters of `make demo`)"),
        "an embedded local cluster", None)
    connection: str | None = _field(
        _Name(allowed="an Airflow connection id (letters, digits, '.', '_' or '-')"),
        "an Airflow connection id (type kafka; librdkafka settings in its extra)", None)
    config: Mapping[str, Any] | None = _field(
        _Settings(required=("bootstrap.servers",),
                  allowed="librdkafka settings including bootstrap.servers (secrets only as ${ENV_VAR})"),
        "inline librdkafka settings; secrets only as `${ENV_VAR}`", None)

    def describe(self) -> str:
        if self.local:
            return f"local cluster {self.local!r}"
        if self.connection:
            return f"connection {self.connection!r}"
        return "inline config"


_CLUSTER = _Section(cls=ClusterRef, exactly_one=True, allowed=(
    "a mapping with exactly one of `local: source|target`, `connection: <airflow conn id>`, "
    "`config: {bootstrap.servers: ...}`"))


@dataclass(frozen=True)
class AirflowSettings:
    schedule: str | None = _field(
        _Cron(), "data-interval cron (UTC): each run copies what lies below its interval's end; "
                 "null = manual runs only", "*/15 * * * *")
    start_date: dt.datetime = _field(
        _Time(), "the first data interval starts here (UTC when no zone is given)",
        dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc))
    catchup: bool = _field(_Flag(), "run every interval missed since `start_date`, in order", False)
    retries: int = _field(_Int(low=0, high=20), "retries of each task of the DAG", 2)
    owner: str = _field(_Text(), "the DAG's owner in Airflow", "data-platform")
    spark_conn_id: str = _field(_Name(), "the Airflow connection of the Spark master", "spark_default")
    tags: tuple[str, ...] = _field(_Strings(), "extra DAG tags (`eosmirror` and `kafka` are always set)", ())


# Consumer groups never moved by a group sync (MirrorMaker 2's default groups.exclude, plus eosmirror's
# own: the progress groups `eosmirror.<mirror>` and the reader groups `eosmirror-*`).
DEFAULT_GROUP_EXCLUDES = (r"console-consumer-.*", r"connect-.*", r"__.*", r"eosmirror\..*", r"eosmirror-.*")


@dataclass(frozen=True)
class GroupSettings:
    """Consumer-group failover/failback: which groups, how often, whether offsets may move back."""

    include: tuple[str, ...] = _field(_Patterns(required=False, noun="consumer group"),
                                      "the consumer groups to sync", (".*",))
    exclude: tuple[str, ...] = _field(
        _Patterns(required=False, noun="consumer group"),
        "groups never synced (the mirror's `progress_group` is always excluded)", DEFAULT_GROUP_EXCLUDES)
    schedule: str | None = _field(_Cron(), "cron (UTC) of the `eosmirror_groups__<name>` DAG; null = manual "
                                           "runs only", "*/5 * * * *")
    allow_rewind: bool = _field(_Flag(), "allow moving a group's offset backwards (otherwise refused and "
                                         "reported)", False)


@dataclass(frozen=True)
class LagSettings:
    schedule: str | None = _field(
        _Cron(), "how often the `eosmirror_lag` DAG samples and evaluates every mirror; one DAG for all "
                 "mirrors, so set it in `defaults` (mirrors that disagree are refused)", "*/5 * * * *")
    history_days: int = _field(
        _Int(low=1, high=90), "days of lag samples and run outcomes kept on the target "
                              "(`retention.ms` of `eosmirror-lag.<name>.internal`)", 7)


@dataclass(frozen=True)
class MirrorConfig:
    name: str = _field(_Name(), "the mirror's name; its DAG is `eosmirror__<name>`")
    source: ClusterRef = _field(_CLUSTER, "the cluster copied from")
    target: ClusterRef = _field(_CLUSTER, "the cluster copied to")
    topics: tuple[str, ...] = _field(_Patterns(required=True), "the source topics to mirror (a single "
                                     "expression is accepted too)")
    topics_exclude: tuple[str, ...] = _field(_Patterns(required=False), "source topics never mirrored", ())
    replication_policy: str = _field(
        _Choice(choices=POLICIES), "target topic names: `identity` keeps the name, `prefix` writes "
                                   "`<source_alias>.<topic>` (MirrorMaker 2 naming)", "identity")
    source_alias: str | None = _field(_Name(optional=True), "the source cluster's alias; required by `prefix`",
                                      None)
    replication_separator: str = _field(
        _Separator(), "between alias and topic name in `prefix` names and the cycle guard (MirrorMaker 2's "
                      "`replication.policy.separator`)", ".")
    target_alias: str | None = _field(
        _Name(optional=True), "cycle guard: source topics named `<target_alias>.*` are never mirrored", None)
    slots: int = _field(_Int(low=1, high=1024),
                        "parallelism: Spark tasks, transactional ids `<prefix>.<name>.<k>`", 2)
    delivery: str = _field(
        _Choice(choices=DELIVERIES), "`at_least_once`: idempotent producer, faster; a crash may duplicate "
                                     "a batch and the offset map is then not exact", "exactly_once")
    max_records_per_partition: int | None = _field(
        _Int(low=1, high=10**12, optional=True), "per-run bound (also a manual Param); null = none", None)
    max_bytes_per_slot: int | None = _field(
        _Int(low=1024, high=10**15, optional=True),
        "per-run bound; a slot stops after the batch that crosses it; null = none", None)
    max_transaction_seconds: float = _field(
        _Seconds(low=1.0, high=300.0), "a transaction is committed after this long; "
                                       "`transaction.timeout.ms` = 2× + 30 s", 30.0)
    start_from: str | dt.datetime = _field(
        _Time(words=("earliest", "latest"), allowed="earliest, latest or an ISO-8601 timestamp such as "
                                                    "2026-01-31T00:00:00Z"),
        "where a topic's FIRST mirroring starts: `earliest`, `latest`, or the offsets of a time (UTC when no "
        "zone is given); a partition added later to a mirrored topic starts at its first offset", "earliest")
    on_truncation: str = _field(
        _Choice(choices=TRUNCATION_POLICIES), "`skip_to_log_start`: continue past deleted source data and "
                                              "report how much was lost", "fail")
    sync_topic_configs: tuple[str, ...] = _field(
        _Strings(noun="topic config names", refused=NEVER_SYNCED_CONFIGS,
                 refused_why="these are owned by the target cluster or by the mirror"),
        "topic configs copied to target topics (never `message.timestamp.type`: target topics are "
        "CreateTime)", DEFAULT_SYNC_TOPIC_CONFIGS)
    sync_topic_acls: bool = _field(
        _Flag(), "copy the source's LITERAL topic ACLs of mirrored topics to the target topics, downgraded like "
                 "MirrorMaker 2 (ALLOW WRITE dropped, ALLOW ALL becomes READ); needs Describe on the source "
                 "cluster and Alter on the target cluster, else a warning and the run goes on", False)
    target_replication_factor: int = _field(
        _Int(low=-1, high=32), "replication factor of topics the mirror creates; -1 = the broker default", -1)
    transactional_id_prefix: str = _field(_Name(), "first part of the slots' transactional ids", "eosmirror")
    progress_group: str = _field(
        _Name(), "the member-less group holding the progress on the target (and, best effort, the source)",
        "", derive=lambda values: f"eosmirror.{values['name']}", shown_default="`eosmirror.<name>`")
    source_consumer: Mapping[str, Any] = _field(
        _Settings(), "librdkafka overrides of the source consumer; settings that contradict exactly-once "
                     "are refused with the reason", FrozenMap())
    target_producer: Mapping[str, Any] = _field(
        _Settings(), "librdkafka overrides of the target producer (same rule)", FrozenMap())
    spark_conf: Mapping[str, str] = _field(
        _Settings(spark=True, no_inline_secrets=False), "Spark properties of the job", FrozenMap())
    airflow: AirflowSettings = _field(_Section(cls=AirflowSettings), "the mirror's DAG", AirflowSettings())
    groups: GroupSettings | None = _field(
        _Section(cls=GroupSettings), "consumer-group failover/failback with exact offsets (`eosmirror groups`, "
                                     "DAG `eosmirror_groups__<name>`); absent = no group DAG", None)


    max_lag_seconds: float | None = _field(
        _Seconds(low=1.0, high=30 * 86400.0, optional=True),
        "lag SLO: a partition whose oldest unmirrored record is older than this fails the `eosmirror_lag` "
        "DAG; null = no SLO", None)
    on_lag_alert: str | None = _field(
        _Dotted(), "called as `f(alert: dict)` by the `eosmirror_lag` DAG before it fails on a lag alert", None)
    lag: LagSettings = _field(_Section(cls=LagSettings), "lag sampling and history", LagSettings())

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
        known = ", ".join(self.names()) or "none"
        raise ConfigError(f"{self.path}: no mirror named {name!r} (configured: {known})"
                          f"{_suggestion(name, self.names())}")

    def names(self) -> list[str]:
        return [m.name for m in self.mirrors]


# --- loading -----------------------------------------------------------------------------------------

def _check_rules(mirror: MirrorConfig) -> None:
    """Rules that involve more than one field."""
    if mirror.replication_policy == "prefix" and not mirror.source_alias:
        raise _Invalid("missing; expected a cluster alias such as dc1 (required by replication_policy: prefix, "
                       "which names target topics `<source_alias>.<topic>`)", "source_alias")


def parse_mirror(raw: Any, path: Path, index: int, inherited: Collection[str] = ()) -> MirrorConfig:
    """One mirror definition. ``inherited``: the fields that came from ``defaults`` (named in errors)."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{path}: mirrors[{index}] is {type(raw).__name__}, expected a mapping with at least "
                          f"name, source, target and topics")
    label = raw.get("name") if isinstance(raw.get("name"), str) else f"mirrors[{index}]"
    try:
        mirror = MirrorConfig(**_read_fields(MirrorConfig, raw))
        _check_rules(mirror)
    except _Invalid as exc:
        origin = " (from `defaults`)" if exc.path[0] in inherited else ""
        raise ConfigError(f"{path}: mirror {label!r}: field `{'.'.join(exc.path)}`{origin}: {exc.problem}") from None
    # Fail at load, not at run, when a role override contradicts exactly-once.
    from eosmirror.kafka import clients

    clients.check_overrides(mirror, where=f"{path}: mirror {mirror.name!r}")
    return mirror


def _defaults(document: Mapping[Any, Any], path: Path) -> Mapping[Any, Any]:
    defaults = document.get("defaults") or {}
    if not isinstance(defaults, Mapping):
        raise ConfigError(f"{path}: `defaults` must be a mapping of mirror fields, found {type(defaults).__name__}")
    try:
        _refuse_unknown(defaults, [f.name for f in dataclasses.fields(MirrorConfig)])
    except _Invalid as exc:
        raise ConfigError(f"{path}: `defaults`: field `{'.'.join(exc.path)}`: {exc.problem}") from None
    return defaults


def parse(document: Any, path: Path) -> MirrorsFile:
    if document is None:
        document = {}
    if not isinstance(document, Mapping):
        raise ConfigError(f"{path}: expected a mapping with a `mirrors` list, found {type(document).__name__}")
    for key in document:
        if key not in ("mirrors", "defaults"):
            raise ConfigError(f"{path}: unknown top-level key `{key}`{_suggestion(key, ('mirrors', 'defaults'))}; "
                              f"expected `mirrors` and optional `defaults`")
    defaults = _defaults(document, path)
    raw_mirrors = document.get("mirrors") or []
    if not isinstance(raw_mirrors, list):
        raise ConfigError(f"{path}: `mirrors` must be a list of mirror definitions, found {type(raw_mirrors).__name__}")
    mirrors = []
    for index, raw in enumerate(raw_mirrors):
        if isinstance(raw, Mapping):
            mirrors.append(parse_mirror({**defaults, **raw}, path, index, inherited=set(defaults) - set(raw)))
        else:
            mirrors.append(parse_mirror(raw, path, index))
    schedules = sorted({str(m.lag.schedule) for m in mirrors})
    if len(schedules) > 1:
        raise ConfigError(f"{path}: field `lag.schedule` differs between mirrors ({', '.join(schedules)}); one "
                          f"`eosmirror_lag` DAG samples every mirror, so set `lag.schedule` once, in `defaults`")
    names = [m.name for m in mirrors]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise ConfigError(f"{path}: mirror name {duplicate!r} is defined more than once; names must be unique")
    return MirrorsFile(path=path, mirrors=tuple(sorted(mirrors, key=lambda m: m.name)))


@functools.cache
def _yaml_loader() -> type:
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        """SafeLoader that refuses a key written twice in one mapping (PyYAML would keep the last)."""

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":   # `<<:` merges may be overridden
                    continue
                key = self.construct_object(key_node, deep=deep)
                if not isinstance(key, str):   # SafeLoader reports odd keys itself
                    continue
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key `{key}` is written twice in one mapping; keep one", key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep)

    return UniqueKeyLoader


def load(path: str | Path | None = None) -> MirrorsFile:
    import yaml

    path = Path(path) if path else default_config_path()
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read the mirror definitions {path}: {exc.strerror}; set EOSMIRROR_CONFIG or "
                          f"pass --config") from None
    try:
        document = yaml.load(text, Loader=_yaml_loader())   # a SafeLoader
    except yaml.MarkedYAMLError as exc:
        # Line, column and problem only: PyYAML's own text quotes the line, which may hold a secret.
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{path}: not valid YAML{where}: {exc.problem or exc.context or 'syntax error'}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {type(exc).__name__}") from None
    return parse(document, path)


# --- the field reference ---------------------------------------------------------------------------

def _shown_default(f: dataclasses.Field) -> str:
    if f.metadata["shown_default"]:
        return f.metadata["shown_default"]
    value = f.default
    if value is MISSING:
        return "required"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, (tuple, FrozenMap)):
        return ", ".join(f"`{v}`" for v in value) if value else ("`[]`" if isinstance(value, tuple) else "`{}`")
    return f"`{value}`" if isinstance(value, str) else str(value)


def _reference_rows(cls: type, prefix: str = "") -> Iterator[tuple[str, str, str, str]]:
    for f in dataclasses.fields(cls):
        kind = f.metadata["kind"]
        if isinstance(kind, _Section) and not kind.exactly_one:
            yield f"`{prefix}{f.name}`", "a mapping", "", f.metadata["doc"]
            yield from _reference_rows(kind.cls, f"{prefix}{f.name}.")
        else:
            yield f"`{prefix}{f.name}`", kind.what(), _shown_default(f), f.metadata["doc"]


def field_reference() -> str:
    """Every mirror field as a Markdown table (field, type, default, meaning): the reference in docs/configuration.md."""
    lines = ["| field | type | default | meaning |", "|---|---|---|---|"]
    for row in _reference_rows(MirrorConfig):
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":   # python -m eosmirror.core.config > table.md
    print(field_reference(), end="")
