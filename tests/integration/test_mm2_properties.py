"""import-mm2 reads mm2.properties as MirrorMaker 2 itself does: a corpus of awkward files is loaded by
Kafka's ``Utils.loadProps`` (java.util.Properties, the call MirrorMaker.main makes; compiled and run
with the project's JDK against the Kafka jars) and by ``eosmirror.core.mm2props``: the maps are equal,
key for key. No broker is needed; the JDK is, hence the integration mark."""

from __future__ import annotations

from pathlib import Path

import pytest

from eosmirror.core import mm2props
from eosmirror.core.errors import ConfigError
from tests.integration import mm2java

pytestmark = pytest.mark.integration

# Bytes, not text: line endings, trailing spaces and non-ASCII bytes are part of what is tested.
CORPUS: dict[str, bytes] = {
    "escaped-dots": b"A->B.topics = orders\\.t, pay\\\\..*\nA->B.topics.exclude=\\.hidden\\..*\n",
    "backslashes": b"win = C:\\\\path\\\\to\\\\file\nlone = a\\b\\c\nregex = ^\\\\d+\\\\.\\\\w$\nend = x\\\\\n",
    "unicode-escapes": (b"cafe = caf\\u00e9 \\u0041\\u00E9\n\\u006b\\u0065y = escaped key\n"
                        b"emoji = \\uD83D\\uDE00\nlone.surrogate = \\uD83D\ndash\\u002dkey = v\n"),
    "continuation-odd": b"a = one\\\n     two\\\n\tthree\nb = x \\\n  # not a comment\nc = tail\\\n",
    "continuation-even": b"a = one\\\\\nb = two\\\\\\\\\nc = three\\\\\\\n   four\nd = five\\\\\\\\\\\n six\n",
    "continuation-blank": b"a = one\\\n\nb = two\\\n   \nc = three\n",
    "separators": (b"colon:value\nspace value\ntab\tvalue\nbig   :   v\neq = = v\neqcolon=:v\n"
                   b"key\\:with\\ colon\\=eq = v\nempty=\nalone\n  indented = v\nff\x0cvalue\n"),
    "trailing-spaces": b"a = v   \nb = v\\ \nc = \\  \nd=\t\n",
    "comments": (b"# topics = secret\n   ! a = b\n#!\n\t# tab comment\nreal = b # not a comment\n"
                 b"bang = !x\n#\\\nafter = comment ending in a backslash does not continue\n"),
    "duplicates": b"a = 1\nb = 1\na = 2\nb\nA->B.topics = x\nA->B.topics = y, z\n",
    "line-endings": b"crlf = 1\r\ncr = 2\rlf = 3\nmixed = a\\\r\n   b\\\r  c\n",
    "latin1-and-utf8": b"latin1 = caf\xe9\nutf8 = caf\xc3\xa9\nkey\xe9 = v\n",
    "escape-letters": b"t = a\\tb\nn = a\\nb\nr = a\\rb\nf = a\\fb\nb = a\\bb\nz = \\z\\q\\\"\\'\n",
    "no-final-newline": b"a = 1\nb = 2",
    "empty": b"",
    "only-comments": b"# one\n! two\n\n   \n",
    "realistic": (b"clusters = A, B\nA.bootstrap.servers = a1:9092, a2:9092\nB.bootstrap.servers: b1:9092\n"
                  b"A->B.enabled = true\nA->B.topics = orders\\.t, payments\\\\..*, \\\n    inventory-.*\n"
                  b"A->B.groups = app\\..*\nreplication.policy.separator = _\n"),
}


def hexed(text: str) -> str:
    """As LoadProperties.java prints a string: 'x' then UTF-16 code units, 4 hex digits each."""
    units = text.encode("utf-16-be", "surrogatepass")
    return "x" + units.hex()


@pytest.fixture(scope="session")
def java_classes(tmp_path_factory) -> str:
    return mm2java.compile_helpers(tmp_path_factory.mktemp("java-classes"))


def java_loads(classpath: str, files: list[Path]) -> dict[str, dict[str, str]]:
    ran = mm2java.run(classpath, "LoadProperties", *map(str, files))
    assert ran.returncode == 0, ran.stderr[-3000:]
    maps: dict[str, dict[str, str]] = {}
    for line in ran.stdout.splitlines():
        if line.startswith("== "):
            current = maps.setdefault(Path(line[3:]).stem, {})
        elif line:
            key, value = line.split(" ")
            current[key] = value
    return maps


def test_every_awkward_file_reads_as_java_reads_it(java_classes, tmp_path):
    files = []
    for name, data in CORPUS.items():
        (tmp_path / f"{name}.properties").write_bytes(data)
        files.append(tmp_path / f"{name}.properties")
    by_java = java_loads(java_classes, files)
    assert sorted(by_java) == sorted(CORPUS)
    for name, data in CORPUS.items():
        ours = {hexed(k): hexed(v) for k, v in mm2props.parse(data, name).values.items()}
        assert ours == by_java[name], (name, {bytes.fromhex(k[1:]).decode("utf-16-be", "surrogatepass"):
                                              bytes.fromhex(v[1:]).decode("utf-16-be", "surrogatepass")
                                              for k, v in by_java[name].items()})


def test_the_issue_file_gives_the_regex_mm2_replicates(java_classes, tmp_path):
    """`A->B.topics = orders\\.t` is the regex `orders.t` for MM2 (Java drops the backslash)."""
    path = tmp_path / "issue.properties"
    path.write_bytes(b"A->B.topics = orders\\.t\nA->B.groups = orders\\\\..*\n")
    by_java = java_loads(java_classes, [path])["issue"]
    assert by_java[hexed("A->B.topics")] == hexed("orders.t")
    assert by_java[hexed("A->B.groups")] == hexed("orders\\..*")
    assert mm2props.parse(path.read_bytes()).values == {"A->B.topics": "orders.t", "A->B.groups": "orders\\..*"}


def test_a_malformed_unicode_escape_is_refused_by_both(java_classes, tmp_path):
    path = tmp_path / "bad.properties"
    path.write_bytes(b"a = 1\n\nb = x\\u12g4\n")
    ran = mm2java.run(java_classes, "LoadProperties", str(path))
    assert ran.returncode != 0 and "Malformed \\uxxxx encoding" in ran.stderr, ran.stderr[-2000:]
    with pytest.raises(ConfigError, match=r"bad.properties line 3: the setting that starts here holds a malformed"):
        mm2props.parse(path.read_bytes(), "bad.properties")
