"""The mirror-field reference (docs/configuration.md) is generated from the field declarations in core/config.py.

The table sits between ``<!-- fields:begin -->`` and ``<!-- fields:end -->`` in docs/configuration.md; regenerate
it with ``python -m eosmirror.core.config`` and paste it between the markers.
"""

from pathlib import Path

from eosmirror.core import config

README = Path(__file__).parents[2] / "docs" / "configuration.md"
BEGIN, END = "<!-- fields:begin -->", "<!-- fields:end -->"

def test_readme_field_reference_is_the_generated_one():
    text = README.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1, "docs/configuration.md needs exactly one pair of field markers"
    section = text.split(BEGIN, 1)[1].split(END, 1)[0]
    assert section.strip() == config.field_reference().strip(), (
        "docs/configuration.md's field reference is stale: replace the text between the markers with the output of "
        "`python -m eosmirror.core.config`")

def test_the_reference_renders_as_one_markdown_table():
    lines = config.field_reference().splitlines()
    assert lines[0] == "| field | type | default | meaning |" and lines[1] == "|---|---|---|---|"
    # Every row has exactly four cells: a `|` inside a cell would split it, so cells escape it.
    assert all(line.replace("\\|", "").count("|") == 5 for line in lines), lines
