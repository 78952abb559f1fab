"""The per-method cost benchmark (bench.method_costs): P&C's cost against the Deep Ensemble's
and what it is made of."""

from __future__ import annotations

import pytest

from bench import method_costs


def test_ratio_parts_add_up_to_the_ratio():
    pnc = {"train_warm_s": 4.0, "posthoc_warm_s": 1.0, "predict_warm_s": 0.5}
    ensemble = {"train_warm_s": 10.0, "posthoc_warm_s": 0.0, "predict_warm_s": 1.0}
    out = method_costs.ratio_parts(pnc, ensemble)
    assert out["pnc_over_deep_ensemble_warm"] == pytest.approx(5.5 / 11.0)
    parts = out["pnc_over_deep_ensemble_parts"]
    assert parts["base_train"] == pytest.approx(4.0 / 11.0)
    assert parts["pnc_build"] + parts["pnc_predict"] + parts["base_train"] == pytest.approx(0.5)
    assert parts["deep_ensemble_train_over_base_train"] == pytest.approx(2.5)
    assert parts["floor_with_free_posthoc"] == parts["base_train"]


#: A problem small enough to time every part in seconds.
SMALL = {"n_train": 256, "n_predict": 32, "in_dim": 3, "out_dim": 2, "steps": 10, "batch_size": 16}


def test_a_small_run_times_both_methods_twice():
    out = method_costs.benchmark_methods(
        **SMALL,
        hidden=(8, 8),
        method_ids=["pnc", "deep_ensemble"],
        overrides={"pnc": {"n_members": 4}},
        warm=True,
    )
    assert set(out["methods"]) == {"pnc", "deep_ensemble"}
    assert out["methods"]["pnc"]["n_samples"] == 4
    assert out["pnc_over_deep_ensemble"] > 0
    assert set(out["runs_warm"]) == set(out["runs"])
    assert all("train_warm_s" in entry for entry in out["methods"].values())
    parts = out["pnc_over_deep_ensemble_parts"]
    total = parts["base_train"] + parts["pnc_build"] + parts["pnc_predict"]
    assert total == pytest.approx(out["pnc_over_deep_ensemble_warm"])


def test_the_paper_regime_is_the_protocols_pnc_and_defaults_change_nothing():
    paper = method_costs.pnc_overrides("paper", n_rows=50_000)
    assert paper["layers"] == [0, 2] and paper["calibration_size"] == 4096
    assert paper["bootstrap_frac"] == 0.3 and paper["perturbation_norm"] == "radius"
    assert paper["ridge_center"] == "zero" and paper["n_members"] == 50
    assert "correct" not in paper  # P&C's own configuration does not take it
    assert method_costs.pnc_overrides("paper", n_rows=300, n_members=4)["calibration_size"] == 300
    assert method_costs.pnc_overrides("defaults", n_rows=300) == {}
    assert method_costs.pnc_overrides("defaults", n_rows=300, n_members=4) == {"n_members": 4}
    with pytest.raises(ValueError, match="unknown P&C regime 'authors'; valid: defaults, paper"):
        method_costs.pnc_overrides("authors", n_rows=300)


def test_a_small_run_in_the_paper_regime_times_that_configuration():
    out = method_costs.benchmark_methods(
        **SMALL,
        hidden=(8, 8, 8),  # hidden layers 0 and 2 exist
        method_ids=["pnc", "deep_ensemble"],
        overrides={"pnc": {"n_members": 4}},
        pnc_regime="paper",
    )
    assert out["pnc_regime"] == "paper"
    config_id = out["methods"]["pnc"]["config_id"]
    for part in ("layers=0+2", "calibration_size=256", "bootstrap_frac=0.3", "n_members=4"):
        assert part in config_id, config_id
    entries = out["methods"]
    assert out["pnc_over_deep_ensemble"] == pytest.approx(
        method_costs.ratio_first_call(entries["pnc"], entries["deep_ensemble"])
    )
