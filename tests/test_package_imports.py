"""The package's public names load on first use; light modules start without JAX and Flax."""

import importlib
import os
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import pnc
from pnc.runtime import io


@pytest.mark.parametrize(
    "module", ["pnc", "pnc.runtime.io", "pnc.runtime.config_schema", "pnc.workflow.commands"]
)
def test_light_modules_do_not_import_jax_or_flax(module):
    # every workflow job starts with pnc.workflow; its data and split stages need neither
    code = f"import sys, {module}; print(sorted(m for m in ('jax', 'flax') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("module", "absent"),
    [
        # the report's command line imports a subcommand's module when it runs: the jobs and
        # scripts that list, store and restore pieces read no table
        ("pnc.report.__main__", ("jax", "flax", "pandas", "scipy")),
        ("pnc.report.pieces", ("jax", "flax", "pandas", "scipy")),
        ("pnc.report.variant", ("jax", "flax", "pandas", "scipy")),
        # scipy's statistics are imported by the functions that compute them, not by the figures
        # and tables that import the report's statistics module
        ("pnc.report.figures", ("scipy",)),
        ("pnc.report.tables", ("scipy",)),
        ("pnc.report.mechanism_figures", ("scipy",)),
    ],
)
def test_report_modules_import_only_what_they_use(module, absent):
    code = f"import sys, {module}; print(sorted(m for m in {absent!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_public_name_resolves_to_its_module_object():
    assert set(pnc.__all__) == set(pnc._EXPORTS)
    for name in pnc.__all__:
        assert getattr(pnc, name) is getattr(importlib.import_module(pnc._EXPORTS[name]), name)
        assert name in dir(pnc)
    from pnc import build_members, fit  # the `from` form goes through the same lookup

    assert build_members is importlib.import_module("pnc.core.perturb_correct").build_members
    assert fit is importlib.import_module("pnc.core.training").fit


def test_an_unknown_name_raises_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        pnc.not_a_name  # noqa: B018
    with pytest.raises(ImportError):
        from pnc import not_a_name  # noqa: F401


def test_json_and_pytrees_take_jax_arrays(tmp_path):
    io.write_json(tmp_path / "a.json", {"x": jnp.arange(3.0), "y": np.ones(2)})
    assert io.read_json(tmp_path / "a.json") == {"x": [0.0, 1.0, 2.0], "y": [1.0, 1.0]}
    io.save_pytree(tmp_path / "t.msgpack", {"w": jnp.ones((2, 2))})
    tree = io.load_pytree(tmp_path / "t.msgpack")
    assert isinstance(tree["w"], type(jnp.ones(1))) and tree["w"].shape == (2, 2)
    assert isinstance(io.load_pytree(tmp_path / "t.msgpack", as_jax=False)["w"], np.ndarray)
    with pytest.raises(ValueError, match=r"non-finite number at x\.w"):
        io.write_json(tmp_path / "b.json", {"x": {"w": jnp.array([1.0, jnp.nan])}})
    assert not (tmp_path / "b.json").exists()


#: A ``sitecustomize`` that makes the workflow extra's packages unimportable, as in an environment
#: where only ``pip install pnc`` ran (JAX itself needs SciPy and Flax PyYAML: those stay).
WITHOUT_WORKFLOW = """
import importlib.abc, sys
BLOCKED = {"pandas", "snakemake", "mujoco", "gymnasium", "minari", "sklearn", "matplotlib",
           "statsmodels", "jsonschema", "h5py", "pyarrow", "huggingface_hub"}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
import importlib.util
_find = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a, **k: None if name.split(".")[0] in BLOCKED else _find(name, *a, **k)
"""


def _without_workflow(tmp_path, args):
    (tmp_path / "sitecustomize.py").write_text(WITHOUT_WORKFLOW)
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{root}"}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env)


def _library_modules() -> list[str]:
    root = Path(__file__).resolve().parents[1]
    names = []
    for layer in ("runtime", "core", "methods"):
        for path in sorted((root / "pnc" / layer).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return [n for n in names if n != "pnc.runtime.render"]  # the report's table engine


@pytest.mark.slow
def test_the_library_imports_without_the_workflow_extra(tmp_path):
    """Every module of the library's layers (runtime, core, methods) imports where only JAX, Flax,
    Optax and NumPy are installed; the blocker itself works (pandas cannot be imported)."""
    modules = _library_modules()
    assert "pnc.core.any_model" in modules and "pnc.methods.regression.pnc_method" in modules
    code = f"import importlib\nfor m in {modules!r}:\n    importlib.import_module(m)\n"
    code += "import pnc\npnc.ensemble, pnc.build_members, pnc.mixture\n"
    code += "try:\n    import pandas\nexcept ModuleNotFoundError:\n    print('blocked')\n"
    out = _without_workflow(tmp_path, ["-c", code])
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "blocked"


@pytest.mark.parametrize(
    "module",
    ["pnc.studies", "pnc.studies.mujoco.grid", "pnc.studies.cifar.sweep", "pnc.report.tables",
     "pnc.workflow.commands", "pnc.runtime.render"],
)  # fmt: skip
def test_a_part_without_its_extra_names_it_in_one_line(tmp_path, module):
    out = _without_workflow(tmp_path, ["-c", f"import {module}"])
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("pnc.runtime.extras.MissingExtraError: ")
    assert last.endswith('pip install "pnc[workflow]"') and "pandas" in last


@pytest.mark.parametrize("module", ["pnc.workflow", "pnc.report"])
def test_a_command_without_its_extra_prints_one_line_and_exits_2(tmp_path, module):
    out = _without_workflow(tmp_path, ["-m", module, "--help"])
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith('pip install "pnc[workflow]"'), out.stderr


def test_require_passes_when_the_modules_are_there_and_names_the_missing_ones():
    from pnc.runtime import extras

    extras.require("workflow", ("json", "numpy"), "a part")  # present: nothing happens
    with pytest.raises(
        extras.MissingExtraError,
        match=r'\(no_such_mod_x not installed\): pip install "pnc\[peers\]"',
    ):
        extras.require("peers", ("numpy", "no_such_mod_x"), "a part")
    assert extras.missing(["numpy", "no_such_mod_x"]) == ["no_such_mod_x"]


def test_install_doc_states_the_ranges_lower_ends_that_oldest_lock_installs():
    """docs/install.md's "lowest tested" column names, for each of the library's dependencies,
    the lower end of its range in pyproject.toml and the version requirements/oldest.txt pins
    (what scripts/install_check.sh installs at that end)."""
    import re
    import tomllib

    root = Path(__file__).resolve().parents[1]
    declared = {}
    for spec in tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]:
        name, low = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9.]+)", spec).groups()
        declared[name] = low
    pinned = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", (root / "requirements/oldest.txt")
                             .read_text(), flags=re.M))  # fmt: skip
    doc = (root / "docs/install.md").read_text()
    table = dict(re.findall(r"^\| (\w+) \| ([0-9.]+) \|", doc, flags=re.M))
    assert set(declared) == {"jax", "flax", "optax", "numpy"}
    for name, low in declared.items():
        assert table.get(name) == low == pinned.get(name), (name, table.get(name), pinned.get(name))
