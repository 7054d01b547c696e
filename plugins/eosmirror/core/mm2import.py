"""``eosmirror import-mm2``: a MirrorMaker 2 ``mm2.properties`` translated into ``mirrors.yaml`` text.

Pure: properties in, text out; one mirror per enabled ``A->B`` flow. What MM2 says and eosmirror can express
becomes a field; everything else is listed, with the reason, in a comment at the top of the output (nothing is
dropped silently), and what eosmirror cannot select as MM2 does goes to ``Imported.partial``. Secrets never
reach the output. What is read, and how it was proven against MM2's own classes: docs/from-mm2.md, step 1.
"""

from __future__ import annotations

import re
from typing import Any

from eosmirror.core import mm2props, mm2select
from eosmirror.core.errors import ConfigError
from eosmirror.core.mm2result import Imported
from eosmirror.core.mm2settings import MIRROR_PACKAGE, Mm2Settings, split_list
from eosmirror.core.secrets import shown
from eosmirror.core.topicconfigs import DEFAULT_SYNC_TOPIC_CONFIGS

DEFAULT_POLICY = MIRROR_PACKAGE + "DefaultReplicationPolicy"
IDENTITY_POLICY = MIRROR_PACKAGE + "IdentityReplicationPolicy"
# Java client security settings with the same name and meaning in librdkafka.
SAME_IN_LIBRDKAFKA = ("security.protocol", "sasl.mechanism", "ssl.endpoint.identification.algorithm")
# MM2 settings about machinery eosmirror does differently (say why, once per key).
NO_EQUIVALENT_WHY = {
    "emit.heartbeats": "eosmirror writes no heartbeats topic",
    "heartbeats.": "eosmirror writes no heartbeats topic",
    "emit.checkpoints": "eosmirror writes exact offset syncs in each transaction instead of checkpoints",
    "checkpoints.": "eosmirror writes exact offset syncs in each transaction instead of checkpoints",
    "offset-syncs.": "eosmirror's offset syncs are written in the copy transaction, on the target",
    "emit.offset-syncs": "eosmirror always writes offset syncs (they make translation exact)",
    "offset.lag.max": "eosmirror's offset syncs are exact: every copied range has one",
    "refresh.topics": "each eosmirror run lists the source topics again",
    "refresh.groups": "each group sync lists the groups again",
    "sync.topic.configs.interval": "each eosmirror run syncs topic configs",
    "sync.topic.acls.interval": "each eosmirror run syncs topic ACLs (with sync_topic_acls)",
    "offset.storage": "MM2's Connect internal topics; eosmirror keeps progress in a consumer group",
    "config.storage": "MM2's Connect internal topics",
    "status.storage": "MM2's Connect internal topics",
    "dedicated.mode": "eosmirror has no Connect workers (Airflow schedules Spark jobs)",
    "listeners": "eosmirror has no Connect workers",
    "exactly.once.source.support": "eosmirror is exactly-once by default (`delivery: exactly_once`)",
    "plugin.": "no Connect plugins",
    "key.converter": "records are copied as bytes",
    "value.converter": "records are copied as bytes",
    "header.converter": "records are copied as bytes",
}


def env_name(alias: str, what: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", f"{alias}_{what}").upper()


def cluster_ref(alias: str, props: Mm2Settings, style: str, out: Imported) -> dict[str, Any]:
    """``{connection: alias}`` or inline librdkafka settings with secrets as ``${ENV}``."""
    if style == "connection":
        for key in props.with_prefix(f"{alias}."):
            props.used.add(f"{alias}.{key}")
        return {"connection": re.sub(r"[^A-Za-z0-9_.-]", "_", alias)}
    settings: dict[str, Any] = {"bootstrap.servers": ",".join(split_list(props.cluster(alias, "bootstrap.servers") or ""))}
    for key in SAME_IN_LIBRDKAFKA:
        value = props.cluster(alias, key)
        if value is not None:
            settings[key] = value.lower() if key == "security.protocol" else value
    jaas = props.cluster(alias, "sasl.jaas.config")
    if jaas is not None:
        user = re.search(r'username\s*=\s*"([^"]*)"', jaas)
        settings["sasl.username"] = user.group(1) if user else "${" + env_name(alias, "SASL_USERNAME") + "}"
        settings["sasl.password"] = "${" + env_name(alias, "SASL_PASSWORD") + "}"
        out.env_vars.append(env_name(alias, "SASL_PASSWORD"))
    if props.cluster(alias, "ssl.truststore.location") is not None:   # listed too: see why_unmapped
        for key in (f"{alias}.ssl.truststore.location", "ssl.truststore.location"):
            props.used.discard(key)
        settings["ssl.ca.location"] = "${" + env_name(alias, "SSL_CA_PEM_FILE") + "}"
        out.env_vars.append(env_name(alias, "SSL_CA_PEM_FILE"))
    return {"config": settings}


def flows(props: Mm2Settings, aliases: list[str]) -> list[tuple[str, str]]:
    """The enabled ``A->B`` flows between aliases of ``clusters`` (MM2 ignores any other)."""
    enabled = []
    for source in aliases:
        for target in aliases:
            value = props.get(f"{source}->{target}.enabled")
            if source != target and (value or "").strip().lower() == "true":
                enabled.append((source, target))
    return enabled


def check_flow(props: Mm2Settings, source: str, target: str) -> list[str]:
    """What makes MM2 itself refuse the flow: each problem names the key and its line."""
    problems, enabled = [], props.source.where(f"{source}->{target}.enabled")
    for alias in (source, target):
        if not split_list(props.cluster(alias, "bootstrap.servers") or ""):
            problems.append(f"{enabled} enables a flow, but `{alias}.bootstrap.servers` is not set (nor a "
                            f"top-level `bootstrap.servers`): MirrorMaker 2 cannot connect to cluster {alias!r}. "
                            f"Add `{alias}.bootstrap.servers = host:port,...`")
    key = props.flow_key(source, target, "replication.policy.class")
    if key is not None and props.props[key].strip() not in (DEFAULT_POLICY, IDENTITY_POLICY):
        problems.append(f"{props.source.where(key)} = {props.props[key].strip() or '(empty)'}: not a replication "
                        f"policy eosmirror has; it names target topics as {DEFAULT_POLICY} (prefix) or "
                        f"{IDENTITY_POLICY} (identity) does. Import with one of those, or write the mirror by hand")
    return problems


def naming_fields(props: Mm2Settings, source: str, target: str) -> dict[str, Any]:
    policy = (props.flow(source, target, "replication.policy.class", DEFAULT_POLICY) or "").strip()
    separator = props.flow(source, target, "replication.policy.separator", ".") or "."
    if policy == IDENTITY_POLICY:
        return {"replication_policy": "identity"}
    fields: dict[str, Any] = {"replication_policy": "prefix", "source_alias": source, "target_alias": target}
    if separator != ".":
        fields["replication_separator"] = separator
    return fields


def target_topic_fields(props: Mm2Settings, source: str, target: str, default_configs: tuple[str, ...],
                        out: Imported) -> dict[str, Any]:
    """What the flow's target topics get: the topic-config copy, the topic ACL copy, the replication factor."""
    fields: dict[str, Any] = {}
    enabled = props.flow(source, target, "sync.topic.configs.enabled", "true")
    excluded = mm2select.listed(props, source, target, "config.properties.exclude", mm2select.MM2_CONFIGS_EXCLUDE,
                                out)
    if (enabled or "true").lower() == "false":
        fields["sync_topic_configs"] = []
    else:
        kept = [c for c in default_configs if not any(re.fullmatch(p, c) for p in excluded)]
        if len(kept) != len(default_configs):
            fields["sync_topic_configs"] = kept
    acls = props.flow(source, target, "sync.topic.acls.enabled", "true")   # MM2's default: on
    fields["sync_topic_acls"] = (acls or "true").lower() == "true"
    factor = props.flow(source, target, "replication.factor")
    if factor is not None and factor.lstrip("-").isdigit():
        fields["target_replication_factor"] = int(factor)
    return fields


def mirror_name(source: str, target: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{source}-to-{target}")[:100]


def translate_flow(props: Mm2Settings, source: str, target: str, clusters: str,
                   default_configs: tuple[str, ...], out: Imported) -> dict[str, Any]:
    name = mirror_name(source, target)
    mirror: dict[str, Any] = {"name": name, "source": cluster_ref(source, props, clusters, out),
                              "target": cluster_ref(target, props, clusters, out)}
    mirror.update(mm2select.topic_fields(props, source, target, out))
    mirror.update(naming_fields(props, source, target))
    tasks = props.flow(source, target, "tasks.max", "1") or "1"
    mirror["slots"] = int(tasks) if tasks.isdigit() and 1 <= int(tasks) <= 1024 else 1
    mirror.update(target_topic_fields(props, source, target, default_configs, out))
    mirror["groups"] = mm2select.group_section(props, source, target, out)
    mm2select.check_filter_classes(props, source, target, out)
    return mirror


def translate(source: mm2props.Properties | bytes | str, clusters: str = "inline",
              default_configs: tuple[str, ...] | None = None) -> Imported:
    """The mirrors an mm2.properties describes. ``clusters``: ``inline`` or ``connection``.
    ConfigError (every problem, each with its key and line) when MM2 itself could not run the file."""
    if default_configs is None:
        default_configs = DEFAULT_SYNC_TOPIC_CONFIGS
    if not isinstance(source, mm2props.Properties):
        source = mm2props.parse(source)
    props = Mm2Settings(source)
    out = Imported()
    aliases = split_list(props.get("clusters", "") or "")
    enabled = flows(props, aliases)
    problems = [p for s, t in enabled for p in check_flow(props, s, t)]
    if problems:
        raise ConfigError("\n".join(problems))
    for s, t in enabled:
        out.mirrors.append(translate_flow(props, s, t, clusters, default_configs, out))
    out.translated = sorted(props.used & set(props.props))
    for key, value in sorted(props.props.items()):
        if key not in props.used:
            out.unmapped.append(f"{shown(key, value)}: {why_unmapped(key, aliases)}")
    return out


def why_unmapped(key: str, aliases: list[str]) -> str:
    bare = key
    for alias in aliases:   # A.x and A->B.x: the reason is that of x
        if bare.startswith(f"{alias}."):
            bare = bare[len(alias) + 1:]
    bare = re.sub(r"^[^.>]+->[^.>]+\.", "", bare)
    if re.fullmatch(r"[^>]+->[^.>]+\.enabled", key):
        return "a flow between aliases that are not in `clusters` (MM2 ignores it too)"
    for start, why in NO_EQUIVALENT_WHY.items():
        if bare.startswith(start):
            return why
    if bare.startswith(("consumer.", "producer.", "admin.", "source.", "target.")):
        return "a Java client setting; set the librdkafka equivalent under source_consumer/target_producer if needed"
    if bare == "ssl.truststore.location":
        alias = key[: -len(".ssl.truststore.location")] if key != bare else "<alias>"
        return (f"librdkafka reads a PEM CA file, not a JKS/PKCS12 truststore: `ssl.ca.location` is "
                f"${{{env_name(alias, 'SSL_CA_PEM_FILE')}}}; export it as the path of the CA certificate (PEM)")
    if bare.startswith(("ssl.", "sasl.")):
        return "a Java security setting without a direct librdkafka equivalent; set it in the cluster's connection"
    return "no eosmirror equivalent"


def render(imported: Imported, source_name: str) -> str:
    """The mirrors.yaml text: the comment header, then the mirrors."""
    import yaml

    lines = [f"# Imported from {source_name} by `eosmirror import-mm2`. Review before use.", "#"]
    if imported.partial:
        lines.append("# NOT WHAT MIRRORMAKER 2 SELECTS (written because of --allow-partial; fix these by hand):")
        lines += [f"#   {item}" for item in imported.partial]
        lines.append("#")
    if imported.env_vars:
        lines.append("# Export before use (secrets are never written here): " + ", ".join(sorted(set(imported.env_vars))))
        lines.append("#")
    for block, items in (("Notes:", imported.notes),
                         ("MirrorMaker 2 settings with no eosmirror equivalent (not translated):", imported.unmapped)):
        if items:
            lines += [f"# {block}"] + [f"#   {item}" for item in items] + ["#"]
    if not imported.mirrors:
        lines.append("# No enabled flow (`A->B.enabled = true`) was found: nothing to mirror.")
    body = str(yaml.safe_dump({"mirrors": imported.mirrors}, sort_keys=False, default_flow_style=False))
    return "\n".join(lines) + "\n" + body
