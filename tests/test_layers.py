"""The package's layering: each module imports only from the layers it is allowed to (ARCHITECTURE.md).

An import is an ``import`` statement anywhere in a module (also inside functions), a module named by
a string literal to ``importlib.import_module``, ``__import__`` or the workflow's
``run_library_cli``, and the same in the Snakemake files, whose Python lines are read too: the
MuJoCo study's rules, the CIFAR study's rules and the rules both include have layers of their own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "pnc"
#: The benchmarks, a top-level package beside the library (``python -m bench...``): not installed
#: with ``pnc``, and above every layer of it.
BENCH = ROOT.parent / "bench"
#: The top-level packages the scan follows: the library and its benchmarks.
PACKAGES = ("pnc", "bench")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted([*ROOT.rglob("*.py"), *BENCH.rglob("*.py")])}

#: package prefix -> layer, most specific first; every module of ``pnc`` falls under one. The
#: folders are the layers (ARCHITECTURE.md): runtime, core, methods (the shared contract and its
#: two families), the two studies, the report, the entry points.
LAYER_OF_PACKAGE = (
    ("pnc.runtime", "runtime"),
    ("pnc.core", "core"),
    ("pnc.methods.regression", "regression methods"),
    ("pnc.methods.ood", "ood methods"),
    ("pnc.methods", "methods"),
    ("pnc.studies.mujoco.data", "data"),
    ("pnc.studies.mujoco", "mujoco"),
    ("pnc.studies.cifar", "cifar"),
    ("pnc.studies", "studies"),
    ("pnc.report", "report"),
    ("pnc.workflow", "workflow"),
    ("bench", "bench"),
)


def _layer(module: str) -> str:
    if module == "pnc":  # the package's lazy re-exports of the core's public names
        return "core"
    for package, layer in LAYER_OF_PACKAGE:
        if module == package or module.startswith(f"{package}."):
            return layer
    raise AssertionError(f"module {module} belongs to no layer; add it to the layer map")


#: layer -> the layers its modules may import (every import, also inside functions). Low to high:
#: runtime (plumbing) < core (the maths) < methods (the shared contract, then its families) <
#: the studies (neither imports the other; the MuJoCo study's data imports nothing but runtime)
#: < report < the entry points (workflow stages, benchmarks).
#: Everything below the report: the plumbing, the maths, the methods and both studies.
BELOW_REPORT = {
    "runtime", "core", "methods", "regression methods", "ood methods", "data", "mujoco", "cifar",
}  # fmt: skip

ALLOWED = {
    "runtime": {"runtime"},
    "core": {"runtime", "core"},
    # the shared contract; its check suite runs both families
    "methods": {"runtime", "core", "methods", "regression methods", "ood methods"},
    "regression methods": {"runtime", "core", "methods", "regression methods"},
    "ood methods": {"runtime", "core", "methods", "ood methods"},
    "data": {"runtime", "data"},
    "mujoco": {"runtime", "core", "methods", "regression methods", "data", "mujoco"},
    "cifar": {"runtime", "core", "methods", "ood methods", "cifar"},
    "studies": {"runtime"},  # the package only checks that its extra is installed
    "report": BELOW_REPORT | {"report"},
    # the peers benchmark (bench.peers) builds its HalfCheetah task with the offline data
    # generator and scores regressions with the study's metrics; the time breakdown
    # (bench.breakdown) runs a workflow stage in its process, loaded by name
    "bench": BELOW_REPORT | {"workflow", "bench"},
    "workflow": BELOW_REPORT | {"report", "workflow"},
}


#: Calls whose first argument, a string literal, names a module they import.
IMPORTING_CALLS = ("import_module", "__import__", "run_library_cli")


def _python_of(path: Path) -> ast.AST:
    """The syntax tree of a Python file, or of the Python lines of a Snakemake file: its import
    statements (a parenthesised one across lines) and its calls of :data:`IMPORTING_CALLS` (the
    rule syntax around them is not Python)."""
    text = path.read_text()
    if path.suffix == ".py":
        return ast.parse(text)
    lines, statements, pending = text.splitlines(), [], ""
    for line in lines:
        stripped = line.strip()
        if pending:
            pending += " " + stripped
            if ")" in stripped:
                statements.append(pending)
                pending = ""
        elif stripped.startswith(("import ", "from ")) and " import" in f" {stripped}":
            if stripped.endswith("("):
                pending = stripped
            else:
                statements.append(stripped)
        else:
            for call in IMPORTING_CALLS:
                if f"{call}(" in stripped:
                    start = stripped.index(f"{call}(")
                    statements.append(stripped[start : stripped.index(")", start) + 1])
    return ast.parse("\n".join(statements))


def _imports(path: Path) -> set[str]:
    """Every ``pnc`` (or ``bench``) module imported anywhere in ``path`` (``from pnc.x import y`` -> ``pnc.x.y``
    when that is a module, else ``pnc.x``; a module named to one of :data:`IMPORTING_CALLS`)."""
    found = set()
    for node in ast.walk(_python_of(path)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] in PACKAGES)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in MODULES else node.module)
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            first = node.args[0]
            if (
                name in IMPORTING_CALLS
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
                and first.value.split(".")[0] in PACKAGES
            ):
                found.add(first.value)
    return found


def _import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph`` (module -> the modules it imports): each strongly connected
    component of more than one module, sorted (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
    return cycles


def test_no_import_cycles():
    """No two modules of ``pnc`` import each other, directly or through others, counting every
    import (also inside functions); a package's ``__init__`` counts only where it is imported."""
    graph = {m: {i for i in _imports(p) if i in MODULES and i != m} for m, p in MODULES.items()}
    assert not _import_cycles(graph), f"import cycles: {_import_cycles(graph)}"


def test_cycle_finder_finds_a_function_local_cycle(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from pnc.studies.mujoco.data.offline import rollout_policy\n")
    b.write_text("def f():\n    from pnc.studies.mujoco.data.behaviour import POLICY_DIR\n")
    graph = {
        "pnc.studies.mujoco.data.behaviour": _imports(a),
        "pnc.studies.mujoco.data.offline": _imports(b),
    }
    assert _import_cycles(graph) == [
        ["pnc.studies.mujoco.data.behaviour", "pnc.studies.mujoco.data.offline"]
    ]
    assert _import_cycles({"x": {"y"}, "y": {"z"}, "z": set()}) == []


REPO = ROOT.parent
#: The Snakemake files: the MuJoCo study's (``Snakefile``, ``workflow/rules/*.smk``), the CIFAR
#: study's (``cifar.smk``, ``workflow/rules/cifar/``) and the rules both include (``shared.smk``).
RULE_FILES = sorted([REPO / "Snakefile", REPO / "cifar.smk", *(REPO / "workflow").rglob("*.smk")])


def _rule_layer(path: Path) -> str:
    relative = path.relative_to(REPO).as_posix()
    if relative == "workflow/rules/shared.smk":
        return "shared rules"
    if relative == "cifar.smk" or relative.startswith("workflow/rules/cifar/"):
        return "cifar rules"
    return "mujoco rules"


#: rule layer -> the package layers its files may import.
RULE_ALLOWED = {
    # the MuJoCo study's rules: what its stages' entry point may import, nothing of the CIFAR study
    "mujoco rules": ALLOWED["workflow"] - {"cifar", "ood methods"},
    # the CIFAR study's rules read its own package and the OOD methods, nothing of the MuJoCo study
    "cifar rules": {"runtime", "core", "methods", "ood methods", "cifar"},
    # included by both studies' rules: study-neutral modules only
    "shared rules": {"runtime", "core"},
}


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_rule_file_imports_only_allowed_layers(path):
    layer = _rule_layer(path)
    imported = _imports(path)
    unknown = sorted(m for m in imported if m not in MODULES and m != "pnc")
    assert not unknown, f"{path.name} imports {unknown}, no module of the package"
    bad = sorted(m for m in imported if _layer(m) not in RULE_ALLOWED[layer])
    assert not bad, f"{path.name} ({layer}) imports {bad}; allowed: {sorted(RULE_ALLOWED[layer])}"


def test_rule_files_that_import_the_package_are_seen():
    """The scan finds the package imports the rules are known to make."""
    found = {p.relative_to(REPO).as_posix(): _imports(p) for p in RULE_FILES}
    assert "pnc.runtime.config_schema" in found["workflow/rules/shared.smk"]
    assert {"pnc.methods.ood", "pnc.methods.ood.posthoc"} <= found[
        "workflow/rules/cifar/common.smk"
    ]
    assert "pnc.studies.mujoco.config_check" in found["workflow/rules/common.smk"]


def test_the_scan_reads_snakemake_imports_and_importlib_calls(tmp_path):
    smk = tmp_path / "a.smk"
    smk.write_text(
        "from pnc.runtime.io import write_json\n\n"
        "rule r:\n    input:\n        'x',\n    run:\n        import pnc.studies.mujoco.grid\n\n"
        "def f():\n    from pnc.report.tables import (\n        a,\n        b,\n    )\n"
        "    return importlib.import_module('pnc.studies.cifar.jobs')\n"
    )
    assert _imports(smk) == {
        "pnc.runtime.io",
        "pnc.studies.mujoco.grid",
        "pnc.report.tables",
        "pnc.studies.cifar.jobs",
    }
    py = tmp_path / "b.py"
    py.write_text(
        "import importlib\n\ndef f(name):\n    importlib.import_module(name)\n"
        "    __import__('pnc.workflow.commands')\n    run_library_cli('pnc.studies.mujoco.data.far', 'x', [])\n"
    )
    assert _imports(py) == {"pnc.workflow.commands", "pnc.studies.mujoco.data.far"}
    assert "pnc.workflow.commands" in _imports(BENCH / "breakdown.py")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_imports_only_allowed_layers(module):
    layer = _layer(module)
    bad = sorted(m for m in _imports(MODULES[module]) if _layer(m) not in ALLOWED[layer])
    assert not bad, f"{module} ({layer}) imports {bad}; allowed layers: {sorted(ALLOWED[layer])}"


def test_no_module_name_repeats():
    """No two modules share a file name (``__init__``/``__main__`` aside)."""
    names: dict[str, list[str]] = {}
    for module, path in MODULES.items():
        if path.stem not in ("__init__", "__main__"):
            names.setdefault(path.stem, []).append(module)
    assert not {k: v for k, v in names.items() if len(v) > 1}


def test_the_library_imports_no_benchmark():
    """The benchmarks sit above the library: no module of ``pnc`` imports one (the scan sees them)."""
    assert any(m.startswith("bench.") for m in MODULES), "the scan finds no benchmark module"
    bad = {m: sorted(i for i in _imports(p) if i.split(".")[0] == "bench")
           for m, p in MODULES.items() if m.split(".")[0] == "pnc"}
    assert not {m: v for m, v in bad.items() if v}


def test_layer_map_catches_a_forbidden_import(tmp_path):
    path = tmp_path / "mod.py"
    path.write_text(
        "def f():\n    from pnc.report import tables\n    import pnc.studies.mujoco.grid\n"
    )
    assert _imports(path) == {"pnc.report.tables", "pnc.studies.mujoco.grid"}
    assert _layer("pnc.report.tables") not in ALLOWED["core"]


def test_conv_subpackage_is_core_and_imports_only_core():
    conv = sorted(m for m in MODULES if m == "pnc.core.conv" or m.startswith("pnc.core.conv."))
    assert {
        "pnc.core.conv",
        "pnc.core.conv.patches",
        "pnc.core.conv.correction",
        "pnc.core.conv.resnet",
    } <= set(conv)
    assert all(_layer(m) == "core" for m in conv)
    assert _layer("pnc.studies.mujoco.grid") not in ALLOWED[_layer("pnc.core.conv.block_pnc")]


def test_each_method_label_is_written_in_one_module():
    """A method's display label is a string literal in one module only (its class, or the shared
    label table for the methods both studies run); every other module reads it from there."""
    from pnc.methods.regression import registered

    labels = {method.label for method in registered()}
    where: dict[str, list[str]] = {label: [] for label in labels}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        exported = {  # the names in ``__all__`` are Python names, not labels
            id(node)
            for assign in ast.walk(tree)
            if isinstance(assign, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in assign.targets)
            for node in ast.walk(assign.value)
        }
        literals = {
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in exported
        }
        for label in labels & literals:
            where[label].append(module)
    assert all(where.values()), {k: v for k, v in where.items() if not v}
    assert {k: v for k, v in where.items() if len(v) > 1} == {}
