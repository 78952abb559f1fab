"""Metrics, evaluation rows, grids and selection on small hand-checked examples."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from pnc.core.mlp import gaussian_nll
from pnc.core.predictive import Predictive
from pnc.core.training import Standardizer
from pnc.studies.mujoco import metrics
from pnc.studies.mujoco.evaluate import evaluate_splits, score_parts, summarise_split
from pnc.studies.mujoco.results import RESULT_COLUMNS
from pnc.studies.mujoco.results_table import ResultsError
from pnc.studies.mujoco.selection import apply_selection, select


def _auroc_pairs(neg, pos):
    """Brute force P(pos > neg) + 0.5 P(pos == neg) over all pairs."""
    neg, pos = np.asarray(neg, float), np.asarray(pos, float)
    diff = pos[:, None] - neg[None, :]
    return float(np.mean((diff > 0) + 0.5 * (diff == 0)))


def test_auroc_matches_pairwise_definition_with_ties():
    rng = np.random.default_rng(0)
    neg = rng.integers(0, 5, size=37).astype(float)  # many ties
    pos = rng.integers(2, 8, size=23).astype(float)
    assert metrics.auroc(neg, pos) == pytest.approx(_auroc_pairs(neg, pos), abs=1e-12)


def test_auroc_extremes_and_symmetry():
    assert metrics.auroc([0.0, 1.0], [2.0, 3.0]) == 1.0
    assert metrics.auroc([2.0, 3.0], [0.0, 1.0]) == 0.0
    assert metrics.auroc([1.0, 1.0], [1.0, 1.0, 1.0]) == 0.5
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=50), rng.normal(0.5, 1, size=40)
    assert metrics.auroc(a, b) + metrics.auroc(b, a) == pytest.approx(1.0)


def test_auroc_agrees_with_mann_whitney():
    rng = np.random.default_rng(2)
    neg, pos = rng.normal(size=60), rng.normal(0.3, 1, size=45)
    u = scipy.stats.mannwhitneyu(pos, neg).statistic
    assert metrics.auroc(neg, pos) == pytest.approx(u / (60 * 45))


def test_auroc_rejects_empty_and_propagates_nan():
    with pytest.raises(ValueError, match="non-empty"):
        metrics.auroc([], [1.0])
    assert math.isnan(metrics.auroc([np.nan, 1.0], [2.0]))


def test_rmse_and_nll_by_hand():
    mean = np.array([[0.0, 1.0], [2.0, 3.0]])
    y = np.array([[1.0, 1.0], [2.0, 0.0]])
    assert metrics.rmse(mean, y) == pytest.approx(math.sqrt((1 + 0 + 0 + 9) / 4))
    var = np.array([[1.0, 2.0], [0.5, 4.0]])
    expected = np.mean(0.5 * (np.log(2 * np.pi) + np.log(var) + (y - mean) ** 2 / var))
    assert metrics.mean_gaussian_nll(mean, var, y) == pytest.approx(expected)
    with pytest.raises(ValueError, match="shape mismatch"):
        metrics.rmse(mean, y[:1])
    with pytest.raises(ValueError, match="negative"):
        metrics.mean_gaussian_nll(mean, -var, y)


def test_mean_gaussian_nll_is_the_mean_of_the_training_loss_terms():
    """The metric (float64, one number) and pnc.gaussian_nll (elementwise, JAX) are one formula."""
    rng = np.random.default_rng(4)
    mean, y = rng.normal(size=(20, 3)), rng.normal(size=(20, 3))
    var = rng.uniform(0.1, 2.0, size=(20, 3))
    elementwise = np.asarray(gaussian_nll(mean, var, y))
    assert elementwise.shape == (20, 3)
    assert metrics.mean_gaussian_nll(mean, var, y) == pytest.approx(elementwise.mean(), rel=1e-6)


def test_spearman_matches_scipy_and_handles_constants():
    rng = np.random.default_rng(3)
    a = rng.normal(size=30)
    b = a**3 + 0.1 * rng.normal(size=30)
    assert metrics.spearman(a, b) == pytest.approx(scipy.stats.spearmanr(a, b).statistic)
    assert metrics.spearman(a, np.exp(a)) == pytest.approx(1.0)
    assert math.isnan(metrics.spearman(a, np.ones(30)))
    assert math.isnan(metrics.spearman(a[:1], b[:1]))


def _rank_cases():
    """Pairs of samples with and without ties, signed zeros and infinities, at sizes below and above
    numpy's pairwise-summation blocks."""
    rng = np.random.default_rng(11)
    for n in (2, 3, 17, 128, 129, 1001, 10000):
        yield rng.normal(size=n), rng.normal(size=n)
        yield rng.integers(0, 4, n).astype(float), rng.integers(0, 40, n).astype(float)
        x = rng.normal(size=n).astype(np.float32).astype(np.float64)
        yield x, x**2 + rng.normal(size=n)
        yield rng.choice([-np.inf, -0.0, 0.0, 1.0, 2.5, np.inf], n), rng.exponential(size=n)


def test_midranks_and_spearman_equal_scipy_bit_for_bit():
    from pnc.core.roc import auroc, midranks

    for a, b in _rank_cases():
        assert midranks(a).tobytes() == scipy.stats.rankdata(a, method="average").tobytes()
        if np.all(a == a[0]) or np.all(b == b[0]):
            continue
        assert metrics.spearman(a, b) == float(scipy.stats.spearmanr(a, b).statistic)
        u = scipy.stats.mannwhitneyu(b, a).statistic  # U of the positives
        assert auroc(a, b) == float(u) / (a.size * b.size)
    with pytest.raises(ValueError, match="1-D"):
        midranks(np.zeros((2, 2)))


def test_scoring_does_not_import_scipy_stats():
    # AUROC and Spearman run in every evaluation job; scipy.stats would add ~0.7 s to its start-up
    import subprocess
    import sys

    code = (
        "import sys, numpy as np; from pnc.studies.mujoco import metrics; "
        "x = np.arange(50.0); metrics.auroc(x, x + 3); metrics.spearman(x, x ** 2); "
        "print('scipy.stats' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_metric_edges_zero_variance_nan_and_empty():
    mean, y = np.zeros((3, 2)), np.ones((3, 2))
    var = np.ones((3, 2))
    var[0, 0] = 0.0  # allowed (no error); -inf + inf: the NLL is undefined
    assert math.isnan(metrics.mean_gaussian_nll(mean, var, y))
    assert math.isnan(metrics.mean_gaussian_nll(y, var, y))  # 0 / 0
    var[0, 0] = np.nan
    assert math.isnan(metrics.mean_gaussian_nll(mean, var, y))
    var = np.array([[-1.0, 0.0], [0.5, -2.0], [0.25, 1.0]])  # two negative, one zero, two below 1
    with pytest.raises(ValueError, match="^2 negative predictive variances$"):
        metrics.mean_gaussian_nll(mean, var, y)
    narrow = np.ones((3, 1))  # would broadcast against [3, 2]
    for args in ((mean, narrow, y), (narrow, np.ones((3, 2)), y), (mean, np.ones((3, 2)), narrow)):
        with pytest.raises(ValueError, match=r"shape mismatch.*\(3, 1\)"):
            metrics.mean_gaussian_nll(*args)
    for empty in (np.zeros((0, 2)), np.zeros(0)):
        with pytest.raises(ValueError, match="^need at least one point, got an empty array$"):
            metrics.rmse(empty, empty)
    assert metrics.rmse([1.0], [1.0]) == 0.0 and metrics.rmse([3.0], [-1.0]) == 4.0
    assert math.isnan(metrics.rmse([np.nan, 0.0], [0.0, 0.0]))


def test_metrics_compute_in_float64_from_float32_inputs():
    """float32 rounding would change these: 1 + 2^-30 and its square are not representable."""
    big = np.float32(2.0**12)
    mean = np.array([big, big], np.float32)
    y = mean + np.array([1.0, 3.0], np.float32)
    assert metrics.rmse(mean, y) == math.sqrt(5.0)
    var = np.array([[1e-30]], np.float32)
    got = metrics.mean_gaussian_nll(
        np.zeros((1, 1), np.float32), var, np.full((1, 1), 1e-15, np.float32)
    )
    assert math.isfinite(
        got
    )  # (1e-15)^2 / 1e-30 overflows nothing in float64 but is 0/0 in float32
    expected = 0.5 * (
        math.log(2 * math.pi)
        + math.log(float(var[0, 0]))
        + float(np.float32(1e-15)) ** 2 / float(var[0, 0])
    )
    assert got == pytest.approx(expected, rel=1e-12)
    a = np.array([1.0, 1.0 + 2.0**-30, 2.0])
    assert metrics.spearman(a, np.array([3.0, 2.0, 1.0])) == pytest.approx(-1.0)
    assert metrics.auroc(np.array([1.0]), np.array([1.0 + 2.0**-30])) == 1.0


def test_undefined_metrics_return_nan_without_warnings():
    """Zero variances and constant or nan Spearman inputs give ``nan`` quietly (no RuntimeWarning
    from NumPy, no ConstantInputWarning from SciPy) for any warnings filter."""
    a = np.arange(4.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert math.isnan(
            metrics.mean_gaussian_nll(np.zeros((2, 1)), np.zeros((2, 1)), np.ones((2, 1)))
        )
        assert math.isnan(
            metrics.mean_gaussian_nll(np.ones((2, 1)), np.zeros((2, 1)), np.ones((2, 1)))
        )
        for x, z in ((np.ones(4), a), (a, np.ones(4)), (a, a * np.nan), (a * np.nan, a)):
            assert math.isnan(metrics.spearman(x, z))
            assert math.isnan(metrics.spearman(z, x))
        assert math.isnan(metrics.spearman([1.0, 2.0, np.nan, 3.0], [2.0, 2.0, 2.0, 1.0]))
        assert math.isnan(metrics.spearman([2.0, 2.0, 2.0, 1.0], [1.0, np.nan, 2.0, 3.0]))


def test_spearman_shapes_and_undefined_cases():
    a = np.arange(5.0)
    for x, z in ((a[:, None], a[:, None]), (a, a[:4]), (a[None], a)):
        with pytest.raises(ValueError, match="need two 1-D arrays of equal length"):
            metrics.spearman(x, z)
    assert metrics.spearman([0.0, 1.0], [5.0, 7.0]) == pytest.approx(1.0)  # two points suffice
    assert metrics.spearman([0.0, 1.0], [7.0, 5.0]) == pytest.approx(-1.0)
    assert math.isnan(metrics.spearman(np.ones(5), a))  # constant first argument
    assert math.isnan(metrics.spearman(a, np.full(5, 2.0)))  # constant second argument
    assert metrics.spearman([0.0, 0.0, 1.0], [1.0, 2.0, 3.0]) == pytest.approx(
        scipy.stats.spearmanr([0.0, 0.0, 1.0], [1.0, 2.0, 3.0]).statistic
    )  # ties, not constant
    for bad in ((np.array([np.nan, 1.0, 2.0]), a[:3]), (a[:3], np.array([0.0, np.nan, 1.0]))):
        assert math.isnan(metrics.spearman(*bad))
    assert math.isnan(metrics.spearman([], []))


def test_auroc_needs_one_dimensional_scores():
    for neg, pos in ((np.ones((2, 2)), np.ones(2)), (np.ones(2), np.ones((2, 1)))):
        with pytest.raises(ValueError, match=r"need two non-empty 1-D score arrays, got shapes"):
            metrics.auroc(neg, pos)
    with pytest.raises(ValueError):
        metrics.auroc([1.0], [])
    assert math.isnan(metrics.auroc([0.0], [np.nan]))
    assert metrics.auroc([0.0, 2.0], [1.0]) == 0.5 and metrics.auroc([0.0], [1.0, -1.0]) == 0.5


def _predictive(rng, s, n, d, shift=0.0, spread=1.0):
    means = rng.normal(shift, 0.1 * spread, size=(s, n, d))
    variances = np.full((s, n, d), 0.5)
    return Predictive(means, variances)


def test_summarise_split_units_and_mixture():
    rng = np.random.default_rng(4)
    pred = _predictive(rng, 5, 40, 3)
    y_norm = Standardizer(np.array([1.0, -2.0, 0.0]), np.array([2.0, 0.5, 10.0]))
    y_raw = rng.normal(size=(40, 3)) * np.array([2.0, 0.5, 10.0]) + np.array([1.0, -2.0, 0.0])
    out = summarise_split(pred, y_raw, y_norm)
    mean = pred.means.mean(0)
    var = pred.variances.mean(0) + pred.means.var(0)
    y_std = (y_raw - y_norm.mean) / y_norm.std
    assert out.metrics["rmse_std"] == pytest.approx(np.sqrt(np.mean((mean - y_std) ** 2)))
    raw_err = (mean * y_norm.std + y_norm.mean) - y_raw
    assert out.metrics["rmse"] == pytest.approx(np.sqrt(np.mean(raw_err**2)))
    assert out.metrics["nll_std"] == pytest.approx(metrics.mean_gaussian_nll(mean, var, y_std))
    # the paper's NLL: original units, variance + 1e-6, by hand
    std = np.asarray(y_norm.std)
    mean_raw, var_raw = mean * std + y_norm.mean, var * std**2 + 1e-6
    by_hand = np.mean(
        0.5 * (np.log(2 * np.pi) + np.log(var_raw) + (y_raw - mean_raw) ** 2 / var_raw)
    )
    assert out.metrics["nll"] == pytest.approx(by_hand, rel=1e-5)
    assert out.metrics["nll"] != pytest.approx(out.metrics["nll_std"], rel=1e-2)
    # scores: variance in original units averaged over dims;
    # the mixture is formed in float32 (pnc.core.predictive), hence rtol 1e-5
    np.testing.assert_allclose(out.total_score, (var * std**2).mean(-1), rtol=1e-5)
    np.testing.assert_allclose(
        out.epistemic_score, (pred.means.var(0) * std**2).mean(-1), rtol=1e-5
    )


def test_score_parts_add_up_to_the_total_score():
    """The aleatoric part (mean variance) plus the epistemic part (variance of the means) is the
    evaluated total score, the epistemic part its epistemic score, both in original units."""
    rng = np.random.default_rng(6)
    means = rng.normal(size=(5, 40, 3))
    variances = rng.uniform(0.1, 3.0, size=(5, 40, 3))
    pred = Predictive(means, variances)
    y_norm = Standardizer(np.array([1.0, -2.0, 0.0]), np.array([2.0, 0.5, 10.0]))
    out = summarise_split(pred, rng.normal(size=(40, 3)), y_norm)
    aleatoric, epistemic = score_parts(pred, y_norm)
    assert aleatoric.shape == epistemic.shape == (40,)
    std2 = np.square(y_norm.std)
    np.testing.assert_allclose(aleatoric, (variances.mean(0) * std2).mean(-1), rtol=1e-12)
    np.testing.assert_allclose(aleatoric + epistemic, out.total_score, rtol=1e-5)
    np.testing.assert_allclose(epistemic, out.epistemic_score, rtol=1e-5)


def test_evaluate_splits_rows_and_auroc_direction():
    rng = np.random.default_rng(5)
    y_norm = Standardizer(np.zeros(2), np.ones(2))
    preds = {
        "val": _predictive(rng, 4, 30, 2),
        "id": _predictive(rng, 4, 30, 2),
        "far": _predictive(rng, 4, 25, 2, spread=30.0),  # members disagree far away
    }
    targets = {s: rng.normal(size=p.means.shape[1:]) for s, p in preds.items()}
    rows = list(evaluate_splits(preds, targets, y_norm))
    names = {(s, m) for s, m, _ in rows}
    for split in ("val", "id", "far"):
        assert {(split, m) for m in ("rmse", "rmse_std", "nll", "nll_std", "spearman")} <= names
    assert ("far", "auroc") in names and ("id", "auroc") not in names
    values = {(s, m): v for s, m, v in rows}
    assert values[("far", "auroc_epistemic")] > 0.95
    with pytest.raises(ValueError, match="unknown splits"):
        list(evaluate_splits({"test": preds["id"]}, {"test": targets["id"]}, y_norm))
    with pytest.raises(ValueError, match="'id'"):
        list(evaluate_splits({"far": preds["far"]}, {"far": targets["far"]}, y_norm))


def _table(val_nll: dict[tuple, float]) -> pd.DataFrame:
    """Metric rows keyed ``(config, seed)`` (raw) or ``(config, calibration, seed)``."""
    rows = []
    for key, v in val_nll.items():
        config, calibration, seed = key if len(key) == 3 else (key[0], "raw", key[1])
        for split, value in (("val", v), ("id", v + 1.0), ("far", v + 2.0)):
            rows.append(
                ("Hopper", "swag", config, calibration, seed, split, "nll", value, "offline")
            )
    return pd.DataFrame(rows, columns=list(RESULT_COLUMNS))


def test_selection_by_seed_mean_val_nll_ignores_shifted_splits():
    frame = _table(
        {("scale=1", 0): 1.0, ("scale=1", 1): 3.0, ("scale=3", 0): 1.5, ("scale=3", 1): 1.6}
    )
    # scale=1 has the best single seed but the worse mean (2.0 vs 1.55)
    frame.loc[(frame["config"] == "scale=1") & (frame["split"] == "far"), "value"] = -100.0
    sel = select(frame)
    assert sel["Hopper"]["swag"]["config"] == "scale=3"
    assert sel["Hopper"]["swag"]["calibration"] == "raw"
    assert sel["Hopper"]["swag"]["val_nll"] == pytest.approx(1.55)
    all_configs, results = apply_selection(frame, sel)
    assert list(all_configs.columns) == [*RESULT_COLUMNS, "selected"]
    assert set(results["config"]) == {"scale=3"} and "val" not in set(results["split"])
    assert list(results.columns) == list(RESULT_COLUMNS)
    assert all_configs["selected"].sum() == 6


def test_selection_non_finite_ties_and_missing_seeds():
    frame = _table({("a", 0): np.nan, ("b", 0): 2.0, ("c", 0): 2.0})
    assert select(frame)["Hopper"]["swag"]["config"] == "b"  # nan never wins; ties -> grid order
    frame = _table({("a", 0): np.nan, ("b", 0): np.inf})
    with pytest.raises(ValueError, match=r"Hopper/swag: .*none is selected: a\|raw: nan, b\|raw: inf"):
        select(frame)
    frame = _table({("a", 0): 1.0, ("a", 1): 1.0, ("b", 0): 0.5})
    with pytest.raises(ValueError, match=r"b \(raw\): validation NLL for seeds"):
        select(frame)


def test_selection_candidates_are_config_calibration_pairs():
    frame = _table(
        {
            ("scale=1", "raw", 0): 2.0,
            ("scale=1", "vcal", 0): 1.2,
            ("scale=3", "raw", 0): 1.5,
            ("scale=3", "vcal", 0): 1.4,
        }
    )
    sel = select(frame)
    rec = sel["Hopper"]["swag"]
    assert (rec["config"], rec["calibration"]) == ("scale=1", "vcal")
    assert rec["val_nll"] == pytest.approx(1.2)
    # readable keys, in candidate order: grid order of configs, then raw before vcal
    assert list(rec["candidates"]) == [
        "scale=1|raw",
        "scale=1|vcal",
        "scale=3|raw",
        "scale=3|vcal",
    ]
    assert rec["val_nll"] == min(rec["candidates"].values())
    all_configs, results = apply_selection(frame, sel)
    chosen = all_configs[all_configs["selected"]]
    assert set(zip(chosen["config"], chosen["calibration"], strict=True)) == {("scale=1", "vcal")}
    assert len(chosen) == 3  # val, id, far of the one pair
    assert set(results["calibration"]) == {"vcal"} and set(results["split"]) == {"id", "far"}


def test_selection_ties_prefer_grid_order_then_raw():
    # equal val NLL everywhere: the first config, raw
    frame = _table({(c, k, 0): 1.0 for c in ("b", "a") for k in ("vcal", "raw")})
    rec = select(frame)["Hopper"]["swag"]
    assert (rec["config"], rec["calibration"]) == ("b", "raw")
    assert list(rec["candidates"]) == ["b|raw", "b|vcal", "a|raw", "a|vcal"]
    # a tie across configurations: grid order decides before the variant
    frame = _table({("a", "raw", 0): 2.0, ("a", "vcal", 0): 1.0, ("b", "raw", 0): 1.0})
    rec = select(frame)["Hopper"]["swag"]
    assert (rec["config"], rec["calibration"]) == ("a", "vcal")
    # a tie between the variants of one configuration: raw
    frame = _table({("a", "vcal", 0): 1.0, ("a", "raw", 0): 1.0, ("b", "raw", 0): 3.0})
    rec = select(frame)["Hopper"]["swag"]
    assert (rec["config"], rec["calibration"]) == ("a", "raw")
    # non-finite variants never beat a finite one
    frame = _table({("a", "raw", 0): np.inf, ("a", "vcal", 0): np.nan, ("b", "vcal", 0): 3.0})
    rec = select(frame)["Hopper"]["swag"]
    assert (rec["config"], rec["calibration"], rec["finite"]) == ("b", "vcal", True)


def test_selection_needs_the_calibration_column_in_metric_tables():
    frame = _table({("a", 0): 1.0}).drop(columns="calibration")
    with pytest.raises(ResultsError, match="calibration"):
        select(frame)
