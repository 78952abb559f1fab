"""The package's public names load on first use; light modules start without JAX and Flax."""

import importlib
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

import pnc
from pnc.runtime import io


@pytest.mark.parametrize("module", ["pnc", "pnc.runtime.io", "pnc.runtime.config_schema", "pnc.workflow.commands"])
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
