"""The nested sections of a mirror definition: cluster references, Airflow, consumer groups, lag."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Mapping

from eosmirror.core.fieldkinds import (
    LOCAL_CLUSTERS,
    Choice,
    Cron,
    Flag,
    Int,
    Name,
    Patterns,
    Strings,
    Text,
    Time,
)
from eosmirror.core.fieldread import Section, Settings, declare


@dataclass(frozen=True)
class ClusterRef:
    """Where a cluster's client settings come from. Exactly one of the three is set."""

    local: str | None = declare(
        Choice(choices=LOCAL_CLUSTERS, allowed="source or target (the embedded clusters of `make demo`)"),
        "an embedded local cluster", None)
    connection: str | None = declare(
        Name(allowed="an Airflow connection id (letters, digits, '.', '_' or '-')"),
        "an Airflow connection id (type kafka; librdkafka settings in its extra)", None)
    config: Mapping[str, Any] | None = declare(
        Settings(required=("bootstrap.servers",),
                  allowed="librdkafka settings including bootstrap.servers (secrets only as ${ENV_VAR})"),
        "inline librdkafka settings; secrets only as `${ENV_VAR}`", None)

    def describe(self) -> str:
        if self.local:
            return f"local cluster {self.local!r}"
        if self.connection:
            return f"connection {self.connection!r}"
        return "inline config"


CLUSTER = Section(cls=ClusterRef, exactly_one=True, allowed=(
    "a mapping with exactly one of `local: source|target`, `connection: <airflow conn id>`, "
    "`config: {bootstrap.servers: ...}`"))


@dataclass(frozen=True)
class AirflowSettings:
    schedule: str | None = declare(
        Cron(), "data-interval cron (UTC): each run copies what lies below its interval's end; "
                 "null = manual runs only", "*/15 * * * *")
    start_date: dt.datetime = declare(
        Time(), "the first data interval starts here (UTC when no zone is given)",
        dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc))
    catchup: bool = declare(Flag(), "run every interval missed since `start_date`, in order", False)
    retries: int = declare(Int(low=0, high=20), "retries of each task of the DAG", 2)
    owner: str = declare(Text(), "the DAG's owner in Airflow", "data-platform")
    spark_conn_id: str = declare(Name(), "the Airflow connection of the Spark master", "spark_default")
    run_server: bool = declare(
        Flag(), "the `copy` task sends its run to the worker host's run server (`eosmirror server start`, "
                "docs/run-server.md) when one answers there, else spark-submits it as usual", False)
    tags: tuple[str, ...] = declare(Strings(), "extra DAG tags (`eosmirror` and `kafka` are always set)", ())
    readiness_schedule: str | None = declare(
        Cron(), "when the readiness DAG (`eosmirror_readiness__<mirror>`) reports whether the target could take "
                "over (UTC); null = only before a switchover", "@daily")


# Consumer groups never moved by a group sync (MirrorMaker 2's default groups.exclude, plus eosmirror's
# own: the progress groups `eosmirror.<mirror>` and the reader groups `eosmirror-*`).
DEFAULT_GROUP_EXCLUDES = (r"console-consumer-.*", r"connect-.*", r"__.*", r"eosmirror\..*", r"eosmirror-.*")


@dataclass(frozen=True)
class GroupSettings:
    """Consumer-group failover/failback: which groups, how often, whether offsets may move back."""

    include: tuple[str, ...] = declare(Patterns(required=False, noun="consumer group"),
                                      "the consumer groups to sync", (".*",))
    exclude: tuple[str, ...] = declare(
        Patterns(required=False, noun="consumer group"),
        "groups never synced (the mirror's `progress_group` is always excluded)", DEFAULT_GROUP_EXCLUDES)
    schedule: str | None = declare(Cron(), "cron (UTC) of the `eosmirror_groups__<name>` DAG; null = manual "
                                           "runs only", "*/5 * * * *")
    allow_rewind: bool = declare(Flag(), "allow moving a group's offset backwards (otherwise refused and "
                                         "reported)", False)


@dataclass(frozen=True)
class LagSettings:
    schedule: str | None = declare(
        Cron(), "how often the `eosmirror_lag` DAG samples and evaluates every mirror; one DAG for all "
                 "mirrors, so set it in `defaults` (mirrors that disagree are refused)", "*/5 * * * *")
    history_days: int = declare(
        Int(low=1, high=90), "days of lag samples and run outcomes kept on the target "
                              "(`retention.ms` of `eosmirror-lag.<name>.internal`)", 7)


