"""The front door and the manual stay true: every relative link in README.md and docs/ resolves
(files and #anchors), every `eosmirror <command>` they show exists in the CLI, and README.md stays a
front door (at most 250 lines)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "docker" / "README.md"]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to '-'."""
    found = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"^[a-z]+://|^mailto:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: broken links {broken}"


def test_every_eosmirror_command_shown_exists():
    from eosmirror.cli import build_parser

    parser = build_parser()
    commands = set(next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices)
    shown = set()
    for page in PAGES:
        shown |= set(re.findall(r"`eosmirror ([a-z][a-z0-9-]*)", page.read_text()))
    assert shown, "no `eosmirror <command>` found: the pattern is wrong"
    assert shown <= commands, f"commands shown in the docs that the CLI lacks: {sorted(shown - commands)}"


def test_the_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move the detail to a page in docs/"
    text = "\n".join(lines)
    assert "make demo" in text and "make test" in text
