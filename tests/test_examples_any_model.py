"""The examples of docs/any_model.md run end to end (small settings) and show what they claim."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _run(name: str) -> dict:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclass fields (linen modules) resolve their module
    spec.loader.exec_module(module)
    return module.main(quick=True, n_members=10)


def _finite(result: dict) -> None:
    for key, value in result.items():
        if isinstance(value, float):
            assert math.isfinite(value), key


@pytest.mark.slow
def test_nnx_regression_example():
    result = _run("nnx_regression")
    _finite(result)
    assert result["epistemic_var_outside"] > 10 * result["epistemic_var_inside"]


@pytest.mark.slow
def test_linen_cnn_example():
    result = _run("linen_cnn")
    _finite(result)
    assert result["base_test_accuracy"] > 0.8
    assert result["ensemble_test_accuracy"] > 0.8
    assert 0.0 <= result["auroc_mixture_entropy"] <= 1.0


@pytest.mark.slow
def test_transformer_example():
    result = _run("transformer")
    _finite(result)
    assert result["base_test_accuracy"] > 0.6
    assert 0.0 <= result["auroc_mixture_entropy"] <= 1.0
    assert result["predict_shared_s"] > 0 and result["forward_s"] > 0
