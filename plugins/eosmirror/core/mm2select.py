"""import-mm2: which topics, groups and topic configs a flow selects, as MirrorMaker 2 selects them.

MM2 4.3.1 (connect-mirror) decides with three filter classes configured from the flow's settings:
``DefaultTopicFilter`` (``topics``, ``topics.exclude``), ``DefaultGroupFilter`` (``groups``,
``groups.exclude``) and ``DefaultConfigPropertyFilter`` (``config.properties.exclude``). Each joins
its comma list with ``|`` and asks ``Pattern.matcher(name).matches()``: the same as eosmirror's "some
pattern matches the whole name" -- provided Python's ``re`` reads each pattern as ``java.util.regex``
does. Where it cannot be the same (a filter class eosmirror does not have, a pattern using syntax
only one of the two has, a key Kafka 4.0 removed), the reason goes into ``Imported.partial``.
tests/integration/test_mm2_selection.py asks MM2's own classes, name by name.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

from eosmirror.core.errors import ConfigError
from eosmirror.core.mm2result import Imported
from eosmirror.core.mm2settings import MIRROR_PACKAGE, Mm2Settings, java_list

# Kafka 4.3.1's defaults (the constants of DefaultTopicFilter, DefaultGroupFilter and
# DefaultConfigPropertyFilter in connect-mirror-4.3.1.jar).
MM2_TOPICS_EXCLUDE = (r"mm2.*\.internal", r".*\.replica", r"__.*")
MM2_GROUPS_EXCLUDE = (r"console-consumer-.*", r"connect-.*", r"__.*")
# eosmirror never mirrors these (naming.BUILTIN_EXCLUDES covers them): not repeated in the file.
COVERED_BY_BUILTINS = MM2_TOPICS_EXCLUDE + (r".*[\-\.]internal", r".*[-.]internal")
# MM2's ReplicationPolicy.isInternalTopic never copies a topic whose name starts with '.', whatever
# `topics` says; eosmirror's built-in excludes do not cover it, so every imported mirror excludes it.
MM2_NEVER_COPIED = (r"\..*",)
# eosmirror's own consumer groups (progress, readers): never synced, whatever MM2's lists say.
EOSMIRROR_GROUPS = (r"eosmirror\..*", r"eosmirror-.*")
FILTER_CLASSES = {"topic.filter.class": "DefaultTopicFilter", "group.filter.class": "DefaultGroupFilter",
                  "config.property.filter.class": "DefaultConfigPropertyFilter"}
# Removed in Kafka 4.0 (MM2 4.x ignores them); before, each was read when its successor was not set.
LEGACY_KEYS = {"topics.blacklist": "topics.exclude", "groups.blacklist": "groups.exclude",
               "config.properties.blacklist": "config.properties.exclude"}
# DefaultConfigPropertyFilter.CONFIG_PROPERTIES_EXCLUDE_DEFAULT of Kafka 4.3.1.
MM2_CONFIGS_EXCLUDE = ("follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
                       "message.timestamp.difference.max.ms", "log.message.timestamp.before.max.ms",
                       "log.message.timestamp.after.max.ms", "message.timestamp.type",
                       "unclean.leader.election.enable", "min.insync.replicas")
# Escapes java.util.regex reads differently from Python's re, or that Python refuses (\p{Alpha}, \Q..\E,
# \h, \R, \X, \z, \G, Java's \v = any vertical whitespace, \e, \c, \x{...}).
_JAVA_ESCAPES = {"p": "a \\p{...} class", "P": "a \\P{...} class", "Q": "\\Q...\\E quoting", "E": "\\Q...\\E quoting",
                 "h": "\\h", "H": "\\H", "R": "\\R", "X": "\\X", "z": "\\z", "G": "\\G", "v": "\\v", "V": "\\V",
                 "e": "\\e", "c": "\\cX", "x": "a \\x{...} escape"}
_INLINE_FLAGS = re.compile(r"\(\?[a-zA-Z]+\)")


def regex_difference(pattern: str, later: bool) -> str | None:
    """Why ``pattern`` may not select in Python what it selects in Java, or None. ``later``: more
    patterns follow it in its list (MM2 joins the list with ``|``, so a Java inline flag leaks on)."""
    why = _java_only(pattern)
    if why:
        return why
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)   # "possible nested set": Java reads a union
            re.compile(pattern)
    except (re.error, FutureWarning) as exc:
        return f"Python's re does not read it as Java does ({exc})"
    if later and _INLINE_FLAGS.search(pattern):
        return "an inline flag: in MM2's joined pattern it also applies to the patterns after it"
    return None


def _java_only(pattern: str) -> str | None:
    """The first construct of ``pattern`` that only one of java.util.regex and Python's re has."""
    if "(?P" in pattern:
        return "`(?P...)` is Python syntax; MirrorMaker 2's Java refuses it"
    in_class, i = False, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            escape = pattern[i + 1:i + 2]
            if escape in _JAVA_ESCAPES and (escape != "x" or pattern[i + 2:i + 3] == "{"):
                return f"{_JAVA_ESCAPES[escape]} means something else (or nothing) in Python"
            i += 2
            continue
        if in_class and (pattern.startswith("&&", i) or char == "["):
            return "a class inside a class or `&&` (Java's union and intersection; Python reads them literally)"
        if char == "[" and not in_class:
            in_class, i = True, i + (2 if pattern[i + 1:i + 2] == "^" else 1)
            i += 1 if pattern[i:i + 1] == "]" else 0
            continue
        if char == "]" and in_class:
            in_class = False
        i += 1
    return None


def listed(props: Mm2Settings, source: str, target: str, key: str, default: tuple[str, ...],
           out: Imported) -> list[str]:
    """A flow's pattern list ``key`` as MM2 reads it (its default when unset); a legacy ``*.blacklist``
    set without its successor, and patterns Python may read differently, go to ``out.partial``."""
    found = props.flow_key(source, target, key)
    legacy = next(old for old, new in LEGACY_KEYS.items() if new == key) if key in LEGACY_KEYS.values() else None
    legacy_key = props.flow_key(source, target, legacy) if legacy else None
    flow = f"{source}->{target}"
    if legacy_key is not None and found is None:
        out.partial.append(f"{flow}: {props.source.where(legacy_key)} is ignored by MirrorMaker 2 since Kafka 4.0 "
                           f"(the mirror ignores it too); MM2 before 4.0 read it as `{key}`. If yours was older, "
                           f"rename it to `{key}` and import again")
    items = java_list(props.props[found]) if found is not None else list(default)
    if "" in items and found is not None:   # Kafka 4.3's ValidList: "Configuration 'topics' values must not be empty"
        raise ConfigError(f"{props.source.where(found)} = {props.props[found]}: an empty item in the comma "
                          f"list; MirrorMaker 2 refuses it (\"values must not be empty\"). Remove the extra comma")
    kept = []
    for n, pattern in enumerate(items):
        why = regex_difference(pattern, later=n + 1 < len(items))
        where = f"{flow}: {props.source.where(found or key)}: pattern `{pattern}`"
        if why and not _compiles(pattern):
            if key.endswith(".exclude"):   # left out, the mirror would copy what MM2 excludes: never
                raise ConfigError(f"{where}: {why}; the mirror cannot exclude what it excludes. Rewrite it in "
                                  f"syntax both read (e.g. [a-z] for \\p{{Lower}}, a\\.b for \\Qa.b\\E)")
            out.partial.append(f"{where}: {why}; left out of the mirror (it selects less than MM2)")
            continue
        if why:
            out.partial.append(f"{where}: {why}")
        kept.append(pattern)
    return kept


def _compiles(pattern: str) -> bool:
    try:
        re.compile(pattern)
        return True
    except re.error:
        return False


def topic_fields(props: Mm2Settings, source: str, target: str, out: Imported) -> dict[str, Any]:
    include = listed(props, source, target, "topics", (".*",), out)
    exclude = listed(props, source, target, "topics.exclude", MM2_TOPICS_EXCLUDE, out)
    # eosmirror's built-in excludes already hold MM2's defaults: not repeated in the file.
    exclude = [e for e in exclude if e not in COVERED_BY_BUILTINS] + list(MM2_NEVER_COPIED)
    fields: dict[str, Any] = {"topics": include or ["(?!)"], "topics_exclude": exclude}
    if not include:
        out.notes.append(f"{source}->{target}: topics is empty: MM2 mirrors nothing; the mirror's pattern "
                         f"`(?!)` matches nothing either")
    note = ("topics_exclude `\\..*`: MirrorMaker 2 never copies a topic whose name starts with '.' "
            "(ReplicationPolicy.isInternalTopic); neither does the mirror. The mirror never copies `__*`, "
            "`*.internal`, `*-internal`, `*.replica`, heartbeats or `eosmirror-*` topics either (built-in "
            "excludes), which MM2 copies when `topics` matches them and `topics.exclude` does not")
    if note not in out.notes:
        out.notes.append(note)
    return fields


def group_section(props: Mm2Settings, source: str, target: str, out: Imported) -> dict[str, Any]:
    """The mirror's ``groups`` section: MM2's group selection; scheduled when MM2 synced group offsets."""
    include = listed(props, source, target, "groups", (".*",), out)
    exclude = listed(props, source, target, "groups.exclude", MM2_GROUPS_EXCLUDE, out)
    exclude += [g for g in EOSMIRROR_GROUPS if g not in exclude]
    section: dict[str, Any] = {"include": include or ["(?!)"], "exclude": exclude, "schedule": None}
    if (props.flow(source, target, "sync.group.offsets.enabled", "false") or "").strip().lower() == "true":
        seconds = props.flow(source, target, "sync.group.offsets.interval.seconds", "60") or "60"
        minutes = max(1, min(59, -(-int(seconds) // 60))) if seconds.strip().isdigit() else 1
        section["schedule"] = f"*/{minutes} * * * *"
    return section


def check_filter_classes(props: Mm2Settings, source: str, target: str, out: Imported) -> None:
    for key, default in FILTER_CLASSES.items():
        found = props.flow_key(source, target, key)
        if found is not None and props.props[found].strip() != MIRROR_PACKAGE + default:
            out.partial.append(f"{source}->{target}: {props.source.where(found)} = {props.props[found].strip()}: "
                               f"a filter class eosmirror does not have; the mirror selects as {default} would")
