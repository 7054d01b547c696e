"""A MirrorMaker 2 file's settings as MirrorMakerConfig reads them: a LIST value split as Kafka's ConfigDef
splits it, a flow's ``A->B.key`` over the top-level ``key``, a cluster's ``A.key`` over the top-level client
setting; with a record of the keys read, so that the import can list every key it did not translate."""

from __future__ import annotations

import re

from eosmirror.core import mm2props

MIRROR_PACKAGE = "org.apache.kafka.connect.mirror."   # the Java package of MM2's classes (policies, filters)

_JAVA_TRIM = "".join(map(chr, range(33)))          # String.trim(): every char <= ' '
_JAVA_COMMA = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")   # ConfigDef's \s*,\s* (Java's ASCII \s)


def java_list(value: str) -> list[str]:
    """A Kafka LIST setting exactly as ConfigDef.parseType splits it: trimmed, then split at commas
    with the blanks around them; an empty text is an empty list, an empty item stays (as "")."""
    trimmed = value.strip(_JAVA_TRIM)
    return _JAVA_COMMA.split(trimmed) if trimmed else []


def split_list(value: str) -> list[str]:
    """A list setting with empty items dropped (``clusters``, ``bootstrap.servers``)."""
    return [item for item in java_list(value) if item]


class Mm2Settings:
    """The properties with a record of which keys the translation used."""

    def __init__(self, props: mm2props.Properties):
        self.source, self.props = props, props.values
        self.used: set[str] = set()

    def get(self, key: str, default: str | None = None) -> str | None:
        if key in self.props:
            self.used.add(key)
            return self.props[key]
        return default

    def flow_key(self, source: str, target: str, key: str) -> str | None:
        """Which key sets ``key`` for the flow: ``A->B.key`` over ``key`` (MM2's precedence)."""
        for candidate in (f"{source}->{target}.{key}", key):
            if candidate in self.props:
                self.used.add(candidate)
                return candidate
        return None

    def flow(self, source: str, target: str, key: str, default: str | None = None) -> str | None:
        found = self.flow_key(source, target, key)
        return self.props[found] if found is not None else default

    def cluster(self, alias: str, key: str) -> str | None:
        """A cluster's client setting: ``A.key``, else the top-level ``key`` (MirrorMakerConfig.clusterProps)."""
        value = self.get(f"{alias}.{key}")
        return value if value is not None else self.get(key)

    def with_prefix(self, prefix: str) -> dict[str, str]:
        return {k[len(prefix):]: v for k, v in self.props.items() if k.startswith(prefix)}
