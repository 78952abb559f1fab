"""The package's layering: each module imports only from the layers it is allowed to (docs/modules.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "pnc"

CORE = {
    "pnc",
    "pnc.mlp",
    "pnc.train",
    "pnc.perturb_correct",
    "pnc.any_model",
    "pnc._linalg",
    "pnc.diagnostics",
    "pnc.predictive",
    "pnc.keys",
    "pnc.io",
    "pnc.compile_cache",
    "pnc.roc",
    "pnc.swag_gaussian",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


#: subpackages of the core layer (the method itself, e.g. convolutional P&C)
CORE_PACKAGES = ("pnc.conv",)


def _layer(module: str) -> str:
    if module in CORE or any(module == p or module.startswith(f"{p}.") for p in CORE_PACKAGES):
        return "core"
    if module == "pnc.study.results":
        return "results"
    if module == "pnc.report.render":
        return "render"
    for layer in ("methods", "data", "study", "report", "workflow", "bench", "cifar"):
        if module == f"pnc.{layer}" or module.startswith(f"pnc.{layer}."):
            return layer
    raise AssertionError(f"module {module} belongs to no layer; add it to the layer map")


#: layer -> the layers its modules may import (every import, also inside functions).
ALLOWED = {
    "core": {"core"},
    "results": {"methods"},
    # the table engine (LaTeX, Markdown, CSV), shared by the report and the CIFAR study's tables
    "render": set(),
    "methods": {"core", "methods"},
    "data": {"data"},
    "study": {"core", "methods", "data", "study", "results"},
    "report": {"core", "results", "render", "report"},
    "bench": {"core", "methods", "bench", "cifar"},
    "workflow": {
        "core",
        "methods",
        "data",
        "study",
        "results",
        "render",
        "report",
        "workflow",
        "cifar",
    },
    # the CIFAR-10 study: its data, training, baselines, selection and tables; it shares the
    # core's AUROC (pnc.roc) and the table engine with the MuJoCo study but imports nothing of
    # that study
    "cifar": {"core", "render", "cifar"},
}


def _imports(path: Path) -> set[str]:
    """Every ``pnc`` module imported anywhere in ``path`` (``from pnc.x import y`` -> ``pnc.x.y``
    when that is a module, else ``pnc.x``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "pnc")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != "pnc":
                continue
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in MODULES else node.module)
    return found


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


def test_layer_map_catches_a_forbidden_import(tmp_path):
    path = tmp_path / "mod.py"
    path.write_text("def f():\n    from pnc.report import tables\n    import pnc.study.grid\n")
    assert _imports(path) == {"pnc.report.tables", "pnc.study.grid"}
    assert _layer("pnc.report.tables") not in ALLOWED["core"]


def test_conv_subpackage_is_core_and_imports_only_core():
    conv = sorted(m for m in MODULES if m == "pnc.conv" or m.startswith("pnc.conv."))
    assert {"pnc.conv", "pnc.conv.patches", "pnc.conv.correction", "pnc.conv.resnet"} <= set(conv)
    assert all(_layer(m) == "core" for m in conv)
    assert _layer("pnc.study.grid") not in ALLOWED[_layer("pnc.conv.block_pnc")]
