"""Fixed ports of the suite's extra brokers and servers are each used by one test file only.

`make test` runs test files on two workers at once: two files that start something on the same port
fail when they meet (test_acl_sync once took test_foundation's 19692). Controllers listen on port+1."""

import re
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_fixed_port_is_used_by_two_test_files():
    users = defaultdict(set)
    for path in TESTS.rglob("*.py"):
        if path.name == "conftest.py" or path == Path(__file__):
            continue
        for port in re.findall(r"(?<![\d.])(1[89]\d{3})(?![\d.])", path.read_text()):
            users[int(port)].add(path.relative_to(TESTS).as_posix())
    shared = {port: sorted(files) for port, files in users.items() if len(files) > 1}
    assert not shared, f"ports used by more than one test file: {shared}"
    neighbours = {(a, b) for a in users for b in users if b == a + 1 and users[a] != users[b]}
    assert not neighbours, f"a broker's controller (port+1) collides with another file's port: {neighbours}"
