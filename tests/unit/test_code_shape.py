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


# The one module that imports Airflow at its top: the operator classes, defined at module level and importable by
# name as the providers' operators are (a class statement needs its base class when the module is read).
AIRFLOW_AT_TOP = {"airflow/operators.py"}


def test_no_airflow_spark_or_dev_tool_import_at_module_top():
    bad = []
    for path in modules():
        for name in top_level_imports(ast.parse(path.read_text())):
            allowed = str(path.relative_to(PACKAGE)) in AIRFLOW_AT_TOP and name.split(".")[0] == "airflow"
            if name.split(".")[0] in ("airflow", "pyspark", "eosmirror_tools") and not allowed:
                bad.append(f"{path.relative_to(PACKAGE)}: {name}")
    assert bad == []


def test_only_airflow_side_code_imports_the_operators():
    """What imports the operators module, directly or through others, imports Airflow: it must be a module of the
    Airflow edge (the DAG factory), never one the CLI, the driver, Spark or the executors import."""
    graph = import_graph()
    needs_airflow = {"eosmirror.airflow.operators"}
    while grown := {m for m, deps in graph.items() if deps & needs_airflow} - needs_airflow:
        needs_airflow |= grown
    assert needs_airflow == {"eosmirror.airflow.operators", "eosmirror.airflow.dags", "eosmirror.airflow.factory"}


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


def module_name(path: Path) -> str:
    parts = ["eosmirror", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def own_imports(path: Path, top_only: bool) -> set[str]:
    """The eosmirror modules ``path`` imports (``from eosmirror.x import y`` counts y when it is a module)."""
    known = {module_name(p) for p in modules()}
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("eosmirror"):
            subs = {f"{node.module}.{a.name}" for a in node.names} & known
            found |= subs or ({node.module} & known)
    return found - {module_name(path)}


def test_core_imports_nothing_of_the_edges():
    """core holds the rules; kafka, slot, driver, spark and airflow use it, never the other way round."""
    bad = [f"{p.relative_to(PACKAGE)}: {m}" for p in sorted((PACKAGE / "core").rglob("*.py"))
           for m in sorted(own_imports(p, top_only=False))
           if m.split(".")[1] in ("kafka", "slot", "driver", "spark", "airflow", "cli", "cliops")]
    assert bad == [], bad


def import_graph() -> dict[str, set[str]]:
    """Every eosmirror module and the eosmirror modules it imports, wherever the import stands: at the module top,
    under ``if TYPE_CHECKING:`` or inside a function. A lazy import still ties the two modules' ideas together."""
    graph = {module_name(p): own_imports(p, top_only=False) for p in modules()}
    return {m: {d for d in deps if not m.startswith(d + ".")} for m, deps in graph.items()}   # a package's own __init__


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest path back to itself for every module that lies on a cycle, each cycle named once."""
    cycles, named = [], set()
    for start in sorted(graph):
        paths, seen = [[start]], {start}
        while paths:
            path = paths.pop(0)
            for dep in sorted(graph.get(path[-1], ())):
                if dep == start:
                    if frozenset(path) not in named:
                        named.add(frozenset(path))
                        cycles.append(path + [start])
                    paths = []
                    break
                if dep not in seen:
                    seen.add(dep)
                    paths.append(path + [dep])
    return cycles


def test_no_import_cycle_between_modules():
    """No two modules import each other, directly or around a circle, even lazily: a cycle that hides behind
    ``TYPE_CHECKING`` or an in-function import is still two ideas that lean on each other, and the thing both
    need belongs in the module it is about (or a small new one named for it)."""
    cycles = import_cycles(import_graph())
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name != "_"


def private_names_defined(tree: ast.AST) -> set[str]:
    """The private names a module gives a meaning to: its functions, classes, methods, variables, attributes it
    assigns, parameters and import aliases."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
    return {n for n in names if is_private(n)}


def with_string_annotations(tree: ast.AST) -> list[ast.AST]:
    """The module's nodes, plus those of its annotations written as strings (``"mi._Props"``)."""
    nodes = list(ast.walk(tree))
    for node in list(nodes):
        annotations = []
        if isinstance(node, ast.arg | ast.AnnAssign):
            annotations.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            annotations.append(node.returns)
        for text in (a.value for a in annotations if isinstance(a, ast.Constant) and isinstance(a.value, str)):
            nodes += list(ast.walk(ast.parse(text, mode="eval")))
    return nodes


def module_aliases(tree: ast.AST) -> set[str]:
    """The names this module binds to an eosmirror module (``from eosmirror.driver import verify``,
    ``import eosmirror.core.naming as naming``)."""
    known = {module_name(p) for p in modules()}
    aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("eosmirror"):
            aliases |= {a.asname or a.name for a in node.names if f"{node.module}.{a.name}" in known}
        elif isinstance(node, ast.Import):
            aliases |= {a.asname or a.name.split(".")[0] for a in node.names if a.name in known}
    return aliases


def test_no_module_uses_another_modules_private_names():
    """A leading underscore says "only this module uses it": its shape may change without a look elsewhere. So no
    module takes another's private name. The rule, precisely (dunders are not private):
    1. ``from eosmirror.x import _name`` is refused;
    2. ``alias._name``, where alias is an eosmirror module this module imports, is refused;
    3. ``anything._name``, where this module gives ``_name`` no meaning of its own (no def, class, assignment,
       attribute it sets, parameter or alias) but another eosmirror module does, is refused: it reaches into
       another module's object (``self.run._resolve()``).
    A name two modules need is public, in the module whose idea it is."""
    trees = {path: ast.parse(path.read_text()) for path in modules()}
    defined = {path: private_names_defined(tree) for path, tree in trees.items()}
    bad = []
    for path, tree in trees.items():
        elsewhere = set().union(*(names for other, names in defined.items() if other != path))
        aliases = module_aliases(tree)
        where = path.relative_to(PACKAGE)
        for node in with_string_annotations(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("eosmirror"):
                bad += [f"{where}: from {node.module} import {a.name}" for a in node.names if is_private(a.name)]
            elif isinstance(node, ast.Attribute) and is_private(node.attr) and (
                    isinstance(node.value, ast.Name) and node.value.id in aliases
                    or node.attr not in defined[path] and node.attr in elsewhere):
                bad.append(f"{where}: {ast.unparse(node)}")
    assert bad == [], "another module's private names in use: " + "; ".join(sorted(set(bad)))


# A module is cut where its idea ends, never at a line count: a count that modules sit right under (copier.py was
# 400 of 400, fieldkinds.py 300 of 300, config.py 297 of 300) starts deciding the cuts, and the cuts it forces
# leave halves that import each other. So the number below is only a generous guard: a module past it has almost
# certainly grown into two ideas; one well under it may hold two as well, and one near it may rightly hold one.
MAX_MODULE_LINES = 600


def test_no_shipped_module_has_grown_past_the_guard():
    long = [f"{p.relative_to(PACKAGE)} ({n} lines)" for p in modules()
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES]
    assert long == [], f"modules over {MAX_MODULE_LINES} lines (find the two ideas inside and part them): {long}"


MAX_OWN_IMPORTS_IN_FUNCTIONS = 11


def test_own_modules_are_imported_at_module_top():
    """eosmirror's own modules are imported at the top, where a reader sees what a module depends on; the few
    left inside functions keep a heavy or edge module (Spark, Airflow) out of a light one's import, each says
    so. None may hide a cycle: test_no_import_cycle_between_modules reads these imports too."""
    inside = []
    for path in modules():
        tree = ast.parse(path.read_text())
        for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("eosmirror") or \
                        isinstance(node, ast.Import) and any(a.name.startswith("eosmirror") for a in node.names):
                    inside.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    inside = sorted(set(inside))
    assert len(inside) <= MAX_OWN_IMPORTS_IN_FUNCTIONS, f"{len(inside)} in-function own imports: {inside}"


ARCHITECTURE = PACKAGE.parents[1] / "docs" / "architecture.md"


def test_the_slot_steps_the_code_cites_are_the_architecture_pages():
    """docs/architecture.md numbers the slot's commit protocol (1-5, step 4's sub-steps 4.1-4.7); the slot's code
    cites those numbers, so a step cited in slot/ (or as "slot step N" anywhere) must exist there, with the
    same name for the sub-steps the copier's methods carry."""
    import re

    text = ARCHITECTURE.read_text()
    section = text[text.index("Then each slot"):text.index("The code carries these numbers")]
    steps = {int(n): name for n, name in re.findall(r"^(\d)\. \*\*([^*:]+)", section, re.M)}
    subs = {int(n): name for n, name in re.findall(r"^   (\d)\. (\w+)", section, re.M)}
    assert sorted(steps) == [1, 2, 3, 4, 5] and sorted(subs) == list(range(1, 8)), (steps, subs)
    cited = [(p, m) for p in sorted((PACKAGE / "slot").glob("*.py"))
             for m in re.finditer(r"[Ss]tep (\d)(?:\.(\d))?\b", p.read_text())]
    cited += [(p, m) for p in modules() for m in re.finditer(r"[Ss]lot step (\d)(?:\.(\d))?\b", p.read_text())]
    bad = [f"{p.relative_to(PACKAGE)}: {m.group(0)}" for p, m in cited
           if int(m.group(1)) not in steps or (m.group(2) and (m.group(1) != "4" or int(m.group(2)) not in subs))]
    assert cited and bad == [], bad
    # The sub-steps whose method docstrings name them say what the page says (flush, check, offset sync).
    copier = (PACKAGE / "slot" / "copier.py").read_text()
    for number, word in ((3, "acknowledged"), (4, "ends at"), (5, "offset sync")):
        assert re.search(rf"Step 4\.{number}: [^\n]*{word}", copier), (number, word)


def parameters(path: Path):
    """(function, its parameters) of every function and method in ``path``."""
    for fn in (n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        yield fn, fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs


def test_a_parameter_named_cluster_is_a_cluster():
    """`cluster` means one thing: a kafka.cluster.Cluster, annotated so. A cluster's name in messages is
    `cluster_label` (or `label`, `source_label`, ...), its librdkafka settings `settings`."""
    bad = [f"{path.relative_to(PACKAGE)}:{fn.lineno} {fn.name}({arg.arg}: "
           f"{ast.unparse(arg.annotation) if arg.annotation else 'no annotation'})"
           for path in modules() for fn, args in parameters(path) for arg in args
           if arg.arg == "cluster" and (arg.annotation is None or ast.unparse(arg.annotation).strip("'\"") != "Cluster")]
    assert bad == [], bad


def is_settings(name: str) -> bool:
    """A cluster's parts other than its label: its librdkafka settings, or the admin client built from them."""
    return name in ("settings", "conf", "admin") or name.endswith(("_conf", "_settings", "_admin"))


def is_label(name: str) -> bool:
    return name in ("label", "cluster_label") or name.endswith("_label")


def test_a_clusters_settings_and_label_travel_as_one_cluster():
    """A function that needs a cluster's settings and the label messages name it by takes the one `Cluster`
    (kafka.cluster): passed apart, the two can come from different clusters and every caller unpacks them.
    The same for its admin client and label. Settings alone (a client built from them) or a label alone (a
    message about a cluster) stay plain. Excepted: kafka/cluster.py, which builds a Cluster from its parts, and
    ListOffsets on a bare admin client (kafka/offsets.py), which slots and the tools hold without a Cluster."""
    allowed = {("kafka/cluster.py", "from_settings"), ("kafka/offsets.py", "list_offsets"),
               ("kafka/offsets.py", "_ask")}
    bad = [f"{path.relative_to(PACKAGE)}:{fn.lineno} {fn.name}({', '.join(a.arg for a in args)})"
           for path in modules() for fn, args in parameters(path)
           if (str(path.relative_to(PACKAGE)), fn.name) not in allowed
           and any(is_settings(a.arg) for a in args) and any(is_label(a.arg) for a in args)]
    assert bad == [], "take a Cluster instead of (settings, label): " + "; ".join(bad)


TOOLS = PACKAGE.parents[1] / "tools" / "eosmirror_tools"


def test_each_tools_suite_imports_only_the_kit():
    """tools/eosmirror_tools is a kit (clusters, waits, workloads, oracles) and suites on top of it (bench, chaos,
    soak, deploy, matrix, demo): a suite imports the kit and the product, never another suite (what two suites
    share belongs in the kit), and the kit imports no suite. ``local`` is the product's name for the kit's
    clusters (``eosmirror local``), and so may import the kit alone."""
    rooms = sorted(p.name for p in TOOLS.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert {"kit", "bench", "chaos", "soak", "deploy", "matrix", "demo"} <= set(rooms), rooms
    loose = sorted(p.name for p in TOOLS.glob("*.py") if p.name != "__init__.py")
    assert loose == [], f"modules outside the kit and the suites: {loose}"
    bad = []
    for room in rooms:
        for path in sorted((TOOLS / room).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                for name in names:
                    parts = name.split(".")
                    if parts[0] == "eosmirror_tools" and (len(parts) < 2 or parts[1] not in (room, "kit")):
                        bad.append(f"{path.relative_to(TOOLS)}: {name}")
    assert bad == [], "imports between suites (or of a suite by the kit): " + "; ".join(bad)
