"""No test file imports another test file: what tests share lives in tests/support/ (or tests/helpers.py,
a conftest.py), so a test file can be moved, renamed or run alone, and a failure is reported under the
name of the test that failed."""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
            found.extend(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return found


def test_no_test_file_imports_another_test_file():
    offenders = {}
    for path in TESTS.rglob("*.py"):
        if path.parent.name == "__pycache__":
            continue
        tests_imported = [m for m in imported_modules(path) if m.startswith("tests.")
                          and any(part.startswith("test_") for part in m.split(".")[1:])]
        if tests_imported:
            offenders[path.relative_to(TESTS).as_posix()] = sorted(set(tests_imported))
    assert not offenders, f"test files imported by other files (move what they share to tests/support/): {offenders}"


def test_the_check_sees_an_import_of_a_test_file(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from tests.integration.test_follow import wait_for\nfrom tests.e2e import test_kill\n")
    assert imported_modules(probe) == ["tests.integration.test_follow", "tests.integration.test_follow.wait_for",
                                       "tests.e2e", "tests.e2e.test_kill"]
