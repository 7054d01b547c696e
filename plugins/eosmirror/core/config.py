"""Mirror definitions: ``dags/mirrors.yaml`` (or ``$EOSMIRROR_CONFIG``), typed and validated on load.

Every field is declared once, on the frozen dataclass that holds it (:class:`MirrorConfig`, :class:`AirflowSettings`,
:class:`ClusterRef`): its kind (how the YAML value is read and checked), default and one-line meaning. The loader,
the error messages and the field reference (:func:`field_reference`; docs/configuration.md, which also shows the
file's shape and what an error names) derive from those declarations. Plain dataclasses, not pydantic: the messages
are our own wording and never echo a secret, and ``core`` stays standard-library only (it ships to executors).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Collection, Mapping

from eosmirror.core import bandwidth, clientrules, naming
from eosmirror.core.errors import ConfigError
from eosmirror.core.fieldkinds import (
    CRON_PRESETS,
    DELIVERIES,
    ENV_REF_RE,
    LOCAL_CLUSTERS,
    NAME_RE,
    POLICIES,
    TARGET_GUARDS,
    TRUNCATION_POLICIES,
    Choice,
    Dotted,
    Flag,
    Int,
    Invalid,
    Name,
    Patterns,
    Principals,
    Seconds,
    Separator,
    Strings,
    Time,
    schedule_interval_seconds,
    suggestion,
)
from eosmirror.core.fieldread import (
    FrozenMap,
    Section,
    Settings,
    declare,
    read_fields,
    reference_table,
    refuse_unknown,
)
from eosmirror.core.sections import (
    CLUSTER,
    DEFAULT_GROUP_EXCLUDES,
    AirflowSettings,
    ClusterRef,
    GroupSettings,
    LagSettings,
)
from eosmirror.core.topicconfigs import DEFAULT_SYNC_TOPIC_CONFIGS, NEVER_SYNCED_CONFIGS
from eosmirror.core.yamlfile import read_yaml


def default_config_path() -> Path:
    # Imported here: eosmirror.paths is not in the executors' zip, and only loaders need it.
    from eosmirror import paths

    return paths.default_mirrors_file()


@dataclass(frozen=True)
class MirrorConfig:
    name: str = declare(Name(), "the mirror's name; its DAG is `eosmirror__<name>`")
    source: ClusterRef = declare(CLUSTER, "the cluster copied from")
    target: ClusterRef = declare(CLUSTER, "the cluster copied to")
    topics: tuple[str, ...] = declare(Patterns(required=True), "the source topics to mirror (a single "
                                     "expression is accepted too)")
    topics_exclude: tuple[str, ...] = declare(Patterns(required=False), "source topics never mirrored", ())
    replication_policy: str = declare(
        Choice(choices=POLICIES), "target topic names: `identity` keeps the name, `prefix` writes "
                                   "`<source_alias>.<topic>` (MirrorMaker 2 naming)", "identity")
    source_alias: str | None = declare(Name(optional=True), "the source cluster's alias; required by `prefix`",
                                      None)
    replication_separator: str = declare(
        Separator(), "between alias and topic name in `prefix` names and the cycle guard (MirrorMaker 2's "
                      "`replication.policy.separator`)", ".")
    target_alias: str | None = declare(
        Name(optional=True), "cycle guard: source topics named `<target_alias>.*` are never mirrored", None)
    slots: int = declare(Int(low=1, high=1024),
                        "parallelism: Spark tasks, transactional ids `<prefix>.<name>.<k>`", 2)
    delivery: str = declare(
        Choice(choices=DELIVERIES), "`at_least_once`: idempotent producer, faster; a crash may duplicate "
                                     "a batch and the offset map is then not exact", "exactly_once")
    max_records_per_partition: int | None = declare(
        Int(low=1, high=10**12, optional=True), "per-run bound (also a manual Param); null = none", None)
    max_bytes_per_slot: int | None = declare(
        Int(low=1024, high=10**15, optional=True),
        "per-run bound; a slot stops after the batch that crosses it; null = none", None)
    max_bytes_per_second: int | None = declare(
        Int(low=bandwidth.MIN_BYTES_PER_SECOND, high=10**12, optional=True),
        "bandwidth cap of the mirror: bytes of records (key + value + headers) per second, split evenly over "
        "the slots that hold partitions; each slot's share must carry the largest record its topics allow "
        "(`max.message.bytes`) once a second, and at most 1 GB/s; held over every transaction, never past "
        "`max_transaction_seconds` (docs/real-clusters.md); null = none", None)
    catch_up_bytes_per_second: int | None = declare(
        Int(low=bandwidth.MIN_BYTES_PER_SECOND, high=10**12, optional=True),
        "the cap while the mirror is far behind (a slot's newest copied record is older than "
        "`catch_up_lag_seconds`), instead of `max_bytes_per_second`, so that a catch-up does not flood "
        "either cluster; null = `max_bytes_per_second` throughout", None)
    catch_up_lag_seconds: float = declare(
        Seconds(low=1.0, high=30 * 86400.0),
        "far behind: the newest record of a slot's last batch is older than this (its time lag); the "
        "slot copies at `catch_up_bytes_per_second` until a batch's newest record is younger", 300.0)
    max_transaction_seconds: float = declare(
        Seconds(low=0.1, high=300.0), "a transaction is committed after this long (below 1 s only for "
                                      "`follow` mirrors); `transaction.timeout.ms` = 2× + 30 s", 30.0)
    max_partitions_per_transaction: int | None = declare(
        Int(low=1, high=10**6, optional=True),
        "exactly_once: a slot commits its partitions in chunks of at most this many, a transaction per chunk "
        "carrying the chunk's records, offset syncs and progress (every partition in one chunk; a follow round "
        "carries every record that arrived and the progress of the partitions that moved plus one chunk of the "
        "others in rotation), so that the markers still being written when a run ends are few: its records "
        "are visible to read_committed consumers, and the next run can start, seconds after it ends (5,000 fresh "
        "partitions, 4 slots, a broker whose first marker per partition is slow: visible 1.4-3.3 s after the run "
        "instead of 23-59 s; where markers are cheap, runs 12.7-14.3 s instead of 13.4-18.5 s); null = the "
        "whole slot in each transaction", 250)
    follow: bool = declare(
        Flag(), "a scheduled run of the latest interval, after its bound, keeps copying (a transaction every "
                "`max_transaction_seconds`) until the next run takes over; catch-up, backfill and manual runs "
                "never follow. Holds the Spark executors all the time", False)
    follow_max_seconds: float | None = declare(
        Seconds(low=10.0, high=7 * 86400.0, optional=True),
        "how long a follow run may follow at most when no next run takes over; null = twice the schedule "
        "interval", None)
    start_from: str | dt.datetime = declare(
        Time(words=("earliest", "latest"), allowed="earliest, latest or an ISO-8601 timestamp such as "
                                                    "2026-01-31T00:00:00Z"),
        "where a topic's FIRST mirroring starts: `earliest`, `latest`, or the offsets of a time (UTC when no "
        "zone is given); a partition added later to a mirrored topic starts at its first offset", "earliest")
    on_truncation: str = declare(
        Choice(choices=TRUNCATION_POLICIES), "`skip_to_log_start`: continue past deleted source data and "
                                              "report how much was lost", "fail")
    sync_topic_configs: tuple[str, ...] = declare(
        Strings(noun="topic config names", refused=NEVER_SYNCED_CONFIGS,
                 refused_why="these are owned by the target cluster or by the mirror"),
        "topic configs copied to target topics (never `message.timestamp.type`: target topics are "
        "CreateTime)", DEFAULT_SYNC_TOPIC_CONFIGS)
    sync_topic_acls: bool = declare(
        Flag(), "copy the source's LITERAL topic ACLs of mirrored topics to the target topics, downgraded like "
                 "MirrorMaker 2 (ALLOW WRITE dropped, ALLOW ALL becomes READ); needs Describe on the source "
                 "cluster and Alter on the target cluster, else a warning and the run goes on. With it, write "
                 "rights move with the role: switchover and promote grant on the target the source's WRITE "
                 "grants of the mirrored topics, reverse takes them from the old source, the switch back and "
                 "resume give them back (docs/disaster-recovery.md)", False)
    target_guard: str = declare(
        Choice(choices=TARGET_GUARDS), "each run lists the principals other than the mirror that can write a "
                                        "mirrored target topic (topic ACLs, `allow.everyone.if.no.acl.found`, no "
                                        "authorizer; super users, listed, never refused): `report` logs them and puts "
                                        "them in the run report; `refuse` stops the run before it copies (exit 7)",
        "report")
    mirror_principals: tuple[str, ...] = declare(
        Principals(), "the principals the mirror authenticates as, besides its SASL usernames (which are known "
                      "from `sasl.username`): needed when it authenticates with a certificate (mTLS) or OAuth, so "
                      "that the target guard, the readiness report and the switch's write-rights steps leave its "
                      "own grants out, e.g. `[\"User:CN=mirror\"]`", ())
    target_replication_factor: int = declare(
        Int(low=-1, high=32), "replication factor of topics the mirror creates; -1 = the broker default", -1)
    transactional_id_prefix: str = declare(Name(), "first part of the slots' transactional ids", "eosmirror")
    progress_group: str = declare(
        Name(), "the member-less group holding the progress on the target (and, best effort, the source)",
        "", derive=lambda values: f"eosmirror.{values['name']}", shown_default="`eosmirror.<name>`")
    source_consumer: Mapping[str, Any] = declare(
        Settings(), "librdkafka overrides of the source consumer; settings that contradict exactly-once "
                     "are refused with the reason", FrozenMap())
    target_producer: Mapping[str, Any] = declare(
        Settings(), "librdkafka overrides of the target producer (same rule)", FrozenMap())
    spark_conf: Mapping[str, str] = declare(
        Settings(spark=True, no_inline_secrets=False),
        "Spark properties of the job (a bounded run starts no Spark UI unless this sets `spark.ui.enabled`)", FrozenMap())
    airflow: AirflowSettings = declare(Section(cls=AirflowSettings), "the mirror's DAG", AirflowSettings())
    groups: GroupSettings | None = declare(
        Section(cls=GroupSettings), "consumer-group failover/failback with exact offsets (`eosmirror groups`, "
                                     "DAG `eosmirror_groups__<name>`); absent = no group DAG", None)

    max_lag_seconds: float | None = declare(
        Seconds(low=1.0, high=30 * 86400.0, optional=True),
        "lag SLO: a partition whose oldest unmirrored record is older than this fails the `eosmirror_lag` "
        "DAG; null = no SLO", None)
    on_lag_alert: str | None = declare(
        Dotted(), "called as `f(alert: dict)` by the `eosmirror_lag` DAG before it fails on a lag alert", None)
    lag: LagSettings = declare(Section(cls=LagSettings), "lag sampling and history", LagSettings())

    def with_bounds(self, max_records_per_partition: int | None = None,
                    max_bytes_per_slot: int | None = None, max_bytes_per_second: int | None = None) -> "MirrorConfig":
        """This mirror with per-run bounds overridden (None keeps the configured one); an overriding cap is
        checked like the field (ConfigError naming it)."""
        bounded = replace(
            self,
            max_records_per_partition=(max_records_per_partition if max_records_per_partition is not None
                                       else self.max_records_per_partition),
            max_bytes_per_slot=max_bytes_per_slot if max_bytes_per_slot is not None else self.max_bytes_per_slot)
        if max_bytes_per_second is None:
            return bounded
        try:
            kind = next(f.metadata["kind"] for f in dataclasses.fields(MirrorConfig) if f.name == "max_bytes_per_second")
            bounded = replace(bounded, max_bytes_per_second=kind.parse(max_bytes_per_second))
            check_cross_field_rules(bounded)
        except Invalid as exc:
            raise ConfigError(f"mirror {self.name!r}: --max-bytes-per-second (field `max_bytes_per_second`): "
                              f"{exc.problem}") from None
        return bounded

    def reverse(self) -> "MirrorConfig":
        """The generated reverse mirror (target -> old source) used on the way back after a promotion
        (docs/disaster-recovery.md): source and target swapped, its own name ``<name>__reverse`` and so
        its own progress group, transactional ids and internal topics (on the old source). Its DAG is
        paused on creation and its runs are refused until `eosmirror reverse` prepared it. Identity
        naming only: the reverse of ``<alias>.<topic>`` would need a different policy."""
        if self.replication_policy != "identity":
            raise ConfigError(not_reversible(self))
        name = naming.reverse_mirror_name(self.name)
        swapped = replace(
            self, name=name, source=self.target, target=self.source, source_alias=self.target_alias,
            target_alias=self.source_alias, progress_group=f"eosmirror.{name}",
            # the side topics of the divergence stay on the new primary; topics created there after the
            # promotion hold only records produced there, so they start at their first offset
            topics_exclude=(*self.topics_exclude, naming.diverged_topic_pattern(self.name)), start_from="earliest",
            # `groups` is inherited: the forward mirror's section selects the groups a failover of the
            # reverse mirror moves (the same ones a failback of the forward mirror moves, and the same way)
            max_lag_seconds=None, on_lag_alert=None,
            airflow=replace(self.airflow, tags=tuple(sorted({*self.airflow.tags, "reverse"}))))
        return ReverseMirrorConfig(**{f.name: getattr(swapped, f.name) for f in dataclasses.fields(MirrorConfig)},
                                   forward=self)

    @property
    def follow_bound_seconds(self) -> float | None:
        """How long a follow run may follow at most: ``follow_max_seconds``, else twice the schedule
        interval (a missed next run cannot leave it running for ever). None: no follow."""
        if not self.follow:
            return None
        if self.follow_max_seconds is not None:
            return self.follow_max_seconds
        return 2 * schedule_interval_seconds(str(self.airflow.schedule))

    @property
    def transaction_timeout_ms(self) -> int:
        """Broker-side transaction timeout: twice the copy budget plus room for flush and commit.

        A librdkafka producer whose transaction outlives this is fenced (KIP-588 unsupported), so
        the copy loop stops at ``max_transaction_seconds`` and commits well before it.
        """
        return int((2 * self.max_transaction_seconds + 30) * 1000)


@dataclass(frozen=True)
class ReverseMirrorConfig(MirrorConfig):
    """The generated reverse mirror (``MirrorConfig.reverse``), which also knows the mirror it reverses:
    a group move on the way back reads both offset maps (the forward one on the new primary, under the
    forward mirror's own names and progress group, which the reverse cannot derive: that group may be
    configured). ``forward`` is no field of the mirrors file and takes no part in equality."""

    forward: MirrorConfig | None = dataclasses.field(default=None, compare=False, repr=False)


def own_groups(mirror: MirrorConfig) -> tuple[str, ...]:
    """The progress groups of the mirror and, for a reverse mirror, of its forward mirror: each is kept
    on both clusters of the pair (committed on the target, published on the source), so no group
    failover, failback or group lag ever takes one for a consumer group."""
    forward = mirror.forward if isinstance(mirror, ReverseMirrorConfig) else None
    return (mirror.progress_group, *((forward.progress_group,) if forward is not None else ()))


def not_reversible(mirror: MirrorConfig) -> str:
    return (f"mirror {mirror.name!r} names its target topics `{mirror.source_alias}{mirror.replication_separator}"
            f"<topic>` (replication_policy: prefix): its reverse would copy `{mirror.source_alias}"
            f"{mirror.replication_separator}<topic>` back to `<topic>` on the old source, which needs a different "
            f"naming policy than the mirror has. The way back after a promotion is for disaster recovery, where "
            f"both sides use the same topic names (replication_policy: identity); it is refused for this mirror")


def check_cross_field_rules(mirror: MirrorConfig) -> None:
    """The rules that involve more than one field of a mirror (each field's own bounds live with its
    declaration)."""
    if naming.forward_mirror_name(mirror.name):
        raise Invalid(f"{mirror.name!r} ends with {naming.REVERSE_SUFFIX!r}, which names the reverse mirror eosmirror "
                      f"generates for a mirror on the way back after a promotion; choose another name", "name")
    if mirror.replication_policy == "prefix" and not mirror.source_alias:
        raise Invalid("missing; expected a cluster alias such as dc1 (required by replication_policy: prefix, "
                      "which names target topics `<source_alias>.<topic>`)", "source_alias")
    if mirror.max_transaction_seconds < 1.0 and not mirror.follow:
        raise Invalid(f"{mirror.max_transaction_seconds} is below 1 s, which only `follow: true` mirrors may use "
                      f"(a bounded run gains nothing from shorter transactions); expected a number of seconds "
                      f"from 1.0 to 300.0, or set `follow: true`", "max_transaction_seconds")
    for name in ("max_bytes_per_second", "catch_up_bytes_per_second"):
        rate = getattr(mirror, name)
        if rate is not None and rate / mirror.slots > bandwidth.SLOT_CEILING_BYTES_PER_SECOND:
            raise Invalid(f"{rate} is {rate / mirror.slots:,.0f} bytes/s for each of the {mirror.slots} slot(s), more "
                          f"than one slot can carry ({bandwidth.SLOT_CEILING_BYTES_PER_SECOND:,} bytes/s: one "
                          f"process, one producer), so it would never hold anything back; expected bytes per second "
                          f"such as 50000000 (50 MB/s), or more slots", name)
    if mirror.follow and mirror.delivery != "exactly_once":
        raise Invalid("`follow: true` needs `delivery: exactly_once`: the next run takes over by fencing the "
                      "slots' transactional ids, which at_least_once has none of", "follow")
    if mirror.follow and mirror.airflow.schedule is None and mirror.follow_max_seconds is None:
        raise Invalid("missing; a `follow: true` mirror without `airflow.schedule` needs an explicit bound "
                      "(only scheduled runs follow; the default bound is twice the schedule interval)",
                      "follow_max_seconds")
    if mirror.follow and mirror.airflow.catchup:
        raise Invalid("true is not allowed with `follow: true`: a follow mirror's DAG lets 2 runs overlap "
                      "(the next run takes over from the one that follows), so catch-up runs of past intervals "
                      "would fence each other; a follow mirror's first run copies everything up to now anyway. "
                      "Set `airflow.catchup: false`", "airflow", "catchup")


@dataclass(frozen=True)
class MirrorsFile:
    path: Path
    mirrors: tuple[MirrorConfig, ...]

    def get(self, name: str) -> MirrorConfig:
        """The mirror named ``name``; ``<mirror>__reverse`` is the generated reverse of ``<mirror>``."""
        for mirror in self.mirrors:
            if mirror.name == name:
                return mirror
        forward = naming.forward_mirror_name(name)
        if forward in self.names():
            return self.get(str(forward)).reverse()
        known = ", ".join(self.names()) or "none"
        raise ConfigError(f"{self.path}: no mirror named {name!r} (configured: {known})"
                          f"{suggestion(name, self.names())}")

    def names(self) -> list[str]:
        return [m.name for m in self.mirrors]


# --- loading -----------------------------------------------------------------------------------------

def parse_mirror(raw: Any, path: Path, index: int, inherited: Collection[str] = ()) -> MirrorConfig:
    """One mirror definition. ``inherited``: the fields that came from ``defaults`` (named in errors)."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{path}: mirrors[{index}] is {type(raw).__name__}, expected a mapping with at least "
                          f"name, source, target and topics")
    label = raw.get("name") if isinstance(raw.get("name"), str) else f"mirrors[{index}]"
    try:
        mirror = MirrorConfig(**read_fields(MirrorConfig, raw))
        check_cross_field_rules(mirror)
    except Invalid as exc:
        origin = " (from `defaults`)" if exc.path[0] in inherited else ""
        raise ConfigError(f"{path}: mirror {label!r}: field `{'.'.join(exc.path)}`{origin}: {exc.problem}") from None
    # Fail at load, not at run, when a role override contradicts exactly-once.
    clientrules.check_overrides(mirror, where=f"{path}: mirror {mirror.name!r}")
    return mirror


def _defaults(document: Mapping[Any, Any], path: Path) -> Mapping[Any, Any]:
    defaults = document.get("defaults") or {}
    if not isinstance(defaults, Mapping):
        raise ConfigError(f"{path}: `defaults` must be a mapping of mirror fields, found {type(defaults).__name__}")
    try:
        refuse_unknown(defaults, [f.name for f in dataclasses.fields(MirrorConfig)])
    except Invalid as exc:
        raise ConfigError(f"{path}: `defaults`: field `{'.'.join(exc.path)}`: {exc.problem}") from None
    return defaults


def parse(document: Any, path: Path) -> MirrorsFile:
    if document is None:
        document = {}
    if not isinstance(document, Mapping):
        raise ConfigError(f"{path}: expected a mapping with a `mirrors` list, found {type(document).__name__}")
    for key in document:
        if key not in ("mirrors", "defaults"):
            raise ConfigError(f"{path}: unknown top-level key `{key}`{suggestion(key, ('mirrors', 'defaults'))}; "
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


def load(path: str | Path | None = None) -> MirrorsFile:
    path = Path(path) if path else default_config_path()
    return parse(read_yaml(path), path)


def field_reference() -> str:
    """Every mirror field as a Markdown table (field, type, default, meaning): the reference in docs/configuration.md."""
    return reference_table(MirrorConfig)


# Names other modules import from here: the sections and kinds live in their own modules.
__all__ = ["CRON_PRESETS", "DEFAULT_GROUP_EXCLUDES", "DEFAULT_SYNC_TOPIC_CONFIGS", "DELIVERIES", "ENV_REF_RE",
           "LOCAL_CLUSTERS", "NAME_RE", "NEVER_SYNCED_CONFIGS", "POLICIES", "TRUNCATION_POLICIES", "AirflowSettings",
           "ClusterRef", "FrozenMap", "GroupSettings", "LagSettings", "MirrorConfig", "MirrorsFile", "field_reference",
           "load", "parse", "parse_mirror", "default_config_path"]


if __name__ == "__main__":   # python -m eosmirror.core.config > table.md
    print(field_reference(), end="")
