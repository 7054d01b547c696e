"""Rules that involve more than one field of a mirror (each field's own bounds live with its declaration)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eosmirror.core.fieldkinds import Invalid

if TYPE_CHECKING:
    from eosmirror.core.config import MirrorConfig


def check_cross_field_rules(mirror: MirrorConfig) -> None:
    """Rules that involve more than one field."""
    if mirror.replication_policy == "prefix" and not mirror.source_alias:
        raise Invalid("missing; expected a cluster alias such as dc1 (required by replication_policy: prefix, "
                       "which names target topics `<source_alias>.<topic>`)", "source_alias")
    if mirror.max_transaction_seconds < 1.0 and not mirror.follow:
        raise Invalid(f"{mirror.max_transaction_seconds} is below 1 s, which only `follow: true` mirrors may use "
                      f"(a bounded run gains nothing from shorter transactions); expected a number of seconds "
                      f"from 1.0 to 300.0, or set `follow: true`", "max_transaction_seconds")
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
