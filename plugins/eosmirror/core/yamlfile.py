"""Reading ``mirrors.yaml``: PyYAML's safe loader, refusing a key written twice in one mapping, and errors that
name the line and column but never quote the text (a line may hold a secret)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from eosmirror.core.errors import ConfigError


@functools.cache
def _yaml_loader() -> type:
    import yaml  # here: PyYAML is the loaders' dependency, not the executors'

    class UniqueKeyLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no type stubs
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


def read_yaml(path: Path) -> Any:
    """The YAML document in ``path``, or a ConfigError that says what to fix."""
    import yaml  # here: PyYAML is the loaders' dependency, not the executors'

    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read the mirror definitions {path}: {exc.strerror}; set EOSMIRROR_CONFIG or "
                          f"pass --config") from None
    try:
        return yaml.load(text, Loader=_yaml_loader())   # a SafeLoader
    except yaml.MarkedYAMLError as exc:
        # Line, column and problem only: PyYAML's own text quotes the line, which may hold a secret.
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{path}: not valid YAML{where}: {exc.problem or exc.context or 'syntax error'}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {type(exc).__name__}") from None
