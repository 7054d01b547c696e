"""An ``mm2.properties`` file read exactly as MirrorMaker 2 reads it.

MM2 (``org.apache.kafka.connect.mirror.MirrorMaker.main``) loads the file with Kafka's
``Utils.loadProps``, which in Kafka 4.3.1 is ``Files.newInputStream`` + ``Properties.load(InputStream)``
(read from the bytecode of kafka-clients-4.3.1.jar; older releases used a ``FileInputStream``, the same
thing). ``Properties.load(InputStream)`` decodes ISO-8859-1, one byte per character; anything else is
written as ``\\uXXXX``. So the bytes are decoded as latin-1 here -- never UTF-8 -- and the syntax is
``java.util.Properties``' own, as implemented by the ``javaproperties`` library: keys AND values
unescaped (``\\.`` is ``.``, ``\\\\`` is ``\\``, ``\\t``, ``\\uXXXX``), a line ending in an odd number of
backslashes continues, separators ``=``, ``:`` or whitespace, ``#``/``!`` comments, the last duplicate
wins. tests/integration/test_mm2_properties.py loads a corpus of awkward files with
``java.util.Properties`` itself and compares the maps key for key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import javaproperties

from eosmirror.core.errors import ConfigError

_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass
class Properties:
    """The file's settings, and the line each one (its last occurrence) starts on, for messages."""

    values: dict[str, str] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    name: str = "mm2.properties"

    def where(self, key: str) -> str:
        """``name line N: `key``` -- how a message points at a setting."""
        line = self.lines.get(key)
        return f"{self.name}{f' line {line}' if line else ''}: `{key}`"


def parse(data: bytes | str, name: str = "mm2.properties") -> Properties:
    """``data`` (the file's bytes; a str is taken as already decoded) as java.util.Properties reads it."""
    text = data.decode("iso-8859-1") if isinstance(data, bytes) else data
    props, line = Properties(name=name), 1
    try:
        for element in javaproperties.parse(text):
            if isinstance(element, javaproperties.KeyValue):
                props.values.pop(element.key, None)   # the last duplicate wins, in its place
                props.values[element.key], props.lines[element.key] = element.value, line
            line += len(_LINE_END.findall(element.source))
    except javaproperties.InvalidUEscapeError:
        # Java refuses the whole file too (IllegalArgumentException "Malformed \\uxxxx encoding"). The
        # escape itself is not quoted: it is part of a value, and the value may be a password.
        raise ConfigError(f"{name} line {line}: the setting that starts here holds a malformed \\uXXXX escape "
                          f"(a \\u must be followed by 4 hex digits); MirrorMaker 2 cannot read this file "
                          f"either. Fix the escape") from None
    return props


def read(path: str) -> Properties:
    """The file at ``path``; unreadable -> ConfigError naming it."""
    from pathlib import Path

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    return parse(data, Path(path).name)
