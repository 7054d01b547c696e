"""docs/architecture.md's layout stays in step with the tree: every module of plugins/eosmirror/ and every
top-level folder and module of tools/eosmirror_tools/ has its line, and every line names something that
exists."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
PACKAGE = "plugins/eosmirror"
TOOLS = "tools/eosmirror_tools"
ENTRY = re.compile(r"^( *)(\S+)")


def layout_block(text: str) -> list[str]:
    """The lines of the first code block after the '## Layout' heading."""
    section = text.split("\n## Layout\n", 1)
    assert len(section) == 2, "docs/architecture.md has no '## Layout' section"
    fence = re.search(r"^```[^\n]*\n(.*?)^```", section[1], re.S | re.M)
    assert fence, "the Layout section has no code block"
    return fence.group(1).splitlines()


def documented(lines: list[str]) -> set[str]:
    """Paths the layout names: a name at indent 2k sits in the folder named last at indent 2(k-1)."""
    folders: list[str] = []
    named = set()
    for line in lines:
        found = ENTRY.match(line)
        if not found:
            continue
        indent, name = len(found.group(1)), found.group(2)
        assert indent % 2 == 0, f"layout line indented by {indent}, not a multiple of 2: {line!r}"
        depth = indent // 2
        assert depth <= len(folders), f"layout line deeper than its folder: {line!r}"
        path = "/".join([*folders[:depth], name.rstrip("/")])
        named.add(path)
        if name.endswith("/"):
            folders[depth:] = [name.rstrip("/")]
    return named


def in_tree() -> set[str]:
    """Every module of the package (a folder stands for its __init__.py) and the tools' top level."""
    present = set()
    for path in (ROOT / PACKAGE).rglob("*.py"):
        relative = path.relative_to(ROOT).as_posix()
        present.add(relative.rsplit("/", 1)[0] if path.name == "__init__.py" else relative)
    present |= {f"{PACKAGE}/__init__.py", TOOLS}
    for path in (ROOT / TOOLS).iterdir():
        if path.is_dir() and (path / "__init__.py").exists():
            present.add(path.relative_to(ROOT).as_posix())
        elif path.suffix == ".py" and path.name != "__init__.py":
            present.add(path.relative_to(ROOT).as_posix())
    return present


def test_the_parser_reads_nesting() -> None:
    lines = ["top/      x", "  a.py    y", "  sub/    z", "    b.py  w", "  c.py    v", "other/  u"]
    assert documented(lines) == {"top", "top/a.py", "top/sub", "top/sub/b.py", "top/c.py", "other"}


def test_the_layout_lists_every_module_and_only_those() -> None:
    named = {p for p in documented(layout_block(DOC.read_text())) if p.startswith((PACKAGE, TOOLS))}
    present = in_tree()
    missing = sorted(present - named)
    gone = sorted(named - present)
    assert not missing, f"docs/architecture.md's layout lacks {missing}: add one line each"
    assert not gone, f"docs/architecture.md's layout names {gone}, which are not in the tree: remove them"
