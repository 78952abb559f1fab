"""The mechanism diagnostics (paper Figures 1 B/C and 3) on cases with known answers: the explicit
multi-layer member against build_members, the output-level sensitivity against Proposition 1's
single-layer one, the probe sketch in the linear limit (Theorem 2), zero disagreement at sigma = 0,
Mahalanobis against scipy, parameter samples against each method's predict, the regressions
against least squares, the Figure 1 B/C medians and the Figure 3A verdicts."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from scipy.spatial import distance

import pnc.methods.regression as methods
from pnc import Collection, MLPConfig, PnCConfig, TrainConfig, build_members, init_params
from pnc.core import diagnostics as dg
from pnc.core.mlp import forward
from pnc.core.perturb_correct import perturbation_bases
from pnc.core.predictive import Predictive, epistemic_variance
from pnc.report import mechanism_table as rm
from pnc.runtime.io import ArtifactError, file_sha256, save_pytree, write_json
from pnc.studies.mujoco import mechanism as sm
from pnc.studies.mujoco import pnc_members

CFG = MLPConfig(out_dim=2, hidden=(8, 6, 5))


def _coeffs(key, config: PnCConfig, layers, member: int) -> dict:
    """Member ``member``'s coefficients as build_members draws them (its documented key use)."""
    member_keys = jax.random.split(jax.random.split(key)[1], config.n_members)
    _, k_z = jax.random.split(member_keys[member])
    out = {}
    for layer in layers:
        z = jax.random.normal(jax.random.fold_in(k_z, layer), (config.rank,), jnp.float32)
        if config.perturbation_norm == "radius":
            z = z / jnp.linalg.norm(z)
        out[layer] = config.sigma * z
    return out


@pytest.fixture(scope="module")
def net():
    params = init_params(CFG, 3, jax.random.key(0))
    x_cal = jax.random.normal(jax.random.key(1), (60, 3))
    return params, x_cal


def test_perturbation_bases_are_the_build_bases(net):
    params, x_cal = net
    config = PnCConfig(n_members=3, rank=4, sigma=2.0, layers=(0, 2), bootstrap_frac=None,
                       perturbation_norm="radius")  # fmt: skip
    key = jax.random.key(5)
    members = build_members(params, CFG, x_cal, config, key=key)
    bases = perturbation_bases(params, CFG, config, key=key)
    assert sorted(bases) == [0, 2] and bases[0].shape == (3 * 8, 4)
    dw = (members["hidden_0"]["kernel"] - params["hidden_0"]["kernel"][None]).reshape(3, -1)
    np.testing.assert_allclose(np.linalg.norm(dw, axis=1), 2.0, rtol=1e-5)
    np.testing.assert_allclose(dw @ bases[0] @ bases[0].T, dw, atol=1e-5)  # in span(U_0)


@pytest.mark.parametrize(
    ("layers", "center", "norm"),
    [((0, 2), "zero", "radius"), ((0, 1), "original", "gaussian"), ((2,), "original", "radius")],
)
def test_corrected_member_is_the_build_members_member(net, layers, center, norm):
    params, x_cal = net
    config = PnCConfig(n_members=3, rank=4, sigma=1.5, layers=layers, bootstrap_frac=None,
                       ridge=0.1, ridge_center=center, perturbation_norm=norm)  # fmt: skip
    key = jax.random.key(7)
    members = build_members(params, CFG, x_cal, config, key=key)
    bases = perturbation_bases(params, CFG, config, key=key)
    for m in range(3):
        mine = dg.corrected_member(params, CFG, bases, x_cal, _coeffs(key, config, layers, m),
                                   config.ridge, center=center)  # fmt: skip
        theirs = jax.tree.map(lambda a, m=m: a[m], members)
        for a, b in zip(jax.tree.leaves(mine), jax.tree.leaves(theirs), strict=True):
            np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    # without correction: only the perturbed kernels move
    plain = dg.corrected_member(params, CFG, bases, x_cal, _coeffs(key, config, layers, 0),
                                config.ridge, correct=False)  # fmt: skip
    for name in CFG.layer_names():
        moved = not np.array_equal(plain[name]["kernel"], params[name]["kernel"])
        assert moved == (name in {f"hidden_{i}" for i in layers}), name


def test_zero_coefficients_give_the_base_network(net):
    params, x_cal = net
    config = PnCConfig(rank=4, layers=(0, 2))
    bases = perturbation_bases(params, CFG, config, key=jax.random.key(1))
    zero = {layer: jnp.zeros(4) for layer in bases}
    member = dg.corrected_member(params, CFG, bases, x_cal, zero, 1e-3, center="original")
    for a, b in zip(jax.tree.leaves(member), jax.tree.leaves(params), strict=True):
        np.testing.assert_array_equal(a, b)


def test_output_sensitivity_is_propositions_one_layer_sensitivity_at_the_head():
    """One perturbed layer followed by the head: A(x) = mean rows of corrected_sensitivity."""
    cfg = MLPConfig(out_dim=2, hidden=(8, 6))
    with jax.enable_x64(True):
        params = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64),
                              init_params(cfg, 3, jax.random.key(0)))  # fmt: skip
        x_cal = jax.random.normal(jax.random.key(1), (40, 3), jnp.float64)
        x = 3.0 * jax.random.normal(jax.random.key(2), (7, 3), jnp.float64)
        config = PnCConfig(rank=5, layers=(1,))
        bases = {
            1: perturbation_bases(params, cfg, config, key=jax.random.key(3))[1].astype(jnp.float64)
        }
        a = dg.output_sensitivity(params, cfg, bases, x_cal, x, 0.01, center="original")
        b = dg.corrected_sensitivity(params, cfg, 1, bases[1], x_cal, x, 0.01)[:, :2, :]
        assert a.shape == (7, 2, 5) and float(jnp.max(jnp.abs(a))) > 1e-3
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("norm", ["gaussian", "radius"])
def test_probe_sketch_is_sigma2_frobenius_norm_in_the_linear_limit(net, norm):
    """Theorem 2: E ||A v||^2 = s^2 ||A||_F^2; relative sd of the J-probe mean <= sqrt(2/(J r_eff))."""
    params, x_cal = net
    with jax.enable_x64(True):
        params64 = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), params)
        x_cal64 = jnp.asarray(x_cal, jnp.float64)
        x = 2.0 * jax.random.normal(jax.random.key(4), (6, 3), jnp.float64)
        config = PnCConfig(rank=6, layers=(0,), perturbation_norm=norm)
        bases = {
            k: v.astype(jnp.float64)
            for k, v in perturbation_bases(params, CFG, config, key=jax.random.key(2)).items()
        }
        a = dg.output_sensitivity(params64, CFG, bases, x_cal64, x, 1e-3, center="original")
        expected = np.asarray(jnp.sum(a**2, axis=(1, 2)))
        if norm == "radius":
            expected = expected / config.rank  # E[u u^T] = I / K on the unit sphere
        n_probes = 400
        sketch = np.asarray(
            dg.probe_sketch(params64, CFG, bases, x_cal64, x, 1e-3, 1e-5, n_probes=n_probes,
                            key=jax.random.key(9), center="original", perturbation_norm=norm)
        )  # fmt: skip
        r_eff = np.asarray(dg.effective_rank(a))
        tolerance = 5 * np.sqrt(2.0 / (n_probes * r_eff))
        assert np.all(np.abs(sketch / expected - 1) < tolerance), (sketch, expected, tolerance)


def test_sigma_zero_gives_zero_disagreement_and_zero_magnitudes(net):
    params, x_cal = net
    config = PnCConfig(n_members=5, rank=4, sigma=0.0, layers=(0, 2), bootstrap_frac=0.5)
    members = build_members(params, CFG, x_cal, config, key=jax.random.key(3))
    x = jax.random.normal(jax.random.key(8), (10, 3))
    mu = jax.vmap(lambda p: forward(p, x, CFG)[0])(members)
    for a, b in zip(jax.tree.leaves(members), jax.tree.leaves(params), strict=True):
        np.testing.assert_array_equal(a, jnp.broadcast_to(b, a.shape))  # the base network
    np.testing.assert_array_equal(mu, jnp.broadcast_to(mu[0], mu.shape))
    # the variance of identical values: zero up to the rounding of their mean
    assert float(jnp.max(epistemic_variance(Predictive(mu, mu)))) < 1e-12
    dh, dy = sm.perturbation_norms(members, params, x, CFG)
    assert dh.shape == (5, 10) and float(jnp.max(dh)) == 0.0 and float(jnp.max(dy)) == 0.0
    assert sm.perturbation_second_moment(config) == 0.0


def test_perturbation_second_moment():
    assert sm.perturbation_second_moment(PnCConfig(sigma=3.0, rank=9)) == 9.0
    radius = PnCConfig(sigma=3.0, rank=9, perturbation_norm="radius")
    assert sm.perturbation_second_moment(radius) == 1.0


def test_mahalanobis_distance_matches_scipy():
    rng = np.random.default_rng(0)
    h_cal = rng.normal(size=(500, 6)) @ rng.normal(size=(6, 6))
    h_cal[:, 5] = 0.0  # a dead unit: the ridge keeps the covariance invertible
    h = 3.0 * rng.normal(size=(20, 6))
    got = np.asarray(dg.mahalanobis_distance(jnp.asarray(h_cal, jnp.float32),
                                             jnp.asarray(h, jnp.float32), sm.MAHALANOBIS_RIDGE))  # fmt: skip
    cov = np.cov(h_cal, rowvar=False, bias=True)
    cov += sm.MAHALANOBIS_RIDGE * np.mean(np.diag(cov)) * np.eye(6)
    inv = np.linalg.inv(cov)
    mu = h_cal.mean(axis=0)
    want = np.array([distance.mahalanobis(row, mu, inv) for row in h])
    np.testing.assert_allclose(got, want, rtol=2e-3)


def test_nearest_distance_matches_scipy_across_blocks():
    rng = np.random.default_rng(3)
    reference = rng.normal(size=(300, 7)).astype(np.float32) * 5
    points = np.concatenate([rng.normal(size=(45, 7)) * 5, reference[:5] + 1e-4]).astype(np.float32)
    want = distance.cdist(points, reference).min(axis=1)
    got = dg.nearest_distance(jnp.asarray(reference), points, block_size=16)  # 50 = 3 x 16 + 2
    assert got.shape == (50,)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    # near-duplicates of reference rows: their tiny distance, not cancellation noise
    np.testing.assert_allclose(got[-5:], np.sqrt(7) * 1e-4, rtol=0.05)
    with pytest.raises(ValueError, match="block_size"):
        dg.nearest_distance(jnp.asarray(reference), points, block_size=0)


def test_point_rows_are_distinct_sorted_and_capped():
    rows = sm.point_rows(jax.random.key(0), 50, 20)
    assert len(rows) == 20 == len(set(rows.tolist())) and np.all(np.diff(rows) > 0)
    assert sm.point_rows(jax.random.key(0), 5, 20).tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="empty"):
        sm.point_rows(jax.random.key(0), 0, 20)


# ----------------------------------------------------------------------------- samples


@pytest.fixture(scope="module")
def base_run():
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (200, 2)).astype(np.float32)
    y = np.sin(x[:, :1]) + 0.1 * rng.normal(size=(200, 1)).astype(np.float32)
    method = methods.get("swag")
    config = method.make_config({})
    model_config = MLPConfig(out_dim=1, hidden=(16, 16))
    run = method.train(method.training_spec(config), x, y, model_config=model_config,
                       # SWAG/Subspace moments: 10 iterates from step 100
                       train_config=TrainConfig(steps=200, batch_size=32,
                                                collection=Collection(100, 10, 10)),
                       key=jax.random.key(0))  # fmt: skip
    xs = run.model.x_norm.transform(jnp.asarray(x))
    ys = run.model.y_norm.transform(jnp.asarray(y))
    return run, xs, ys


@pytest.mark.parametrize(
    ("method_id", "overrides"),
    [
        ("pnc", {"n_members": 6, "sigma": 1.0, "rank": 3}),
        ("pnc_nocorr", {"n_members": 6, "sigma": 1.0, "rank": 3}),
        ("swag", {"n_samples": 7, "rank": 5, "chunk_size": 3}),
        ("laplace", {"n_samples": 7, "max_rows": 100, "chunk_size": 3}),
        ("subspace", {"n_samples": 7, "rank": 3, "burn_in": 3, "max_rows": 100}),
    ],
)
def test_parameter_samples_are_what_predict_evaluates(base_run, method_id, overrides):
    run, xs, ys = base_run
    method = methods.get(method_id)
    posterior = method.build(run, method.make_config(overrides), xs, ys, key=jax.random.key(1))
    key = jax.random.key(2)
    samples, reference = sm.parameter_samples(method_id, posterior, key)
    means = jax.vmap(lambda p: forward(p, xs[:20], run.model.config)[0])(samples)
    np.testing.assert_allclose(means, method.predict(posterior, xs[:20], key=key).means,
                               rtol=1e-5, atol=1e-5)  # fmt: skip
    assert jax.tree.structure(reference) == jax.tree.structure(run.model.params)
    dh, dy = sm.perturbation_norms(samples, reference, xs[:20], run.model.config)
    assert dh.shape == dy.shape == (means.shape[0], 20) and float(jnp.min(dh + dy)) > 0


def test_subspace_chain_is_restored_from_the_validation_phase_not_run_again(
    base_run, tmp_path, monkeypatch
):
    """With the validation phase's directory, Subspace's posterior comes from its stored chain:
    the same parameter samples as building it, no chain run; a stored file without the selected
    configuration stops naming the file."""
    from pnc.core.keys import derive_key
    from pnc.studies.mujoco import grid
    from pnc.studies.mujoco.phases import write_posteriors

    run, xs, ys = base_run
    entry = {"subspace": {"fixed": {"n_samples": 7, "rank": 3, "burn_in": 3, "max_rows": 100},
                          "grid": {"temperature": [1.0, 10.0]}}}  # fmt: skip
    points = grid.expand("subspace", entry["subspace"])
    point = points[1]
    run.save(tmp_path / "runs" / point.run_id)
    selection = {"Ant": {"subspace": {"config": point.config_id}}}
    tables = {"subspace": grid.table_of(points)}  # the grid table the workflow writes
    args = ("Ant", 0, run, selection, tables, PnCConfig(n_members=2), None, xs, ys,
            tmp_path / "runs" / "base")  # fmt: skip
    built = sm._method_posteriors(*args)["subspace"]
    method = methods.get("subspace")
    stored = tmp_path / "validation" / "subspace" / f"{point.run_id}.npz"
    write_posteriors(
        {
            p.config_id: method.posterior_arrays(
                method.build(
                    run, p.config, xs, ys, key=derive_key("Ant", 0, method.key_id, "build")
                )
            )
            for p in points
        },
        stored,
    )
    monkeypatch.setattr(type(method), "build", lambda *a, **k: pytest.fail("chain run again"))
    restored = sm._method_posteriors(*args, validation_dir=tmp_path / "validation")["subspace"]
    assert restored[2] == built[2] == point.config_id
    for a, b in zip(jax.tree.leaves(restored[:2]), jax.tree.leaves(built[:2]), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    write_posteriors({points[0].config_id: {"z": np.zeros((7, 3), np.float32),
                                            "n_evals": np.asarray(1)}}, stored)  # fmt: skip
    with pytest.raises(ArtifactError, match=rf"{point.run_id}\.npz: subspace: no stored posterior"):
        sm._method_posteriors(*args, validation_dir=tmp_path / "validation")
    stored.write_bytes(stored.read_bytes()[:50])  # cut
    with pytest.raises(ArtifactError, match="cannot read the stored posteriors"):
        sm._method_posteriors(*args, validation_dir=tmp_path / "validation")


# ----------------------------------------------------------------------------- stored members


def test_stored_members_are_checked_against_both_hashes(tmp_path):
    run_dir, members_dir = tmp_path / "run", tmp_path / "members"
    save_pytree(run_dir / "run.msgpack", {"w": np.ones(3)})
    members = {"hidden_0": {"kernel": np.zeros((2, 3, 4), np.float32)}}
    save_pytree(members_dir / "members.msgpack", members)
    config = dataclasses.asdict(PnCConfig(n_members=2))
    record = {
        "env": "Ant",
        "seed": 0,
        "config": config,
        "members_sha256": file_sha256(members_dir / "members.msgpack"),
        "base_run_sha256": file_sha256(run_dir / "run.msgpack"),
    }
    write_json(members_dir / "members.json", record)
    loaded, cfg, _ = pnc_members.load_pnc_members(members_dir, run_dir)
    assert cfg.n_members == 2 and loaded["hidden_0"]["kernel"].shape == (2, 3, 4)
    save_pytree(run_dir / "run.msgpack", {"w": np.zeros(3)})  # another base run
    with pytest.raises(ArtifactError, match="another base run"):
        pnc_members.load_pnc_members(members_dir, run_dir)
    save_pytree(run_dir / "run.msgpack", {"w": np.ones(3)})
    data = (members_dir / "members.msgpack").read_bytes()
    (members_dir / "members.msgpack").write_bytes(data[:-10])
    with pytest.raises(ArtifactError, match="members.msgpack does not match"):
        pnc_members.load_pnc_members(members_dir, run_dir)


# ----------------------------------------------------------------------------- statistics


def _points(rng, slope_b=2.0, slope_c=1.0, n=300):
    """A mechanism frame whose disagreement follows known laws in distance and sketch."""
    rows = []
    offsets = {"id": 0.0, "near": 0.5, "far": 1.5}
    for split, off in offsets.items():
        dist = 10 ** rng.uniform(0, 2, n)
        sketch = 10 ** rng.uniform(-3, 1, n)
        d_b = off + slope_b * np.log10(dist) + 0.05 * rng.normal(size=n)
        values = {
            "disagreement": d_b,
            "mahalanobis": dist,
            "sketch_probe": sketch,
            "sketch_analytic": 3.0 * sketch,
        }
        for q, v in values.items():
            rows.append(pd.DataFrame({"env": "Ant", "seed": 0, "split": split,
                                      "point": np.arange(n), "method": "pnc", "member": -1,
                                      "quantity": q, "value": v}))  # fmt: skip
    return pd.concat(rows, ignore_index=True)


def test_distance_regression_is_least_squares_with_regime_dummies():
    wide = rm.points_wide(_points(np.random.default_rng(0)))
    fit = rm.distance_regression(wide)
    design = np.column_stack(
        [np.ones(len(wide)), np.log10(wide.mahalanobis)]
        + [(wide.split == s).to_numpy(float) for s in ("near", "far")]
    )
    coef = np.linalg.lstsq(design, wide.disagreement.to_numpy(), rcond=None)[0]
    assert fit["slope"] == pytest.approx(coef[1], rel=1e-9)
    assert abs(fit["slope"] - 2.0) < 4 * fit["se"] and fit["t"] == pytest.approx(
        fit["slope"] / fit["se"]
    )
    assert fit["n"] == len(wide) and 0 < fit["spearman"] <= 1


def test_sketch_regression_recovers_a_power_law():
    frame = _points(np.random.default_rng(1))
    wide = rm.points_wide(frame)
    wide["disagreement"] = 0.2 * wide["sketch_probe"]  # D proportional to the sketch
    for sketch in rm.SKETCHES:
        fit = rm.sketch_regression(wide, sketch)
        assert fit["slope"] == pytest.approx(1.0, abs=1e-6)
        assert fit["spearman"] == pytest.approx(1.0)


def test_magnitudes_take_the_median_over_members_then_seeds():
    rows = []
    for seed, scale in ((0, 1.0), (1, 3.0), (2, 100.0)):
        for split in ("id", "far"):
            for member, v in enumerate((1.0, 2.0, 10.0)):
                for q, factor in (("dh", 1.0), ("dy", 0.1 if split == "id" else 0.4)):
                    rows.append(("Ant", seed, split, -1, "pnc", member, q, scale * v * factor))
    frame = pd.DataFrame(rows, columns=list(sm.MECHANISM_COLUMNS))
    summary = rm.magnitude_summary(frame)
    far = summary[summary.split == "far"].iloc[0]
    assert far.dh == pytest.approx(2.0 * 3.0) and far.dy == pytest.approx(0.4 * 6.0)
    ratios = rm.far_id_ratios(summary)
    assert ratios.far_over_id.iloc[0] == pytest.approx(4.0)


def _config_rows(method, config, calibration, val, rmse, far):
    return [
        ("Ant", method, config, calibration, seed, split, metric, value + 0.01 * seed)
        for seed in (0, 1)
        for split, metric, value in (("val", "nll", val), ("id", "rmse", rmse), ("far", "nll", far))
    ]


def _score_points(id_parts, far_parts):
    rows = []
    for split, (aleatoric, epistemic) in (("id", id_parts), ("far", far_parts)):
        for q, v in (("score_aleatoric", aleatoric), ("score_epistemic", epistemic)):
            rows.append(pd.DataFrame({"env": "Ant", "seed": 0, "split": split,
                                      "point": np.arange(len(v)), "method": "pnc", "member": -1,
                                      "quantity": q, "value": np.asarray(v, float)}))  # fmt: skip
    return rm.points_wide(pd.concat(rows, ignore_index=True))


def test_score_aurocs_split_the_total_into_its_parts():
    """Humanoid's case: the aleatoric part is larger on ID, the epistemic part on Far; the total
    follows whichever part is larger, and each part's AUROC and medians are reported."""
    wide = _score_points(([50.0, 60.0, 70.0], [1.0, 2.0, 0.5]), ([20.0, 30.0], [5.0, 4.0]))
    rows = {r["part"]: r for r in rm.score_auroc_rows(wide)}
    assert list(rows) == ["total", "score_aleatoric", "score_epistemic"]
    assert rows["score_aleatoric"]["auroc"] == 0.0 and rows["score_epistemic"]["auroc"] == 1.0
    # totals: ID 51, 62, 70.5; Far 25, 34
    assert rows["total"]["auroc"] == 0.0 and rows["total"]["n"] == 5
    assert rows["total"]["id_median"] == 62.0 and rows["total"]["far_median"] == 29.5
    assert rows["score_epistemic"]["id_median"] == 1.0
    # when the disagreement dominates, the total follows it
    wide = _score_points(([1.0, 1.2], [0.1, 0.2]), ([1.1, 0.9], [30.0, 40.0]))
    assert {r["part"]: r["auroc"] for r in rm.score_auroc_rows(wide)}["total"] == 1.0
    # files without the two quantities, or without Far points, give no rows
    assert rm.score_auroc_rows(wide.drop(columns="score_aleatoric")) == []
    assert rm.score_auroc_rows(wide[wide.split == "id"]) == []


def test_distance_row_is_the_ratio_of_the_split_medians():
    rows = [pd.DataFrame({"env": "Ant", "seed": 0, "split": split, "point": np.arange(len(v)),
                          "method": "pnc", "member": -1, "quantity": "input_distance",
                          "value": v})
            for split, v in (("id", [1.0, 2.0, 9.0]), ("near", [4.0]), ("far", [6.0, 10.0]))]  # fmt: skip
    wide = rm.points_wide(pd.concat(rows, ignore_index=True))
    assert rm.distance_row(wide) == {"id_median": 2.0, "far_median": 8.0, "far_over_id": 4.0,
                                     "n": 5}  # fmt: skip
    assert rm.distance_row(wide[wide.split != "far"]) is None
    assert rm.distance_row(wide.drop(columns="input_distance")) is None


def test_frontier_verdicts_per_sigma():
    rows = (
        _config_rows("pnc", "sigma=8,bootstrap_frac=0.1,ridge=0.0001", "raw", 1.0, 0.10, 2.0)
        + _config_rows("pnc", "sigma=8,bootstrap_frac=0.3,ridge=0.0001", "raw", 0.5, 0.20, 3.0)
        + _config_rows("pnc", "sigma=32,bootstrap_frac=0.1,ridge=0.0001", "raw", 0.9, 0.3, 1.0)
        + _config_rows("pnc_nocorr", "sigma=8", "raw", 2.0, 0.5, 4.0)
        + _config_rows("pnc_nocorr", "sigma=8", "vcal", 1.5, 0.5, 3.5)
    )
    frame = pd.DataFrame(
        rows, columns=["env", "method", "config", "calibration", "seed", "split", "metric", "value"]
    )
    sigmas = {("pnc", "sigma=8,bootstrap_frac=0.1,ridge=0.0001"): 8.0,
              ("pnc", "sigma=8,bootstrap_frac=0.3,ridge=0.0001"): 8.0,
              ("pnc", "sigma=32,bootstrap_frac=0.1,ridge=0.0001"): 32.0,
              ("pnc_nocorr", "sigma=8"): 8.0}  # the grid tables' typed sigma  # fmt: skip
    verdicts = rm.frontier_verdicts(frame, "Ant", sigmas).set_index("sigma")
    # sigma 8: the bootstrap 0.3 configuration has the lower validation NLL; no-corr's vcal variant
    assert verdicts.loc[8.0, "pnc_config"] == "sigma=8,bootstrap_frac=0.3,ridge=0.0001|raw"
    assert verdicts.loc[8.0, "nocorr_config"] == "sigma=8|vcal"
    assert verdicts.loc[8.0, "pnc_far_nll"] == pytest.approx(3.005)
    assert verdicts.loc[8.0, "verdict"] == "correction better on both"
    assert verdicts.loc[32.0, "verdict"] == "no P&C w/o Corr at this sigma"
    with pytest.raises(ValueError, match=r"no sigma for \[\('pnc_nocorr', 'sigma=8'\)\]"):
        rm.frontier_verdicts(frame, "Ant", {k: v for k, v in sigmas.items() if k[0] == "pnc"})
