"""``eosmirror import-mm2``: a MirrorMaker 2 ``mm2.properties`` translated into ``mirrors.yaml`` text.

Pure: text in, text out. One mirror per enabled ``A->B`` flow. What MM2 says and eosmirror can
express becomes a field; everything else is listed, with the reason, in a comment at the top of
the output -- nothing is dropped silently. Secrets never reach the output: a password in
``sasl.jaas.config`` becomes ``${<ALIAS>_SASL_PASSWORD}`` and the value of any secret-looking key is
shown as ``<hidden>`` in the comments.

MM2's semantics followed here (apache/kafka connect/mirror ``MirrorMakerConfig``,
``MirrorSourceConfig``, ``DefaultReplicationPolicy``): a key ``A->B.x`` overrides ``x`` for that flow;
``A.x`` are cluster settings; ``topics``/``topics.exclude`` are comma-separated regular expressions
that must match the whole topic name (as eosmirror's); the default policy names remote topics
``<source alias><separator><topic>``; ``tasks.max`` defaults to 1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from eosmirror.core.secrets import shown

DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
# MM2's default topics.exclude; eosmirror never mirrors these anyway (naming.BUILTIN_EXCLUDES).
MM2_DEFAULT_EXCLUDES = (r".*[\-\.]internal", r".*\.replica", r"__.*")
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
    "refresh.groups": "group offsets are the groups section's job",
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


@dataclass
class Imported:
    """The translation: mirrors (as YAML-ready dicts), what was not translated, the groups notes."""

    mirrors: list[dict[str, Any]] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)       # "key = value: why"
    group_notes: dict[str, list[str]] = field(default_factory=dict)   # mirror name -> comment lines
    env_vars: list[str] = field(default_factory=list)
    translated: list[str] = field(default_factory=list)     # the keys the mirrors express


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties: `key=value`, `key: value` or `key value`; # and ! comments; \\ continues a line."""
    props: dict[str, str] = {}
    logical, pending = [], ""
    for raw in text.splitlines():
        line = (pending + raw.lstrip()) if pending else raw.strip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        pending = ""
        logical.append(line)
    for line in logical:
        match = re.match(r"^((?:\\.|[^=:\s])+)\s*[=:\s]\s*(.*)$", line)
        key, value = (match.group(1), match.group(2)) if match else (line, "")
        props[key.replace("\\", "")] = value.strip()
    return props


def split_list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def env_name(alias: str, what: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", f"{alias}_{what}").upper()


class _Props:
    """The properties with a record of which keys the translation used."""

    def __init__(self, props: dict[str, str]):
        self.props, self.used = props, set()

    def get(self, key: str, default: str | None = None) -> str | None:
        if key in self.props:
            self.used.add(key)
            return self.props[key]
        return default

    def flow(self, source: str, target: str, key: str, default: str | None = None) -> str | None:
        """A flow's setting: ``A->B.key`` over ``key`` (MM2's precedence)."""
        specific = self.get(f"{source}->{target}.{key}")
        general = self.get(key)
        return specific if specific is not None else (general if general is not None else default)

    def with_prefix(self, prefix: str) -> dict[str, str]:
        return {k[len(prefix):]: v for k, v in self.props.items() if k.startswith(prefix)}


def cluster_ref(alias: str, props: _Props, style: str, out: Imported) -> dict[str, Any]:
    """``{connection: alias}`` or inline librdkafka settings with secrets as ``${ENV}``."""
    if style == "connection":
        for key in props.with_prefix(f"{alias}."):
            props.used.add(f"{alias}.{key}")
        return {"connection": re.sub(r"[^A-Za-z0-9_.-]", "_", alias)}
    settings: dict[str, Any] = {}
    bootstrap = props.get(f"{alias}.bootstrap.servers")
    settings["bootstrap.servers"] = ",".join(split_list(bootstrap)) if bootstrap else "${" + env_name(alias, "BOOTSTRAP") + "}"
    for key in SAME_IN_LIBRDKAFKA:
        value = props.get(f"{alias}.{key}")
        if value is not None:
            settings[key] = value.lower() if key == "security.protocol" else value
    jaas = props.get(f"{alias}.sasl.jaas.config")
    if jaas is not None:
        user = re.search(r'username\s*=\s*"([^"]*)"', jaas)
        settings["sasl.username"] = user.group(1) if user else "${" + env_name(alias, "SASL_USERNAME") + "}"
        settings["sasl.password"] = "${" + env_name(alias, "SASL_PASSWORD") + "}"
        out.env_vars.append(env_name(alias, "SASL_PASSWORD"))
    if f"{alias}.ssl.truststore.location" in props.props:   # listed too: see why_unmapped
        settings["ssl.ca.location"] = "${" + env_name(alias, "SSL_CA_PEM_FILE") + "}"
        out.env_vars.append(env_name(alias, "SSL_CA_PEM_FILE"))
    return {"config": settings}


def flows(props: _Props, aliases: list[str]) -> list[tuple[str, str]]:
    """The enabled ``A->B`` flows between aliases of ``clusters`` (MM2 ignores any other)."""
    enabled = []
    for source in aliases:
        for target in aliases:
            value = props.get(f"{source}->{target}.enabled")
            if source != target and (value or "").strip().lower() == "true":
                enabled.append((source, target))
    return enabled


def naming_fields(props: _Props, source: str, target: str, out: Imported) -> dict[str, Any]:
    policy = props.flow(source, target, "replication.policy.class", DEFAULT_POLICY) or DEFAULT_POLICY
    separator = props.flow(source, target, "replication.policy.separator", ".") or "."
    if policy.endswith("IdentityReplicationPolicy"):
        return {"replication_policy": "identity"}
    if not policy.endswith("DefaultReplicationPolicy"):
        out.unmapped.append(f"{source}->{target}: replication.policy.class = {policy}: a custom policy; "
                            f"the mirror uses the default naming `{source}{separator}<topic>`, check it")
    fields: dict[str, Any] = {"replication_policy": "prefix", "source_alias": source, "target_alias": target}
    if separator != ".":
        fields["replication_separator"] = separator
    return fields


def topic_fields(props: _Props, source: str, target: str, out: Imported) -> dict[str, Any]:
    include = split_list(props.flow(source, target, "topics", ".*") or "")
    exclude_text = props.flow(source, target, "topics.exclude")
    legacy = props.flow(source, target, "topics.blacklist")
    exclude = split_list(exclude_text if exclude_text is not None else (legacy or ""))
    # MM2's default excludes are eosmirror's built-in ones: not repeated in the file.
    exclude = [e for e in exclude if e not in MM2_DEFAULT_EXCLUDES]
    fields: dict[str, Any] = {"topics": include or ["(?!)"]}
    if not include:
        out.unmapped.append(f"{source}->{target}: topics is empty: MM2 mirrors nothing; the mirror's pattern "
                            f"`(?!)` matches nothing either")
    if exclude:
        fields["topics_exclude"] = exclude
    return fields


def config_sync_fields(props: _Props, source: str, target: str, default_configs: tuple[str, ...],
                       out: Imported) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    enabled = props.flow(source, target, "sync.topic.configs.enabled", "true")
    excluded = split_list(props.flow(source, target, "config.properties.exclude", "") or "")
    if (enabled or "true").lower() == "false":
        fields["sync_topic_configs"] = []
    elif excluded:
        kept = [c for c in default_configs if not any(re.fullmatch(p, c) for p in excluded)]
        if len(kept) != len(default_configs):
            fields["sync_topic_configs"] = kept
    acls = props.flow(source, target, "sync.topic.acls.enabled", "true")   # MM2's default: on
    fields["sync_topic_acls"] = (acls or "true").lower() == "true"
    factor = props.flow(source, target, "replication.factor")
    if factor is not None and factor.lstrip("-").isdigit():
        fields["target_replication_factor"] = int(factor)
    return fields


def note_groups(props: _Props, source: str, target: str, name: str, out: Imported) -> None:
    """MM2's group offset sync belongs to the groups section (another change); kept as a comment."""
    keys = ("groups", "groups.exclude", "groups.blacklist", "sync.group.offsets.enabled",
            "sync.group.offsets.interval.seconds", "emit.checkpoints.enabled", "emit.checkpoints.interval.seconds")
    lines = []
    for key in keys:
        value = props.flow(source, target, key)
        if value is not None:
            lines.append(f"{key} = {value}")
    if lines:
        out.group_notes[name] = lines


def mirror_name(source: str, target: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{source}-to-{target}")[:100]


def translate_flow(props: _Props, source: str, target: str, clusters: str,
                   default_configs: tuple[str, ...], out: Imported) -> dict[str, Any]:
    name = mirror_name(source, target)
    mirror: dict[str, Any] = {"name": name, "source": cluster_ref(source, props, clusters, out),
                              "target": cluster_ref(target, props, clusters, out)}
    mirror.update(topic_fields(props, source, target, out))
    mirror.update(naming_fields(props, source, target, out))
    tasks = props.flow(source, target, "tasks.max", "1") or "1"
    mirror["slots"] = int(tasks) if tasks.isdigit() and 1 <= int(tasks) <= 1024 else 1
    mirror.update(config_sync_fields(props, source, target, default_configs, out))
    note_groups(props, source, target, name, out)
    return mirror


def translate(text: str, clusters: str = "inline", default_configs: tuple[str, ...] | None = None) -> Imported:
    """The mirrors an mm2.properties describes. ``clusters``: ``inline`` or ``connection``."""
    if default_configs is None:
        from eosmirror.core.config import DEFAULT_SYNC_TOPIC_CONFIGS

        default_configs = DEFAULT_SYNC_TOPIC_CONFIGS
    props = _Props(parse_properties(text))
    out = Imported()
    aliases = split_list(props.get("clusters", "") or "")
    for source, target in flows(props, aliases):
        out.mirrors.append(translate_flow(props, source, target, clusters, default_configs, out))
    out.translated = sorted(props.used & set(props.props))
    for key, value in sorted(props.props.items()):
        if key not in props.used:
            out.unmapped.append(f"{shown(key, value)}: {why_unmapped(key, aliases)}")
    return out


def why_unmapped(key: str, aliases: list[str]) -> str:
    bare = key
    for alias in aliases:   # A.x and A->B.x: the reason is that of x
        for prefix in (f"{alias}.",):
            if bare.startswith(prefix):
                bare = bare[len(prefix):]
    bare = re.sub(r"^[^.>]+->[^.>]+\.", "", bare)
    if re.fullmatch(r"[^>]+->[^.>]+\.enabled", key):
        return "a flow between aliases that are not in `clusters` (MM2 ignores it too)"
    for start, why in NO_EQUIVALENT_WHY.items():
        if bare.startswith(start):
            return why
    if bare.startswith(("consumer.", "producer.", "admin.", "source.", "target.")):
        return "a Java client setting; set the librdkafka equivalent under source_consumer/target_producer if needed"
    if bare == "ssl.truststore.location":
        alias = key[: -len(".ssl.truststore.location")]
        return (f"librdkafka reads a PEM CA file, not a JKS/PKCS12 truststore: `ssl.ca.location` is "
                f"${{{env_name(alias, 'SSL_CA_PEM_FILE')}}}; export it as the path of the CA certificate (PEM)")
    if bare.startswith(("ssl.", "sasl.")):
        return "a Java security setting without a direct librdkafka equivalent; set it in the cluster's connection"
    return "no eosmirror equivalent"


def render(imported: Imported, source_name: str) -> str:
    """The mirrors.yaml text: the comment header, the mirrors, the groups notes per mirror."""
    import yaml

    lines = [f"# Imported from {source_name} by `eosmirror import-mm2`. Review before use.", "#"]
    if imported.env_vars:
        lines.append("# Export before use (secrets are never written here): " + ", ".join(sorted(set(imported.env_vars))))
        lines.append("#")
    if imported.unmapped:
        lines.append("# MirrorMaker 2 settings with no eosmirror equivalent (not translated):")
        lines += [f"#   {item}" for item in imported.unmapped]
        lines.append("#")
    for name, notes in sorted(imported.group_notes.items()):
        lines.append(f"# groups of mirror {name} (consumer-group offset sync; goes into its `groups` section "
                     f"once that exists -- offsets then translate exactly through the offset syncs):")
        lines += [f"#   {note}" for note in notes]
        lines.append("#")
    if not imported.mirrors:
        lines.append("# No enabled flow (`A->B.enabled = true`) was found: nothing to mirror.")
    body = yaml.safe_dump({"mirrors": imported.mirrors}, sort_keys=False, default_flow_style=False)
    return "\n".join(lines) + "\n" + body
