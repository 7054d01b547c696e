"""The shipped package keeps the shape docs/architecture.md promises: small functions, edges imported lazily,
and executors' code (core, kafka, slot) free of the driver, Spark, Airflow and the dev tools."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "plugins" / "eosmirror"
MAX_FUNCTION_LINES = 60


def modules():
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def top_level_imports(tree: ast.Module) -> list[str]:
    names = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def test_no_function_is_longer_than_sixty_lines():
    long = []
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({length} lines)")
    assert long == [], "functions over 60 lines:\n" + "\n".join(long)


def test_no_airflow_spark_or_dev_tool_import_at_module_top():
    bad = []
    for path in modules():
        for name in top_level_imports(ast.parse(path.read_text())):
            if name.split(".")[0] in ("airflow", "pyspark", "eosmirror_tools"):
                bad.append(f"{path.relative_to(PACKAGE)}: {name}")
    assert bad == []


def test_executor_code_imports_only_core_kafka_and_slot():
    """What executors run must not pull in the driver, the edges or the tools, even lazily."""
    bad = []
    for package in ("core", "kafka", "slot"):
        for path in sorted((PACKAGE / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                module = node.module if isinstance(node, ast.ImportFrom) else None
                if module and module.startswith("eosmirror") and module.split(".")[1:2] not in (
                        ["core"], ["kafka"], ["slot"]) and module != "eosmirror":
                    bad.append(f"{path.relative_to(PACKAGE)}: {module}")
    assert bad == [], bad


def test_every_integration_and_e2e_test_file_carries_its_marker():
    tests = Path(__file__).resolve().parents[1]
    missing = [str(p.relative_to(tests)) for folder in ("integration", "e2e") for p in sorted((tests / folder).glob("test_*.py"))
               if f"pytest.mark.{folder}" not in p.read_text()]
    assert not missing, f"test files without their `pytestmark = pytest.mark.<folder>`: {missing}"
