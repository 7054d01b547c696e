"""Declaring, reading and documenting mirror-file fields: settings maps, nested sections, the field
walk every section shares, and the Markdown field reference generated from the declarations.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import MISSING, dataclass, field
from typing import Any, Callable, Iterator, Mapping

from eosmirror.core import secrets
from eosmirror.core.fieldkinds import ENV_REF_RE, Invalid, Kind, bad, suggestion


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


@dataclass(frozen=True, kw_only=True)
class Settings(Kind):
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
            raise Invalid(f"{shown} is not allowed; expected {self.what()}")
        if not all(isinstance(k, str) for k in value) or any(k not in value for k in self.required):
            raise bad(value, self.what())
        for key, item in value.items():
            self._check(key, item)
        if self.spark:   # Spark reads booleans as "true"/"false"
            return FrozenMap({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()})
        return FrozenMap(value)

    def _check(self, key: str, item: Any) -> None:
        if self.no_inline_secrets and secrets.is_secret_key(key) and not (isinstance(item, str) and ENV_REF_RE.match(item)):
            # Never echo the value: it may be a real secret.
            raise Invalid(f"holds a secret inline; secrets never go into the mirror file. Use an Airflow "
                           f"connection, or write `{key}: ${{ENV_VAR}}` and export ENV_VAR", key)
        if not isinstance(item, (str, int, float)):   # bool is an int
            raise bad(item, "a string, number or boolean", key)
        if self.spark and not key.startswith("spark."):
            raise Invalid(f"the name `{key}` is not a Spark property; expected a name that starts with "
                           f"'spark.' (did you mean `spark.{key}`?)", key)


@dataclass(frozen=True, kw_only=True)
class Section(Kind):
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
            raise bad(value, self.what())
        return self.cls(**read_fields(self.cls, value))


def declare(kind: Kind, doc: str, default: Any = MISSING, *, derive: Callable[[dict[str, Any]], Any] | None = None,
           shown_default: str | None = None) -> Any:
    """Declares one field: how it is read (``kind``), its default and what it means (``doc``).

    ``derive`` computes the default from the fields read before it (progress_group from name).
    """
    return field(default=default, metadata={"kind": kind, "doc": doc, "derive": derive,
                                            "shown_default": shown_default})


def read_fields(cls: type, raw: Mapping[Any, Any]) -> dict[str, Any]:
    """Every declared field of ``cls`` read from ``raw``; an absent optional field keeps its default."""
    declared = dataclasses.fields(cls)
    refuse_unknown(raw, [f.name for f in declared])
    values: dict[str, Any] = {}
    for f in declared:
        kind = f.metadata["kind"]
        if f.name in raw:
            try:
                values[f.name] = kind.parse(raw[f.name])
            except Invalid as exc:
                raise exc.under(f.name) from None
        elif f.default is MISSING and f.default_factory is MISSING:
            raise Invalid(f"missing; expected {kind.what()}", f.name)
        elif f.metadata["derive"] is not None:
            values[f.name] = f.metadata["derive"](values)
    return values


def refuse_unknown(raw: Mapping[Any, Any], known: list[str]) -> None:
    for key in raw:
        if key not in known:
            raise Invalid(f"no such field{suggestion(key, known)}; known fields: {', '.join(sorted(known))}",
                           str(key))


# --- the field reference ---------------------------------------------------------------------------

def _shown_default(f: dataclasses.Field[Any]) -> str:
    if f.metadata["shown_default"]:
        return str(f.metadata["shown_default"])
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
        if isinstance(kind, Section) and not kind.exactly_one:
            yield f"`{prefix}{f.name}`", "a mapping", "", f.metadata["doc"]
            yield from _reference_rows(kind.cls, f"{prefix}{f.name}.")
        else:
            yield f"`{prefix}{f.name}`", kind.what(), _shown_default(f), f.metadata["doc"]


def reference_table(cls: type) -> str:
    """Every field of ``cls`` (nested sections dotted) as a Markdown table: field, type, default, meaning."""
    lines = ["| field | type | default | meaning |", "|---|---|---|---|"]
    for row in _reference_rows(cls):
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    return "\n".join(lines) + "\n"


