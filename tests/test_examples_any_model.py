"""The examples of docs/any_model.md run end to end (small settings) and show what they claim:
the claims are scripts/install_check.py's, which also checks them in the installed wheel alone."""

from __future__ import annotations

import pytest
from install_check_script import install_check


@pytest.mark.slow
@pytest.mark.parametrize("name", install_check.EXAMPLES)
def test_example_runs_and_shows_what_it_claims(name):
    result = install_check.check_example(name)
    assert result  # each claim is checked inside; a failed one raises naming it


def test_every_example_has_its_claims_checked():
    """Each example's claims fail on a result that breaks them (the checker is not vacuous)."""
    bad = {
        "nnx_regression": {"epistemic_var_outside": 1.0, "epistemic_var_inside": 1.0},
        "linen_cnn": {"base_test_accuracy": 0.5, "ensemble_test_accuracy": 0.9,
                      "auroc_mixture_entropy": 1.5},
        "transformer": {"base_test_accuracy": 0.9, "auroc_mixture_entropy": 0.5,
                        "predict_shared_s": 0.0, "forward_s": 1.0},
    }  # fmt: skip
    assert set(bad) == set(install_check.EXAMPLES)
    for name, result in bad.items():
        assert install_check._claims(name, result), name
    assert install_check._claims("nnx_regression", {"x": float("nan"), **bad["nnx_regression"]})
    assert not install_check._claims(
        "nnx_regression", {"epistemic_var_outside": 11.0, "epistemic_var_inside": 1.0}
    )


def test_the_cost_benchmark_finds_the_examples():
    """``python -m bench.any_model_costs`` (and the peers benchmark's transformer task) load the
    same example files from the checkout."""
    from bench.any_model_costs import EXAMPLES, NAMES

    assert set(NAMES) == set(install_check.EXAMPLES)
    assert all((EXAMPLES / f"{name}.py").is_file() for name in NAMES), EXAMPLES


#: Builds whose second run, loading from the cache, cannot match its first.
_CACHE_FAULTS = {
    "differ": "import os, jax\njax.jit(lambda x: x + 1)(1)\nprint(os.urandom(8).hex())",
    "not finite": "import jax, sys\njax.jit(lambda x: x + 1)(1)\nsys.exit('not finite')",
    "stored nothing": "print('a')",
}


@pytest.mark.slow
@pytest.mark.parametrize("fault", list(_CACHE_FAULTS))
def test_cached_program_check_fails_on_what_it_guards(monkeypatch, fault):
    """``check_cached_programs`` refuses predictions that change once loaded from the cache, a
    build that fails, and a cache that stored nothing (it is not vacuous; the build itself runs in
    the install check, at both ends of the version ranges)."""
    monkeypatch.setattr(install_check, "_CACHED_BUILD", _CACHE_FAULTS[fault])
    with pytest.raises(AssertionError, match=fault):
        install_check.check_cached_programs()
