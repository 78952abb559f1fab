"""Each CIFAR sweep is expanded once: ``pnc.studies.cifar.sweep.expand_sweep``, called only by the
workflow (workflow/rules/cifar/common.smk), and a configuration id is a key into its table, never
text to parse. An AST scan of every module under ``pnc/`` that belongs to the CIFAR study fails on
a second expansion (``itertools.product``; a comprehension or nested loops over two independent
sequences of which one reads a grid, ``<section>.values("<key>")`` or ``.grid``, directly or
through a name bound to it in the same function; a call of ``expand_sweep``) or on an id read as
text (``split``, ``partition``, a regular expression, ... applied to an id); a planted second
expansion and a planted id parse are caught. The expansion lists the configurations in the
order each method builds them (``candidates``), and a section narrowed to one id builds that
configuration only.

Not caught: a product over sequences a helper returns (P&C's ``candidates`` unpacks its grids
from ``_space``, and lists every point for the in-process run of the method contract; the
workflow's jobs give it only the configuration the selection stage chose)."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PNC = ROOT / "pnc"
GRID_MODULE = "pnc/studies/cifar/sweep.py"
EXPANSION = "expand_sweep"

#: str methods and ``re`` functions that read an id's text
_TEXT_READERS = {"split", "rsplit", "partition", "rpartition", "removeprefix", "removesuffix"}
_RE_READERS = {"match", "fullmatch", "search", "findall", "finditer", "split", "sub"}


def _is_cifar(path: Path) -> bool:
    rel = path.relative_to(ROOT).as_posix()
    return "cifar" in rel or "/ood/" in rel


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _mentions_id(node: ast.AST) -> bool:
    """Whether ``node`` names an id: a name or attribute ``id``, ``*_id``, ``ids``, or a
    subscript by the string ``"id"``."""
    for n in ast.walk(node):
        word = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else None
        if word is not None and (word in ("id", "ids") or word.endswith("_id")):
            return True
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant):
            if n.slice.value == "id":
                return True
    return False


def _reads_grid(node: ast.AST, derived: set[str]) -> bool:
    """``node`` reads a grid: ``X.values("key")``, ``X.grid``, or a name bound to such a read."""
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            if n.func.attr == "values" and n.args and isinstance(n.args[0], ast.Constant):
                return True
        if isinstance(n, ast.Attribute) and n.attr == "grid":
            return True
        if isinstance(n, ast.Name) and n.id in derived:
            return True
    return False


def _independent(generators: list[ast.comprehension], derived: set[str]) -> bool:
    """Two of the loops range over sequences that do not depend on each other (a product), one
    of them a grid's."""
    bound: set[str] = set()
    grid = False
    for i, gen in enumerate(generators):
        grid |= _reads_grid(gen.iter, derived)
        if i and not (_names(gen.iter) & bound) and grid:
            return True
        bound |= _names(gen.target)
    return False


class _Scan(ast.NodeVisitor):
    def __init__(self, where: str):
        self.where, self.found, self.scope = where, [], []
        self.derived: list[set[str]] = [set()]  # names bound to a grid read, per function

    def _add(self, node: ast.AST, what: str) -> None:
        qualname = ".".join(self.scope) or "module"
        self.found.append(f"{self.where}:{node.lineno} ({qualname}): {what}")

    def _scoped(self, node):
        self.scope.append(node.name)
        derived: set[str] = set()
        for n in ast.walk(node):
            if isinstance(n, ast.Assign) and _reads_grid(n.value, set()):
                derived |= {t.id for t in n.targets for t in ast.walk(t) if isinstance(t, ast.Name)}
        self.derived.append(derived)
        self.generic_visit(node)
        self.derived.pop()
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module == "itertools" and any(a.name == "product" for a in node.names):
            self._add(node, "imports itertools.product")
        if any(a.name == EXPANSION for a in node.names):
            self._add(node, f"imports {EXPANSION}")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "product" and isinstance(node.value, ast.Name):
            if node.value.id == "itertools":
                self._add(node, "itertools.product")
        if node.attr == EXPANSION:
            self._add(node, f"calls {EXPANSION}")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == EXPANSION and isinstance(node.ctx, ast.Load):
            self._add(node, f"calls {EXPANSION}")

    def _comprehension(self, node) -> None:
        if _independent(node.generators, self.derived[-1]):
            self._add(node, "a comprehension over independent sequences (a product)")
        self.generic_visit(node)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def visit_For(self, node: ast.For) -> None:
        bound, derived = _names(node.target), self.derived[-1]
        outer = _reads_grid(node.iter, derived)
        for inner in ast.walk(ast.Module(body=node.body, type_ignores=[])):
            if isinstance(inner, ast.For) and not (_names(inner.iter) & bound):
                independent = not _names(inner.iter) & _assigned(node.body)
                if independent and (outer or _reads_grid(inner.iter, derived)):
                    self._add(inner, "nested loops over independent sequences (a product)")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            receiver = func.value
            if func.attr in _TEXT_READERS and _mentions_id(receiver):
                self._add(node, f"reads an id as text (.{func.attr})")
            if isinstance(receiver, ast.Name) and receiver.id == "re":
                if func.attr in _RE_READERS and any(_mentions_id(a) for a in node.args[1:]):
                    self._add(node, f"reads an id as text (re.{func.attr})")
        self.generic_visit(node)


def _assigned(body: list[ast.stmt]) -> set[str]:
    """Names bound in ``body`` (a loop that ranges over one of them depends on the outer loop)."""
    out: set[str] = set()
    for n in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
    return out


def scan(path: Path, where: str | None = None) -> list[str]:
    """Every second expansion of a sweep and every id read as text in the module ``path``."""
    visitor = _Scan(where or path.relative_to(ROOT).as_posix())
    visitor.visit(ast.parse(path.read_text()))
    return visitor.found


def _cifar_modules() -> list[Path]:
    return [p for p in sorted(PNC.rglob("*.py")) if _is_cifar(p)]


def test_the_cifar_modules_are_found():
    found = {p.relative_to(ROOT).as_posix() for p in _cifar_modules()}
    assert GRID_MODULE in found and "pnc/studies/cifar/jobs.py" in found and len(found) > 10


def test_only_the_grid_module_expands_a_cifar_sweep_and_no_module_parses_an_id():
    problems = [f for p in _cifar_modules() if p.relative_to(ROOT).as_posix() != GRID_MODULE
                for f in scan(p)]  # fmt: skip
    assert problems == []


def test_the_grid_module_expands_once_and_parses_nothing():
    found = scan(ROOT / GRID_MODULE)
    assert found == []  # its points come from grid_points (pnc/methods/entry.py), called once
    assert (ROOT / GRID_MODULE).read_text().count("grid_points(") == 1


def test_only_the_workflow_calls_the_expansion():
    """Outside pnc/, only workflow/rules/cifar/common.smk names it (pnc/ is the scan above)."""
    files = [*ROOT.glob("*.smk"), *ROOT.glob("Snakefile"), *(ROOT / "workflow").rglob("*.smk"),
             *(ROOT / "scripts").rglob("*.py"), *(ROOT / "examples").rglob("*.py"),
             *(p for p in PNC.rglob("*.py") if not _is_cifar(p))]  # fmt: skip
    callers = sorted(p.relative_to(ROOT).as_posix() for p in files if EXPANSION in p.read_text())
    assert callers == ["workflow/rules/cifar/common.smk"]


@pytest.mark.parametrize(
    ("planted", "caught"),
    [
        (
            "import itertools\n\ndef sweep(config):\n"
            "    return list(itertools.product(*config.grid.values()))\n",
            "itertools.product",
        ),
        (
            "def sweep(config):\n    return [(b, s) for b in config.values('block')"
            " for s in config.values('sigma')]\n",
            "a product",
        ),
        (
            "def sweep(config):\n    out = []\n    for b in config.values('block'):\n"
            "        for s in config.values('sigma'):\n            out.append((b, s))\n"
            "    return out\n",
            "nested loops",
        ),
        (
            "from pnc.studies.cifar.sweep import expand_sweep\n\ndef again(section):\n"
            "    return expand_sweep('pnc', section)\n",
            "expand_sweep",
        ),
        (
            "def sweep(config):\n    sigmas = config.values('sigma')\n"
            "    return [(b, s) for b in range(3) for s in sigmas]\n",
            "a product",
        ),
        ("def index(config_id):\n    return int(config_id.rsplit('-', 1)[1])\n", ".rsplit"),
        ("def index(rec):\n    return rec['id'].partition('-')[2]\n", ".partition"),
        ("import re\n\ndef index(rec):\n    return re.match(r'.*-(\\d+)', rec['id'])\n", "re.match"),
    ],
)  # fmt: skip
def test_a_planted_second_expansion_or_id_parse_is_caught(tmp_path, planted, caught):
    module = tmp_path / "planted.py"
    module.write_text(planted)
    found = scan(module, "pnc/studies/cifar/planted.py")
    assert any(caught in f for f in found), found


def test_flattening_a_nested_list_or_looping_over_seeds_and_methods_is_not_an_expansion(tmp_path):
    module = tmp_path / "flat.py"
    module.write_text(
        "def flat(groups, seeds, methods):\n    out = [f for fs in groups.values() for f in fs]\n"
        "    for name in groups:\n        for item in groups[name]:\n            out.append(item)\n"
        "    for seed in seeds:\n        for method in methods:\n            out.append(seed)\n"
        "    return out\n"
    )
    assert scan(module, "pnc/studies/cifar/flat.py") == []


# ----------------------------------------------------------------------------- the order


def _fake_seed(config: dict):
    """A seed's context and training runs as far as listing the configurations of ``config``
    reads them (nothing is built: a configuration's ``build`` is never called here)."""
    from pnc.studies.cifar.jobs import resnet_config

    n = 1 + max(
        config["methods"]["pnc"]["fixed"]["calibration_size"],
        config["methods"]["swag"]["fixed"]["bn_refresh"],
    )
    ctx = types.SimpleNamespace(
        seed=0,
        train_x=np.zeros((n, 32, 32, 3), np.uint8),
        train_y=np.zeros(n, np.int32),
        config=resnet_config(config["model"]),
        batch_size=32,
    )
    run = types.SimpleNamespace(variables={}, swag={})
    return ctx, {r: run for r in ("base", "member1", "member2", "member3", "member4")} | {
        f"dropout{r}": run for r in ("0.1", "0.2", "0.3", "0.5")
    }


@pytest.mark.parametrize("config_file", ["config/cifar_tiny.yaml", "config/cifar.yaml"])
def test_the_expansion_lists_the_configurations_in_the_order_each_method_builds_them(config_file):
    """Each selecting method's configurations (``candidates``, the default sweep's order) are
    the expansion's, id by id."""
    from test_cifar_configs import OVERLAYS, effective

    from pnc.methods import ood as registry
    from pnc.studies.cifar.sweep import Sweep

    study = effective(OVERLAYS[Path(config_file).name])
    sweeps = study["sweeps"]
    ctx, runs = _fake_seed(study["config"])
    for method, data in sweeps.items():
        spec, sweep = registry.get(method), Sweep.from_table(method, data)
        if not spec.selects:
            assert sweep.ids == ()
            continue
        listed = [n for n, _ in spec.candidates(sweep.config(), ctx, runs)]
        assert [sweep.id_of(n) for n in listed] == list(sweep.ids), method
        # each id, narrowed, is that one configuration
        for config_id in sweep.ids:
            (only,) = spec.candidates(sweep.at(config_id), ctx, runs)
            assert sweep.id_of(only[0]) == config_id
