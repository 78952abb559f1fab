"""Post-hoc variance calibration: the scale by hand, its validation-only fit, the calibrated rows,
and the evaluation stage scoring every configuration raw and calibrated on a small synthetic run."""

from __future__ import annotations

import hashlib
import json
import math

import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from pnc.core.predictive import Predictive
from pnc.core.training import Standardizer
from pnc.studies.mujoco import calibration as cal
from pnc.studies.mujoco import metrics
from pnc.studies.mujoco.evaluate import metric_rows, summarise_split
from pnc.studies.mujoco.results import RESULT_COLUMNS, SHIFT_METRICS, SPLIT_METRICS


def test_scale_by_hand():
    mu = np.array([[0.0, 1.0], [2.0, -1.0]])
    y = np.array([[1.0, 1.0], [4.0, 0.0]])  # residuals 1, 0, 2, 1
    var = np.array([[1.0, 3.0], [2.0, 0.5]])
    # squared residual over (variance + 1e-6), averaged over the four entries
    expected = (
        1.0 / (1.0 + 1e-6) + 0.0 / (3.0 + 1e-6) + 4.0 / (2.0 + 1e-6) + 1.0 / (0.5 + 1e-6)
    ) / 4
    assert expected == pytest.approx(1.25, rel=1e-5)
    assert cal.fit_variance_scale(mu, var, y) == pytest.approx(expected, rel=1e-12)


def test_scale_is_clipped_and_propagates_nan():
    y = np.ones((3, 2))
    assert cal.fit_variance_scale(y, np.ones((3, 2)), y) == 1e-6  # perfect means
    assert cal.fit_variance_scale(np.zeros((3, 2)), np.zeros((3, 2)), 1e4 * y) == 1e6
    assert math.isnan(cal.fit_variance_scale(np.full((3, 2), np.nan), np.ones((3, 2)), y))
    with pytest.raises(ValueError, match="equal non-empty shapes"):
        cal.fit_variance_scale(y, np.ones((2, 2)), y)


def _predictive(rng, n, d, shift=0.0, spread=0.3, noise=0.5) -> Predictive:
    means = shift + spread * rng.normal(size=(6, n, d))
    return Predictive(means, np.full((6, n, d), noise))


def _summaries(rng, y_norm, targets=None):
    preds = {
        "val": _predictive(rng, 40, 3),
        "id": _predictive(rng, 40, 3),
        "near": _predictive(rng, 30, 3, shift=1.0, spread=1.0),
        "far": _predictive(rng, 30, 3, shift=3.0, spread=3.0),
    }
    if targets is None:
        targets = {s: 2.0 * rng.normal(size=p.means.shape[1:]) for s, p in preds.items()}
    return {s: summarise_split(preds[s], targets[s], y_norm) for s in preds}, targets


def test_scale_is_fitted_on_val_only():
    y_norm = Standardizer(np.zeros(3), np.ones(3))
    summaries, targets = _summaries(np.random.default_rng(0), y_norm)
    scale = cal.variance_scale(summaries)
    v = summaries["val"]
    assert scale == cal.fit_variance_scale(v.mean, v.var, v.target)
    # other Near/Far targets (same predictions): the same scale
    moved = dict(targets, near=targets["near"] + 50.0, far=-10.0 * targets["far"])
    again, _ = _summaries(np.random.default_rng(0), y_norm, moved)
    assert cal.variance_scale(again) == scale
    assert again["far"].metrics["nll"] != summaries["far"].metrics["nll"]
    # other val targets: another scale
    other, _ = _summaries(np.random.default_rng(0), y_norm, dict(targets, val=targets["val"] + 1))
    assert cal.variance_scale(other) != scale
    with pytest.raises(ValueError, match="'val' split, which is missing"):
        cal.variance_scale({s: x for s, x in summaries.items() if s != "val"})


def test_calibrated_rows_change_the_nll_only():
    y_norm = Standardizer(np.zeros(3), np.ones(3))
    summaries, _ = _summaries(np.random.default_rng(1), y_norm)
    raw = list(metric_rows(summaries))
    variants, scale = cal.variant_rows(raw, summaries, ("vcal", "raw"))
    assert list(variants) == ["raw", "vcal"]  # candidate order whatever the request order
    assert variants["raw"] == raw and scale == cal.variance_scale(summaries)
    assert scale > 2.0  # targets of std 2 against predictive variance ~0.6
    vcal = variants["vcal"]
    assert [(s, m) for s, m, _ in vcal] == [(s, m) for s, m, _ in raw]
    for (split, metric, a), (_, _, b) in zip(raw, vcal, strict=True):
        if metric == "nll":
            s = summaries[split]
            expected = metrics.mean_gaussian_nll(s.mean, scale * s.var + 1e-6, s.target)
            assert b == pytest.approx(expected)
            assert b != a
        elif metric == "nll_std":  # y_norm is the identity here
            s = summaries[split]
            assert b == pytest.approx(metrics.mean_gaussian_nll(s.mean, scale * s.var, s.target))
            assert b != a
        else:
            assert b == a  # RMSE, AUROC and Spearman are invariant under the variance scale
    # the scale is the NLL-optimal one on val (up to the 1e-6 floor)
    nll = dict(((s, m), v) for s, m, v in vcal)
    v = summaries["val"]
    for factor in (0.8, 1.25):
        worse = metrics.mean_gaussian_nll(v.mean, factor * scale * v.var, v.target)
        assert nll[("val", "nll")] < worse
    assert nll[("val", "nll")] < dict(((s, m), v) for s, m, v in raw)[("val", "nll")]


def test_variants_are_checked():
    assert cal.check_calibrations(["vcal", "raw", "vcal"]) == ("raw", "vcal")
    assert cal.check_calibrations("raw") == ("raw",)
    for bad in ([], ["raw", "tempered"]):
        with pytest.raises(ValueError, match="non-empty subset of"):
            cal.check_calibrations(bad)
    y_norm = Standardizer(np.zeros(3), np.ones(3))
    summaries, _ = _summaries(np.random.default_rng(2), y_norm)
    no_val = {s: x for s, x in summaries.items() if s != "val"}
    rows = list(metric_rows(no_val))
    assert cal.variant_rows(rows, no_val, ["raw"]) == ({"raw": rows}, None)
    with pytest.raises(ValueError, match="'val'"):
        cal.variant_rows(rows, no_val, ["raw", "vcal"])


# ---------------------------------------------------------------------------------------------
# The evaluation stage on a small synthetic run
# ---------------------------------------------------------------------------------------------

SPLIT_SIZES = {"train": 400, "val": 120, "id": 120, "near": 80, "far": 80}


def _dynamics(rng, n, shift):
    x = rng.normal(shift, 1.0 + shift, size=(n, 4)).astype(np.float32)
    y = np.stack([np.sin(x[:, 0]) + x[:, 1] * x[:, 2], x[:, 3] - 0.5 * x[:, 0]], axis=1)
    return x, (y + 0.1 * rng.normal(size=y.shape)).astype(np.float32)


def _write_splits(directory, splits):
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for s, (x, y) in splits.items():
        arrays[f"{s}_x"], arrays[f"{s}_y"] = x, y
    np.savez(directory / "splits.npz", **arrays)
    digest = hashlib.sha256((directory / "splits.npz").read_bytes()).hexdigest()
    manifest = {"splits": list(splits), "data_source": "offline", "splits_file_sha256": digest}
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return directory


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """Splits, a moved copy (other Near/Far targets) and a trained base run."""
    from pnc.methods.regression.runs import TrainingSpec
    from pnc.studies.mujoco.stages import train_run

    rng = np.random.default_rng(0)
    shifts = {"train": 0.0, "val": 0.0, "id": 0.0, "near": 0.5, "far": 1.5}
    splits = {s: _dynamics(rng, n, shifts[s]) for s, n in SPLIT_SIZES.items()}
    base = tmp_path_factory.mktemp("study")
    moved = dict(splits)
    for s in ("near", "far"):
        moved[s] = (splits[s][0], splits[s][1] + 5.0)
    train_run(
        env="Toy",
        seed=0,
        spec=TrainingSpec("base"),
        splits_dir=_write_splits(base / "splits", splits),
        out_dir=base / "run",
        model={"hidden": [16, 16]},
        train={"steps": 200, "batch_size": 32},
    )
    _write_splits(base / "moved", moved)
    _write_splits(base / "no_val", {s: v for s, v in splits.items() if s != "val"})
    return base


PNC_GRID = {"fixed": {"n_members": 4, "rank": 2}, "grid": {"sigma": [1.0, 4.0]}}


def grid_table(method: str, entry) -> dict:
    """The grid table the workflow writes for ``entry`` (pnc.studies.mujoco.grid.write_table)."""
    from pnc.studies.mujoco import grid

    return json.loads(json.dumps(grid.table_of(grid.expand(method, entry))))


def _evaluate(study, data="splits", method="pnc", grid=PNC_GRID, **kwargs):
    from pnc.studies.mujoco.grid import points_from_table
    from pnc.studies.mujoco.stages import evaluate_run

    points = points_from_table(method, grid_table(method, grid))
    return evaluate_run(
        env="Toy",
        seed=0,
        method_id=method,
        run_id="base",
        run_dir=study / "run",
        splits_dir=study / data,
        points=[p for p in points if p.run_id == "base"],
        **kwargs,
    )


def test_evaluate_run_scores_every_configuration_raw_and_calibrated(study):
    frame, timings = _evaluate(study)
    assert tuple(frame.columns) == RESULT_COLUMNS
    configs = list(dict.fromkeys(frame["config"]))
    assert len(configs) == 2 and [t["config"] for t in timings] == configs
    expected = {(s, m) for s in SPLIT_SIZES if s != "train" for m in SPLIT_METRICS}
    expected |= {(s, m) for s in ("near", "far") for m in SHIFT_METRICS}
    for config in configs:
        for variant in ("raw", "vcal"):
            rows = frame[(frame.config == config) & (frame.calibration == variant)]
            assert set(zip(rows.split, rows.metric, strict=True)) == expected
            assert len(rows) == len(expected)
        wide = frame[frame.config == config].pivot_table(
            index=["split", "metric"], columns="calibration", values="value"
        )
        same = ~wide.index.get_level_values("metric").isin(["nll", "nll_std"])
        np.testing.assert_array_equal(wide.loc[same, "raw"], wide.loc[same, "vcal"])
        assert (wide.loc[("val", "nll"), "vcal"] <= wide.loc[("val", "nll"), "raw"]).all()
    for t in timings:
        assert set(t) == {"config", "build_s", "predict_s", "variance_scale", "built_with"}
        assert t["build_s"] >= 0 and t["predict_s"] > 0 and 1e-6 <= t["variance_scale"] <= 1e6


def test_calibration_never_sees_shifted_splits(study):
    frame, timings = _evaluate(study)
    moved, moved_timings = _evaluate(study, data="moved")
    assert [t["variance_scale"] for t in moved_timings] == [t["variance_scale"] for t in timings]
    key = ["config", "calibration", "split", "metric"]
    a, b = frame.set_index(key)["value"], moved.set_index(key)["value"]
    for split in ("val", "id"):
        pd.testing.assert_series_equal(a.xs(split, level="split"), b.xs(split, level="split"))
    assert not np.allclose(a.xs("far", level="split"), b.xs("far", level="split"))


def test_evaluate_run_variants_are_a_choice(study):
    frame, timings = _evaluate(study, calibrations=("raw",))
    assert set(frame["calibration"]) == {"raw"} and timings[0]["variance_scale"] is None
    full, _ = _evaluate(study)
    key = ["config", "calibration", "split", "metric"]
    pd.testing.assert_series_equal(
        frame.set_index(key)["value"], full[full.calibration == "raw"].set_index(key)["value"]
    )
    with pytest.raises(ValueError, match="non-empty subset"):
        _evaluate(study, calibrations=("raw", "temperature"))


def test_evaluate_run_without_val_names_the_directory(study):
    with pytest.raises(ValueError, match=r"no_val: missing split 'val' \(variance calibration"):
        _evaluate(study, data="no_val")
    with pytest.raises(ValueError, match=r"no_val: missing split 'val' \(the selection"):
        _evaluate(study, data="no_val", calibrations=("raw",))


def test_ablation_shares_the_keys_of_pnc(study, monkeypatch):
    from pnc.methods import regression as registry
    from pnc.studies.mujoco import stages

    assert getattr(registry.get("pnc_nocorr"), "key_id", "pnc_nocorr") == "pnc"
    seen = []

    def recording(*parts):
        seen.append(parts)
        return real(*parts)

    real = stages.derive_key
    monkeypatch.setattr(stages, "derive_key", recording)
    grid = {"fixed": {"n_members": 4, "rank": 2}, "grid": {"sigma": [1.0]}}
    _evaluate(study, method="pnc_nocorr", grid=grid, calibrations=("raw",))
    assert seen == [("Toy", 0, "pnc", "build"), ("Toy", 0, "pnc", "predict")]


def test_evaluation_tables_through_selection_and_frontier(study, tmp_path):
    from pnc.report.figures import frontier_points
    from pnc.runtime.io import write_csv
    from pnc.studies.mujoco.results_table import load
    from pnc.studies.mujoco.selection import select_and_write

    frame, _ = _evaluate(study)
    write_csv(frame, tmp_path / "metrics.csv")
    out = {name: tmp_path / name for name in ("all_configs.csv", "results.csv", "sel.json")}
    selection = select_and_write(
        [str(tmp_path / "metrics.csv")],
        seeds=[0],
        all_configs_path=str(out["all_configs.csv"]),
        results_path=str(out["results.csv"]),
        selection_path=str(out["sel.json"]),
    )
    rec = json.loads(out["sel.json"].read_text())["Toy"]["pnc"]
    assert rec == json.loads(json.dumps(selection))["Toy"]["pnc"]
    configs = list(dict.fromkeys(frame["config"]))
    assert list(rec["candidates"]) == [f"{c}|{k}" for c in configs for k in ("raw", "vcal")]
    assert rec["candidates"][f"{rec['config']}|{rec['calibration']}"] == rec["val_nll"]
    assert rec["val_nll"] == min(rec["candidates"].values())
    results = pd.read_csv(out["results.csv"])
    assert tuple(results.columns) == RESULT_COLUMNS and "val" not in set(results["split"])
    assert set(zip(results["config"], results["calibration"], strict=True)) == {
        (rec["config"], rec["calibration"])
    }
    all_configs = load(
        out["all_configs.csv"], require_selected=True, drop_selection_split=False, finite=False
    )
    points = frontier_points(all_configs)
    assert len(points) == len(configs) and points["selected"].sum() == 1
    assert tuple(points.loc[points.selected, ["config", "calibration"]].iloc[0]) == (
        rec["config"],
        rec["calibration"],
    )


def test_construction_sees_the_train_split_only(study, monkeypatch):
    """P&C's calibration pool (and every method's construction data) is the train split: no
    validation (or evaluation) row can enter D_cal."""
    from pnc.methods import regression as registry
    from pnc.methods.regression.runs import TrainingRun

    method = registry.get("pnc")
    seen = []
    real = type(method).build_many

    def recording(self, run, configs, x, y, *, key):
        seen.append(np.asarray(x))
        return real(self, run, configs, x, y, key=key)

    monkeypatch.setattr(type(method), "build_many", recording)
    _evaluate(study, calibrations=("raw",))
    splits = np.load(study / "splits" / "splits.npz")
    model = TrainingRun.load(study / "run").model
    expected = np.asarray(model.x_norm.transform(jnp.asarray(splits["train_x"])))
    assert seen and all(np.array_equal(x, expected) for x in seen)
    val = np.asarray(model.x_norm.transform(jnp.asarray(splits["val_x"])))
    rows = {r.tobytes() for r in seen[0]}
    assert not any(r.tobytes() in rows for r in val)


def test_variance_scale_of_one_point_and_in_float64_from_float32_inputs():
    assert cal.fit_variance_scale([[0.0]], [[1.0 - 1e-6]], [[2.0]]) == pytest.approx(4.0)
    rng = np.random.default_rng(7)
    mean = rng.normal(size=(50, 3)).astype(np.float32)
    y = (mean + 1e-3 * rng.normal(size=(50, 3))).astype(np.float32)
    var = rng.uniform(1e-6, 1e-5, size=(50, 3)).astype(np.float32)
    m64, v64, y64 = (a.astype(np.float64) for a in (mean, var, y))
    expected = float(np.mean(np.square(y64 - m64) / (v64 + 1e-6)))
    # float32 arithmetic would be off by about 1e-7 relative
    assert cal.fit_variance_scale(mean, var, y) == pytest.approx(expected, rel=1e-12)


def test_two_phases_score_the_full_evaluations_rows(study):
    """The validation phase (every configuration on val and the frontier sample) and the test phase
    (one configuration on the test splits) give, bit for bit, the full evaluation's rows: every split
    is predicted in its own call with the same keys, and a configuration built with others (P&C's
    ridge values) is built with its whole group."""
    grid = {"fixed": {"n_members": 4, "rank": 2}, "grid": {"sigma": [4.0], "ridge": [1e-4, 1e-2]}}
    full, _ = _evaluate(study, grid=grid)
    phase1, timings = _evaluate(study, grid=grid, splits=("val", "id_sample", "far_sample"))
    configs = list(dict.fromkeys(full["config"]))
    key = ["config", "calibration", "split", "metric"]
    val = full[full.split == "val"].set_index(key)["value"]
    assert phase1[phase1.split == "val"].set_index(key)["value"].equals(val)
    assert set(phase1.split) == {"val", "id_sample", "far_sample"}
    assert [t["built_with"] for t in timings] == [2, 2]
    # the sample holds every row of these small splits: its metrics are the whole split's
    sample = phase1[phase1.split == "far_sample"].assign(split="far").set_index(key)["value"]
    assert np.array_equal(
        sample, full[full.split == "far"].set_index(key).loc[sample.index, "value"]
    )
    phase2, _ = _evaluate(
        study, grid=grid, splits=("val", "id", "near", "far"), configs=[configs[1]]
    )
    assert set(phase2.config) == {configs[1]}
    rows = full[full.config == configs[1]].set_index(key)["value"]
    assert phase2.set_index(key)["value"].equals(rows)


def test_evaluate_run_refuses_unknown_splits_and_configurations(study):
    with pytest.raises(ValueError, match="unknown splits \\['test'\\]"):
        _evaluate(study, splits=("val", "test"))
    with pytest.raises(ValueError, match="lack 'val'"):
        _evaluate(study, splits=("id",))
    with pytest.raises(ValueError, match="no configuration \\['sigma=2'\\]"):
        _evaluate(study, configs=["sigma=2"])
