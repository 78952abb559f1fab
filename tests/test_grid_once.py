"""Each grid is expanded once, and no configuration id is read back (STYLE: "A grid is data, made
once"). The MuJoCo study's grids are expanded by pnc.studies.mujoco.grid (:func:`expand`, over
``itertools.product``) and only when the workflow builds its DAG (``expand_all`` in
workflow/rules/common.smk), which writes each method's grid table; every job reads its
configurations from the table by id. This test scans every module of pnc/ (its syntax tree) and
the MuJoCo study's Snakemake files (their text) and fails on a second expansion or on code that
reads an id: a call of ``parse_config_id`` / ``config_id_items``, or a split of text on ``=`` or
``,``. The scanners are checked on planted code below, so a scan that finds nothing is not a
scan that cannot find anything."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GRID_MODULE = "pnc/studies/mujoco/grid.py"
#: The functions that expand a grid (pnc.studies.mujoco.grid), and the one place each may be called.
EXPANSIONS = {"expand": GRID_MODULE, "expand_all": "workflow/rules/common.smk"}
#: Functions that read an id back. pnc/methods defines the id and its exact inverse, and the
#: method contract's check suite checks that inverse; nothing outside pnc/methods calls them.
ID_READERS = ("parse_config_id", "config_id_items")
ID_READERS_HOME = "pnc/methods/"
#: Splits on "=" or "," that do not read a configuration id, each with its reason.
SPLITS_ALLOWED = {
    "pnc/methods/configs.py": "defines the inverse of config_id (ID_READERS)",
    "pnc/runtime/allocator.py": "GLIBC_TUNABLES entries (name=value), not an id",
    "pnc/report/__main__.py": "the CLI's --substitute TARGET=SOURCE pairs, not an id",
}
#: ``itertools.product`` that is not a grid expansion, each with its reason.
PRODUCTS_ALLOWED = {
    "pnc/methods/entry.py": "grid_points, the one grid expansion of both studies",
    "pnc/runtime/stage.py": "the CPU lock slots (levels x CPUs), not a grid",
}


def _grid_names(tree: ast.AST) -> tuple[set[str], dict[str, str]]:
    """Names bound to the module pnc.studies.mujoco.grid, and names bound to its functions
    (``{local name: function}``)."""
    modules, functions = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "pnc.studies.mujoco":
            modules |= {a.asname or a.name for a in node.names if a.name == "grid"}
        elif isinstance(node, ast.ImportFrom) and node.module == "pnc.studies.mujoco.grid":
            functions |= {a.asname or a.name: a.name for a in node.names}
        elif isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name == "pnc.studies.mujoco.grid" and a.asname}
    return modules, functions


def _called(node: ast.Call) -> tuple[str | None, str]:
    """``(receiver name or None, function name)`` of a call."""
    func = node.func
    if isinstance(func, ast.Attribute):
        receiver = func.value.id if isinstance(func.value, ast.Name) else None
        return receiver, func.attr
    if isinstance(func, ast.Name):
        return None, func.id
    return None, ""


def python_findings(source: str, path: str) -> list[str]:
    """Every grid expansion, id reader and split on ``=``/``,`` of one Python module."""
    tree = ast.parse(source)
    modules, functions = _grid_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        receiver, name = _called(node)
        where = f"{path}:{node.lineno}"
        expansion = (
            name if receiver in modules else functions.get(name) if receiver is None else None
        )
        if expansion in EXPANSIONS and EXPANSIONS[expansion] != path:
            found.append(f"{where}: calls the grid expansion {expansion}()")
        if name == "points_for_run" or (receiver is None and name == "expand_all"):
            if path != GRID_MODULE:
                found.append(f"{where}: calls {name}()")
        if name == "product" and (receiver == "itertools" or receiver is None):
            if path not in PRODUCTS_ALLOWED:
                found.append(f"{where}: itertools.product (a second grid expansion?)")
        if name in ID_READERS and not path.startswith(ID_READERS_HOME):
            found.append(f"{where}: reads a configuration id back ({name})")
        if name in ("split", "rsplit", "partition", "rpartition") and node.args:
            sep = node.args[0]
            if isinstance(sep, ast.Constant) and sep.value in ("=", ","):
                if path not in SPLITS_ALLOWED:
                    found.append(f"{where}: splits text on {sep.value!r} (reads an id back?)")
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in (*EXPANSIONS, "points_for_run"):
            if path != GRID_MODULE:
                found.append(f"{path}:{node.lineno}: defines a grid expansion {node.name}()")
    return found


_SMK_CALL = re.compile(
    r"\b(?:(?P<module>\w+)\.)?(?P<name>expand_all|points_for_run|parse_config_id|config_id_items"
    r"|expand)\s*\("
)
_SMK_SPLIT = re.compile(r"\.(?:r?split|r?partition)\(\s*['\"][=,]['\"]")


def smk_findings(text: str, path: str) -> list[str]:
    """The same findings in a Snakemake file's text (Snakemake's own ``expand()``, which fills in
    path patterns, is not a grid expansion; ``X.expand(...)`` of a module is)."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0]
        for m in _SMK_CALL.finditer(code):
            name, module = m["name"], m["module"]
            if name == "expand" and module is None:
                continue  # snakemake's expand(pattern, **wildcards)
            if name == "expand_all" and path == EXPANSIONS["expand_all"]:
                continue
            found.append(f"{path}:{number}: {m.group(0).rstrip('(')}()")
        if _SMK_SPLIT.search(code):
            found.append(f"{path}:{number}: splits text on '=' or ','")
    return found


def _python_files() -> list[Path]:
    return sorted((ROOT / "pnc").rglob("*.py"))


def _smk_files() -> list[Path]:
    rules = ROOT / "workflow" / "rules"
    return [ROOT / "Snakefile", *sorted(rules.glob("*.smk"))]  # rules/cifar/: the CIFAR study


def test_no_module_expands_a_grid_or_reads_an_id():
    found = []
    for path in _python_files():
        found += python_findings(path.read_text(), path.relative_to(ROOT).as_posix())
    for path in _smk_files():
        found += smk_findings(path.read_text(), path.relative_to(ROOT).as_posix())
    assert found == [], "\n".join(found)


def test_the_dag_expands_the_grids_once():
    """workflow/rules/common.smk calls expand_all exactly once, and the grid module defines it."""
    text = (ROOT / EXPANSIONS["expand_all"]).read_text()
    assert len(re.findall(r"\bexpand_all\(", text)) == 1
    tree = ast.parse((ROOT / GRID_MODULE).read_text())
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert {"expand", "expand_all"} <= defined and "points_for_run" not in defined


PLANTED_PY = [
    ("from pnc.studies.mujoco import grid\ngrid.expand('pnc', {})\n", "grid expansion expand()"),
    ("from pnc.studies.mujoco import grid as g\ng.expand_all({})\n", "grid expansion expand_all()"),
    ("import pnc.studies.mujoco.grid as g\ng.expand('pnc', {})\n", "grid expansion expand()"),
    ("from pnc.studies.mujoco.grid import expand as e\ne('pnc', {})\n", "grid expansion expand()"),
    ("import itertools\nlist(itertools.product([1], [2]))\n", "itertools.product"),
    ("from itertools import product\nlist(product([1], [2]))\n", "itertools.product"),
    ("def expand(method, entry):\n    return []\n", "defines a grid expansion"),
    ("from pnc.methods.configs import config_id_items\nconfig_id_items('a=1')\n", "config_id"),
    ("def f(method, text):\n    return method.parse_config_id(text)\n", "parse_config_id"),
    ("def f(config):\n    return dict(i.split('=') for i in config.split(','))\n", "splits"),
    ("def f(config):\n    return config.partition('=')[2]\n", "splits text on '='"),
]


@pytest.mark.parametrize("source,named", PLANTED_PY)
def test_a_planted_second_expansion_or_id_reader_is_found(source, named):
    found = python_findings(source, "pnc/studies/mujoco/stages.py")
    assert found and any(named in f for f in found), found


@pytest.mark.parametrize(
    "text",
    [
        "POINTS = pnc_grid.expand('pnc', config['methods']['pnc'])\n",
        "rule r:\n    params:\n        x=lambda w: pnc_grid.expand_all(config['methods']),\n",
        "SIGMA = float(config_id.split(',')[0].partition('=')[2])\n",
        "X = parse_config_id(w.config)\n",
    ],
)
def test_a_planted_expansion_in_a_snakemake_file_is_found(text):
    assert smk_findings(text, "workflow/rules/evaluate.smk")


def test_snakemakes_own_expand_is_not_a_grid_expansion():
    text = 'expand("results/{env}/x.csv", env=ENVS)  # not a grid\n'
    assert smk_findings(text, "workflow/rules/common.smk") == []
    assert python_findings("x = 'a=b'.count('=')\n", "pnc/x.py") == []


def test_both_studies_expand_their_grids_with_the_one_function():
    """``grid_points`` (pnc/methods/entry.py) is called by the MuJoCo expansion and the CIFAR
    sweep, and by nothing else in the package or the rules."""
    files = [*ROOT.joinpath("pnc").rglob("*.py"), *ROOT.joinpath("workflow").rglob("*.smk")]
    callers = sorted(
        p.relative_to(ROOT).as_posix()
        for p in files
        if "grid_points(" in p.read_text() and p.name != "entry.py"
    )
    assert callers == ["pnc/studies/cifar/sweep.py", GRID_MODULE]
