"""Markdown table pieces the bench's report and its sections share (leaf module: imports no bench module)."""

from __future__ import annotations

from typing import Any


def n(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, (int, float)):
        return f"{value:,.{digits}f}"
    return str(value)


def table(headers: list[str], rows: list[list[str]], align: str) -> str:
    """A GitHub table; ``align`` has one character per column: l(eft) or r(ight)."""
    marks = [":--" if a == "l" else "--:" for a in align]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(marks) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
