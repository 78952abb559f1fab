"""Theorem 3 (bootstrapped correction): effective ranks and alignment of per-member covariances,
the members' correction subsets, and the mechanism stage's measurement on a small network."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from pnc import MLPConfig, ridge_correction
from pnc.core import diagnostics
from pnc.core.mlp import hidden_activations, init_params
from pnc.core.perturb_correct import (
    PnCConfig,
    build_members,
    calibration_indices,
    member_subsets,
    perturbation_bases,
)
from pnc.studies.mujoco.mechanism import BOOTSTRAP_QUANTITIES, bootstrap_rank_frame


def _by_matrices(a: np.ndarray) -> dict[str, np.ndarray]:
    """The same quantities from explicit q x q covariances, point by point."""
    out = {k: [] for k in ("rank_mixture", "rank_single", "alignment", "trace_cv", "norm_cv")}
    for point in a:
        c = [m @ m.T for m in point]
        mix = sum(c) / len(c)
        out["rank_mixture"].append(np.trace(mix) ** 2 / np.sum(mix**2))
        out["rank_single"].append([np.trace(ci) ** 2 / np.sum(ci**2) for ci in c])
        cos = [
            np.sum(ci * cj) / np.sqrt(np.sum(ci**2) * np.sum(cj**2))
            for i, ci in enumerate(c)
            for j, cj in enumerate(c)
            if i != j
        ]
        out["alignment"].append(np.mean(cos))
        traces = np.array([np.trace(ci) for ci in c])
        norms = np.array([np.sqrt(np.sum(ci**2)) for ci in c])
        out["trace_cv"].append(traces.std() / traces.mean())
        out["norm_cv"].append(norms.std() / norms.mean())
    return {k: np.array(v) for k, v in out.items()}


@pytest.mark.parametrize("shape", [(3, 4, 5, 7), (2, 3, 9, 4)])  # q <= T and q > T
def test_terms_equal_the_explicit_covariances(shape):
    a = np.random.default_rng(0).normal(size=shape)
    got = diagnostics.bootstrap_rank_terms(a)
    want = _by_matrices(a)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-10, err_msg=name)
    assert np.all((got["alignment"] > 0) & (got["alignment"] <= 1))


def test_theorem_identity_holds_for_equal_trace_and_norm():
    """Rotated copies Q_m C Q_m^T share trace and Frobenius norm: the formula is exact."""
    rng = np.random.default_rng(1)
    n, m, q, t = 4, 6, 5, 3
    base = rng.normal(size=(n, q, t))
    rot = np.linalg.qr(rng.normal(size=(n, m, q, q)))[0]
    a = np.einsum("nmqp,npt->nmqt", rot, base)
    got = diagnostics.bootstrap_rank_terms(a)
    np.testing.assert_allclose(got["trace_cv"], 0.0, atol=1e-12)
    np.testing.assert_allclose(got["norm_cv"], 0.0, atol=1e-12)
    np.testing.assert_allclose(got["rank_predicted"], got["rank_mixture"], rtol=1e-10)
    # rotations spread the members' covariances: the mixture has a higher rank than any single
    assert np.all(got["rank_mixture"] > got["rank_single"].max(axis=1) + 1e-6)


def test_aligned_members_gain_nothing_and_rank_falls_with_alignment():
    rng = np.random.default_rng(2)
    one = rng.normal(size=(1, 1, 6, 4))
    same = diagnostics.bootstrap_rank_terms(np.repeat(one, 5, axis=1))
    np.testing.assert_allclose(same["alignment"], 1.0, rtol=1e-12)
    np.testing.assert_allclose(same["rank_mixture"], same["rank_single"][:, 0], rtol=1e-12)
    # members rotated by angles shrinking to 0 (exp(w S_m), S_m skew) align more and more, with
    # equal traces and norms throughout; the mixture's rank falls
    skew = rng.normal(size=(5, 6, 6))
    skew = skew - np.swapaxes(skew, 1, 2)
    ranks, alignments = [], []
    for w in (0.3, 0.1, 0.03):
        mats = np.stack([scipy.linalg.expm(w * s) for s in skew])
        terms = diagnostics.bootstrap_rank_terms(np.einsum("mqp,npt->nmqt", mats, one[:, 0]))
        ranks.append(terms["rank_mixture"][0])
        alignments.append(terms["alignment"][0])
    assert alignments[0] < alignments[1] < alignments[2]
    assert ranks[0] > ranks[1] > ranks[2]


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="M >= 2"):
        diagnostics.bootstrap_rank_terms(np.ones((2, 1, 3, 3)))
    with pytest.raises(ValueError, match=r"\[N, M, q, T\]"):
        diagnostics.bootstrap_rank_terms(np.ones((2, 3, 3)))


CFG = MLPConfig(out_dim=2, hidden=(12, 12))


def _gap(a, b) -> float:
    """Largest absolute difference relative to the largest entry of ``b``."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.fixture(scope="module")
def net():
    params = init_params(CFG, 3, jax.random.key(0))
    x = jax.random.normal(jax.random.key(1), (300, 3))
    return params, x


@pytest.mark.parametrize("center", ["original", "zero"])
def test_member_subsets_are_the_rows_each_member_corrected_on(net, center):
    """Member m's refit layer is the ridge fit on member_subsets(...)[m] and no other rows."""
    params, x = net
    config = PnCConfig(n_members=5, rank=3, sigma=0.5, bootstrap_frac=0.2, ridge=1e-3,
                       layers=(0,), calibration_size=200, ridge_center=center)  # fmt: skip
    key = jax.random.key(5)
    members = build_members(params, CFG, x, config, key=key)
    x_cal = x[calibration_indices(key, 300, config)]
    subsets = member_subsets(key, 200, config)
    assert subsets.shape == (5, config.subset_size(200))
    nxt = params["hidden_1"]
    for m in range(5):
        rows = x_cal[subsets[m]]
        w0 = members["hidden_0"]["kernel"][m]
        h_v = jax.nn.relu(rows @ w0 + params["hidden_0"]["bias"])
        base = hidden_activations(params, rows, CFG)[0]
        kernel, bias = ridge_correction(
            base, h_v, nxt["kernel"], nxt["bias"], config.ridge, center=center
        )
        other = x_cal[subsets[(m + 1) % 5]]
        h_o = jax.nn.relu(other @ w0 + params["hidden_0"]["bias"])
        k_o, b_o = ridge_correction(hidden_activations(params, other, CFG)[0], h_o,
                                    nxt["kernel"], nxt["bias"], config.ridge, center=center)  # fmt: skip
        # float32 solves along two paths agree to ~1e-4; another member's rows are far off
        own = max(_gap(members["hidden_1"]["kernel"][m], kernel),
                  _gap(members["hidden_1"]["bias"][m], bias))  # fmt: skip
        assert own < 1e-3
        assert own < 0.05 * _gap(members["hidden_1"]["kernel"][m], k_o)
    no_bootstrap = PnCConfig(n_members=5, rank=3, sigma=0.5, bootstrap_frac=None)
    assert member_subsets(key, 200, no_bootstrap) is None


def test_bootstrap_rank_frame_on_a_small_network(net):
    params, x = net
    config = PnCConfig(n_members=8, rank=3, sigma=0.5, bootstrap_frac=0.1, ridge=1e-2,
                       layers=(0, 1), calibration_size=200)  # fmt: skip
    key = jax.random.key(3)
    x_cal = x[calibration_indices(key, 300, config)]
    bases = perturbation_bases(params, CFG, config, key=key)
    points = jnp.concatenate([x[:5], 6.0 * x[5:10]])
    subsets = member_subsets(key, 200, config)
    out = bootstrap_rank_frame(params, CFG, config, bases, x_cal, points, subsets)
    assert set(out) == set(BOOTSTRAP_QUANTITIES)
    for name, value in out.items():
        assert value.shape == (10,) and np.all(np.isfinite(value)), name
    assert np.all((out["alignment"] > 0) & (out["alignment"] <= 1 + 1e-12))
    # the output covariance has rank <= min(D, T) = 2
    assert np.all(out["rank_mixture"] <= 2 + 1e-9) and np.all(out["rank_shared"] >= 1 - 1e-9)
    # ||C_bar||_F <= mean ||C_m||_F (triangle inequality): r_eff(C_bar) >= (tau / nu)^2
    m = subsets.shape[0]
    floor = out["rank_predicted"] * (1 + (m - 1) * out["alignment"]) / m
    assert np.all(out["rank_mixture"] >= floor * (1 - 1e-9))
    # the shared-subset rank is the first member's: recomputed on its rows alone
    one = diagnostics.output_sensitivity(params, CFG, bases, x_cal[subsets[0]], points,
                                         config.ridge, center=config.ridge_center)  # fmt: skip
    c = np.einsum("ndt,net->nde", np.asarray(one, np.float64), np.asarray(one, np.float64))
    want = np.trace(c, axis1=1, axis2=2) ** 2 / np.sum(c**2, axis=(1, 2))
    np.testing.assert_allclose(out["rank_shared"], want, rtol=1e-4)
