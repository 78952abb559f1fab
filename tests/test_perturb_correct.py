import ast
import dataclasses
import functools
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pnc
import pnc.core.perturb_correct as PC
from pnc import MLPConfig, TrainConfig, forward, hidden_activations, init_params
from pnc.core.conv import ConvPnCConfig
from pnc.core.perturb_correct import (
    PnCConfig,
    _build,
    build_members,
    build_members_ridge_path,
    calibration_indices,
    correction_system,
    member_subsets,
    perturbation_bases,
    perturbation_basis,
    predict_members,
    solve_correction,
)
from pnc.core.perturb_correct import ridge_correction as _ridge_correction

ridge_correction = jax.jit(_ridge_correction, static_argnames=("center",))


def _problem(b=60, d=6, q=4, seed=0):
    rng = np.random.default_rng(seed)
    h = np.maximum(rng.normal(size=(b, d)), 0.0) + 0.1 * rng.normal(size=(b, d))
    hv = h + 0.5 * rng.normal(size=(b, d))
    kernel = rng.normal(size=(d, q))
    bias = rng.normal(size=q)
    return [a.astype(np.float32) for a in (h, hv, kernel, bias)]


def _lstsq_reference(h, hv, kernel, bias, ridge):
    """The stacked ridge problem [X_v; sqrt(l) I] Theta'^T = [X Theta^T; sqrt(l) Theta^T], float64."""
    h, hv, kernel, bias = (np.asarray(a, np.float64) for a in (h, hv, kernel, bias))
    x = np.hstack([np.ones((len(h), 1)), h])
    xv = np.hstack([np.ones((len(hv), 1)), hv])
    theta_t = np.vstack([bias[None], kernel])  # [d+1, q]
    a = np.vstack([xv, np.sqrt(ridge) * np.eye(xv.shape[1])])
    rhs = np.vstack([x @ theta_t, np.sqrt(ridge) * theta_t])
    sol = np.linalg.lstsq(a, rhs, rcond=None)[0]
    return sol[1:], sol[0]


@pytest.mark.parametrize("b,ridge", [(60, 0.3), (60, 0.0), (5, 0.3)])
def test_ridge_correction_is_lemma1_minimiser(b, ridge):
    h, hv, kernel, bias = _problem(b=b)
    k_new, b_new = ridge_correction(h, hv, kernel, bias, ridge)
    k_ref, b_ref = _lstsq_reference(h, hv, kernel, bias, ridge)
    np.testing.assert_allclose(k_new, k_ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(b_new, b_ref, rtol=1e-4, atol=1e-4)


def test_ridge0_calibration_residual_is_orthogonal_to_design():
    h, hv, kernel, bias = _problem(b=80)
    k_new, b_new = ridge_correction(h, hv, kernel, bias, 0.0)
    xv = np.hstack([np.ones((len(hv), 1)), hv]).astype(np.float64)
    resid = (hv @ np.asarray(k_new, np.float64) + np.asarray(b_new, np.float64)) - (
        h.astype(np.float64) @ kernel + bias
    )
    assert np.linalg.norm(resid) > 1.0  # B > d + 1: the repair cannot interpolate
    np.testing.assert_allclose(
        xv.T @ resid, 0.0, atol=1e-3 * np.linalg.norm(xv) * np.linalg.norm(resid)
    )


def test_ridge0_small_subset_interpolates_calibration_targets():
    h, hv, kernel, bias = _problem(b=6, d=8)  # B <= d + 1
    k_new, b_new = ridge_correction(h, hv, kernel, bias, 0.0)
    target = h @ kernel + bias
    np.testing.assert_allclose(hv @ k_new + b_new, target, atol=1e-4 * np.abs(target).max())


def test_unperturbed_and_infinite_ridge_return_the_original_layer():
    h, hv, kernel, bias = _problem()
    k_same, b_same = ridge_correction(h, h, kernel, bias, 1e-4)
    np.testing.assert_array_equal(k_same, kernel)
    np.testing.assert_array_equal(b_same, bias)
    shifts = []
    for ridge in (1e-2, 1e2, 1e6, 1e12):
        k_new, b_new = ridge_correction(h, hv, kernel, bias, ridge)
        shifts.append(float(np.linalg.norm(k_new - kernel) + np.linalg.norm(b_new - bias)))
    assert all(
        a > b for a, b in zip(shifts[:-1], shifts[1:], strict=True)
    )  # monotone shrinkage towards Theta
    assert shifts[-1] < 1e-8 and shifts[0] > 1e-2


def test_ridge_correction_jit_and_vmap_agree_with_eager():
    probs = [_problem(seed=s) for s in range(3)]
    stacked = [np.stack(a) for a in zip(*probs, strict=True)]
    batched = jax.jit(jax.vmap(_ridge_correction, in_axes=(0, 0, 0, 0, None)))(*stacked, 0.1)
    for i, prob in enumerate(probs):
        eager = _ridge_correction(*prob, 0.1)
        np.testing.assert_allclose(batched[0][i], eager[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(batched[1][i], eager[1], rtol=1e-5, atol=1e-5)


def test_ridge_correction_rejects_mismatched_shapes():
    h, hv, kernel, bias = _problem()
    with pytest.raises(ValueError):
        ridge_correction(h, hv[:-1], kernel, bias, 0.1)
    with pytest.raises(ValueError):
        ridge_correction(h, hv, kernel[:-1], bias, 0.1)


def _normal_equations(h, hv, kernel, bias, ridge, center):
    """Theta' = (X_v^T X_v + l I)^{-1} (X_v^T X Theta + l C), C = Theta or 0, in float64."""
    h, hv, kernel, bias = (np.asarray(a, np.float64) for a in (h, hv, kernel, bias))
    x = np.hstack([np.ones((len(h), 1)), h])
    xv = np.hstack([np.ones((len(hv), 1)), hv])
    theta = np.vstack([bias[None], kernel])  # [d+1, q]
    c = theta if center == "original" else np.zeros_like(theta)
    if ridge == 0.0:  # the interpolating solution closest to C (B <= d + 1)
        sol = c + np.linalg.pinv(xv) @ (x @ theta - xv @ c)
    else:
        sol = np.linalg.solve(xv.T @ xv + ridge * np.eye(xv.shape[1]), xv.T @ x @ theta + ridge * c)
    return sol[1:], sol[0]


@pytest.mark.parametrize("center", ["original", "zero"])
@pytest.mark.parametrize("b,ridge", [(60, 0.3), (60, 3.0), (60, 0.0), (5, 0.3), (5, 0.0)])
def test_ridge_correction_solves_the_normal_equations_for_both_centers(b, ridge, center):
    h, hv, kernel, bias = _problem(b=b)  # d = 6: b = 60 is the primal path, b = 5 the dual one
    k_new, b_new = ridge_correction(h, hv, kernel, bias, ridge, center=center)
    k_ref, b_ref = _normal_equations(h, hv, kernel, bias, ridge, center)
    np.testing.assert_allclose(k_new, k_ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(b_new, b_ref, rtol=1e-4, atol=1e-4)
    if ridge > 0:  # the centres give different layers (the check above can tell them apart)
        other = "zero" if center == "original" else "original"
        k_other, _ = _normal_equations(h, hv, kernel, bias, ridge, other)
        assert np.max(np.abs(k_other - k_ref)) > 5e-3


def test_zero_center_shrinks_towards_zero():
    h, hv, kernel, bias = _problem()
    k_same, b_same = ridge_correction(h, h, kernel, bias, 1e-1, center="zero")
    assert not np.array_equal(k_same, kernel)  # unlike the original centre, h_pert == h moves it
    k_big, b_big = ridge_correction(h, hv, kernel, bias, 1e12, center="zero")
    assert np.abs(k_big).max() < 1e-6 and np.abs(b_big).max() < 1e-6
    with pytest.raises(ValueError, match="center must be one of 'original', 'zero'"):
        _ridge_correction(h, hv, kernel, bias, 0.1, center="base")


def test_perturbation_basis_is_orthonormal_and_keyed():
    u = perturbation_basis(jax.random.key(0), (12, 7), 5)
    assert u.shape == (84, 5) and u.dtype == jnp.float32
    np.testing.assert_allclose(u.T @ u, np.eye(5), atol=1e-5)
    np.testing.assert_array_equal(u, perturbation_basis(jax.random.key(0), (12, 7), 5))
    assert not np.allclose(u, perturbation_basis(jax.random.key(1), (12, 7), 5))
    with pytest.raises(ValueError):
        perturbation_basis(jax.random.key(0), (2, 2), 5)


def test_config_validation():
    for bad in (
        {"n_members": 0},
        {"rank": 0},
        {"sigma": -1.0},
        {"bootstrap_frac": 0.0},
        {"bootstrap_frac": 1.5},
        {"ridge": -1e-3},
        {"layers": ()},
        {"layers": (1, 1)},
    ):
        with pytest.raises(ValueError):
            PnCConfig(**bad)
    for bad in ({"min_subset": 0}, {"calibration_size": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            PnCConfig(**bad)
    with pytest.raises(ValueError, match="perturbation_norm must be one of 'gaussian', 'radius'"):
        PnCConfig(perturbation_norm="unit")
    with pytest.raises(ValueError, match="ridge_center must be one of 'original', 'zero'"):
        PnCConfig(ridge_center="base")
    assert PnCConfig(layers=(2, 0)).layers == (0, 2)
    with pytest.raises(ValueError):
        PnCConfig(layers=(3,)).perturbed_layers(3)


def test_subset_size_is_max_of_min_subset_and_floor_of_the_fraction():
    assert PnCConfig(bootstrap_frac=0.3).subset_size(4096) == 1228  # floor(1228.8)
    assert PnCConfig(bootstrap_frac=0.1).subset_size(1234) == 123  # floor(123.4)
    assert PnCConfig(bootstrap_frac=0.05).subset_size(4096) == 204  # floor(204.8)
    assert PnCConfig(bootstrap_frac=0.1).subset_size(3) == 8  # the authors' minimum of 8
    assert PnCConfig(bootstrap_frac=0.1, min_subset=1).subset_size(3) == 1
    assert PnCConfig(bootstrap_frac=0.5, min_subset=30).subset_size(50) == 30
    assert PnCConfig(bootstrap_frac=None).subset_size(77) == 77


# ----------------------------------------------------------------------------- members

CFG = MLPConfig(out_dim=2, hidden=(16, 12, 10, 8))
# Layers 0 and 1 are adjacent (hidden_1 is corrected, then perturbed), hidden_2 is only corrected,
# hidden_3 is perturbed behind the corrected hidden_2, and the head is corrected.
CHAIN = PnCConfig(n_members=3, rank=4, sigma=0.5, bootstrap_frac=None, ridge=1e-2, layers=(0, 1, 3))


def _member(members, m):
    return jax.tree.map(lambda a: a[m], members)


def _bases(key, params, layers, rank):
    """The key scheme documented in build_members: basis key = first half of split(key)."""
    k_basis = jax.random.split(key)[0]
    return {
        i: perturbation_basis(
            jax.random.fold_in(k_basis, i), params[f"hidden_{i}"]["kernel"].shape, rank
        )
        for i in layers
    }


@pytest.fixture(scope="module")
def net():
    params = init_params(CFG, 3, jax.random.key(0))
    x_cal = jax.random.normal(jax.random.key(1), (200, 3))
    return params, x_cal


@pytest.fixture(scope="module")
def chain(net):
    params, x_cal = net
    key = jax.random.key(4)
    members = build_members(params, CFG, x_cal, CHAIN, key=key)
    nocorr = build_members(params, CFG, x_cal, dataclasses.replace(CHAIN, correct=False), key=key)
    return key, members, nocorr


@pytest.mark.parametrize("layers", [(0, 1, 3), None])
def test_perturbation_bases_are_the_directions_build_members_perturbs(net, layers):
    """Each member's kernel change at a perturbed layer lies in the span of that layer's basis and
    has Frobenius norm sigma (radius); the bases follow the documented key scheme."""
    params, x_cal = net
    config = dataclasses.replace(CHAIN, layers=layers, correct=False, perturbation_norm="radius")
    key = jax.random.key(21)
    bases = perturbation_bases(params, CFG, config, key=key)
    expected_layers = (0, 1, 3) if layers else (0, 1, 2, 3)
    assert sorted(bases) == list(expected_layers)
    reference = _bases(key, params, expected_layers, config.rank)
    members = build_members(params, CFG, x_cal, config, key=key)
    for i in expected_layers:
        u = np.asarray(bases[i], np.float64)
        shape = params[f"hidden_{i}"]["kernel"].shape
        assert u.shape == (shape[0] * shape[1], config.rank)
        np.testing.assert_array_equal(bases[i], reference[i])
        np.testing.assert_allclose(u.T @ u, np.eye(config.rank), atol=1e-5)
        for m in range(config.n_members):
            dw = np.asarray(
                members[f"hidden_{i}"]["kernel"][m] - params[f"hidden_{i}"]["kernel"], np.float64
            ).ravel()
            np.testing.assert_allclose(u @ (u.T @ dw), dw, atol=1e-5)
            np.testing.assert_allclose(np.linalg.norm(dw), config.sigma, rtol=1e-4)
    other = perturbation_bases(params, CFG, config, key=jax.random.key(22))
    assert not np.allclose(other[0], bases[0])


def test_sigma_zero_reproduces_the_base_model(net):
    params, x_cal = net
    members = build_members(
        params, CFG, x_cal, PnCConfig(n_members=3, sigma=0.0), key=jax.random.key(2)
    )
    for a, b in zip(jax.tree.leaves(members), jax.tree.leaves(params), strict=True):
        assert a.shape == (3,) + b.shape
        np.testing.assert_array_equal(a, np.broadcast_to(b, a.shape))


def test_members_are_the_chain_of_perturbations_and_lemma1_corrections(net, chain):
    params, x_cal = net
    key, members, nocorr = chain
    bases = _bases(key, params, (0, 1, 3), CHAIN.rank)
    base_h = hidden_activations(params, x_cal, CFG)
    # float32 solves of Grams with condition numbers ~1e3: agreement to ~1e-4 of the scale
    close = functools.partial(np.testing.assert_allclose, rtol=1e-3, atol=1e-4)
    for m in range(CHAIN.n_members):
        pm, pn = _member(members, m), _member(nocorr, m)
        # the ablation applies the same perturbations and nothing else
        for name in ("hidden_2", "head"):
            np.testing.assert_array_equal(pn[name]["kernel"], params[name]["kernel"])
        dw = {i: pn[f"hidden_{i}"]["kernel"] - params[f"hidden_{i}"]["kernel"] for i in (0, 1, 3)}
        for i, u in bases.items():  # dW = sigma * reshape(U z) lies in span(U)
            coeff = u.T @ dw[i].reshape(-1)
            np.testing.assert_allclose(u @ coeff, dw[i].reshape(-1), atol=1e-5)
            assert 0.5 * 0.5 < float(jnp.linalg.norm(coeff)) < 0.5 * 4.0  # sigma ||z||, K = 4
        np.testing.assert_array_equal(pm["hidden_0"]["kernel"], pn["hidden_0"]["kernel"])
        # walk the chain by hand: correct layer l + 1 against the base network's pre-activations
        h = x_cal
        layer = dict(params["hidden_0"], kernel=params["hidden_0"]["kernel"] + dw[0])
        for i in range(4):
            h = jax.nn.relu(h @ layer["kernel"] + layer["bias"])
            nxt = CFG.layer_names()[i + 1]
            if i in dw:
                k_ref, b_ref = ridge_correction(
                    base_h[i], h, params[nxt]["kernel"], params[nxt]["bias"], CHAIN.ridge
                )
            else:
                k_ref, b_ref = params[nxt]["kernel"], params[nxt]["bias"]
            if i + 1 in dw:  # perturbed on top of its correction
                k_ref = k_ref + dw[i + 1]
            close(pm[nxt]["kernel"], k_ref)
            close(pm[nxt]["bias"], b_ref)
            layer = pm[nxt]


def test_members_are_deterministic_and_chunked_build_agrees(net, chain):
    params, x_cal = net
    key, members, _ = chain
    again = build_members(params, CFG, x_cal, CHAIN, key=key)
    other = build_members(params, CFG, x_cal, CHAIN, key=jax.random.key(5))
    for la, lb in zip(jax.tree.leaves(members), jax.tree.leaves(again), strict=True):
        np.testing.assert_array_equal(la, lb)
    assert not np.allclose(members["head"]["kernel"], other["head"]["kernel"])
    chunked = build_members(params, CFG, x_cal, CHAIN, key=key, member_chunk=2)
    # The paths differ only by float32 rounding inside the Gram solves; compare what the members
    # predict (outputs are well conditioned in the solution, unlike individual kernel entries).
    x = jax.random.normal(jax.random.key(9), (64, 3))
    ref = predict_members(members, x, CFG).means
    scale = float(jnp.max(jnp.abs(ref)))
    np.testing.assert_allclose(predict_members(chunked, x, CFG).means, ref, atol=1e-4 * scale)


def test_predict_members_matches_per_member_forward_in_chunks(net, chain):
    _, members, _ = chain
    x = jax.random.normal(jax.random.key(8), (37, 3))
    pred = predict_members(members, x, CFG, max_rows=3 * 8)  # chunks of 8 rows, last one padded
    assert pred.means.shape == (3, 37, 2) and pred.variances.shape == (3, 37, 2)
    for m in range(3):
        mean, var = forward(_member(members, m), x, CFG)
        np.testing.assert_allclose(pred.means[m], mean, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(pred.variances[m], var, rtol=1e-5, atol=1e-6)


def test_build_members_rejects_bad_input(net):
    params, x_cal = net
    with pytest.raises(ValueError):
        build_members(params, CFG, x_cal[:, :2], PnCConfig(), key=jax.random.key(0))
    with pytest.raises(ValueError):
        build_members(params, CFG, x_cal, PnCConfig(layers=(4,)), key=jax.random.key(0))
    with pytest.raises(ValueError):
        build_members(params, CFG, x_cal, PnCConfig(), key=jax.random.key(0), member_chunk=0)
    small = PnCConfig(n_members=2, rank=2, layers=(1,))
    cases = (
        (x_cal[:, :2], {}, "x_cal has 2 columns, the network expects 3"),
        (x_cal[0], {}, "x_cal must be [N, in_dim] with N >= 1, got shape (3,)"),
        (x_cal[:0], {}, "x_cal must be [N, in_dim] with N >= 1, got shape (0, 3)"),
        (x_cal.at[3, 1].set(jnp.nan), {}, "x_cal holds non-finite values (NaN or inf); members would be non-finite"),
        (x_cal, {"member_chunk": 0}, "member_chunk must be >= 1 or None, got 0"),
    )  # fmt: skip
    for x, kwargs, message in cases:
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            build_members(params, CFG, x, small, key=jax.random.key(0), **kwargs)
    # the smallest accepted: one calibration row, one member per chunk
    one = build_members(params, CFG, x_cal[:1], small, key=jax.random.key(0))
    chunked = build_members(params, CFG, x_cal, small, key=jax.random.key(0), member_chunk=1)
    for tree in (one, chunked):
        assert all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in jax.tree.leaves(tree))


# ----------------------------------------------------------------------------- protocol options

SPLIT = PnCConfig(n_members=4, rank=4, sigma=0.5, bootstrap_frac=0.3, ridge=1e-2, layers=(0, 2))


def _frobenius_norms(members, params, layers):
    """``||dW_l||_F`` per member and perturbed layer, ``[M, len(layers)]`` (float64)."""
    dw = [
        np.asarray(members[f"hidden_{i}"]["kernel"], np.float64)
        - np.asarray(params[f"hidden_{i}"]["kernel"], np.float64)
        for i in layers
    ]
    return np.stack([np.linalg.norm(d.reshape(d.shape[0], -1), axis=1) for d in dw], axis=1)


def test_sigma_zero_reproduces_the_base_model_with_every_option(net):
    params, x_cal = net
    config = dataclasses.replace(
        SPLIT, sigma=0.0, perturbation_norm="radius", ridge_center="zero", calibration_size=50
    )
    members = build_members(params, CFG, x_cal, config, key=jax.random.key(2))
    for a, b in zip(jax.tree.leaves(members), jax.tree.leaves(params), strict=True):
        np.testing.assert_array_equal(a, np.broadcast_to(b, a.shape))


@pytest.mark.parametrize("center", ["original", "zero"])
def test_layers_0_2_perturb_0_and_2_refit_1_and_3_and_leave_the_head(net, center):
    params, x_cal = net
    key = jax.random.key(6)
    members = build_members(
        params, CFG, x_cal, dataclasses.replace(SPLIT, ridge_center=center), key=key
    )
    bases = _bases(key, params, (0, 2), SPLIT.rank)
    for m in range(SPLIT.n_members):
        pm = _member(members, m)
        for i in (0, 2):  # perturbed: the kernel moves within span(U_l), the bias does not
            name = f"hidden_{i}"
            np.testing.assert_array_equal(pm[name]["bias"], params[name]["bias"])
            dw = (pm[name]["kernel"] - params[name]["kernel"]).reshape(-1)
            assert float(jnp.linalg.norm(dw)) > 1e-3
            np.testing.assert_allclose(bases[i] @ (bases[i].T @ dw), dw, atol=1e-5)
        for name in ("hidden_1", "hidden_3"):  # refit: kernel and bias both change
            assert not np.allclose(pm[name]["kernel"], params[name]["kernel"], atol=1e-4)
            assert not np.allclose(pm[name]["bias"], params[name]["bias"], atol=1e-4)
        for leaf in ("kernel", "bias"):
            np.testing.assert_array_equal(pm["head"][leaf], params["head"][leaf])


@pytest.mark.parametrize("correct", [True, False])
def test_radius_norm_gives_every_perturbation_frobenius_norm_sigma(net, correct):
    params, x_cal = net
    config = dataclasses.replace(SPLIT, ridge_center="zero", correct=correct)
    key = jax.random.key(7)
    radius = build_members(
        params, CFG, x_cal, dataclasses.replace(config, perturbation_norm="radius"), key=key
    )
    norms = _frobenius_norms(radius, params, (0, 2))
    # float32 rounding of U z / ||z|| and of (W + dW) - W: a few 1e-7 relative
    np.testing.assert_allclose(norms, config.sigma, rtol=1e-5)
    gaussian = build_members(params, CFG, x_cal, config, key=key)
    spread = _frobenius_norms(gaussian, params, (0, 2)) / config.sigma  # ||z||, z ~ N(0, I_4)
    assert np.max(np.abs(spread - 1.0)) > 0.1
    # the same coefficient draws: radius rescales each member's z to unit norm
    for col, i in enumerate((0, 2)):
        name = f"hidden_{i}"
        d_g = gaussian[name]["kernel"] - params[name]["kernel"]
        d_r = radius[name]["kernel"] - params[name]["kernel"]
        np.testing.assert_allclose(d_r * spread[:, col, None, None], d_g, atol=1e-5)


@pytest.mark.parametrize(
    "norm,calibration_size", [("gaussian", None), ("radius", None), ("radius", 120)]
)
def test_ablation_applies_the_same_perturbations(net, norm, calibration_size):
    params, x_cal = net
    config = dataclasses.replace(
        SPLIT, perturbation_norm=norm, calibration_size=calibration_size, ridge_center="zero"
    )
    key = jax.random.key(8)
    corrected = build_members(params, CFG, x_cal, config, key=key)
    ablation = build_members(
        params, CFG, x_cal, dataclasses.replace(config, correct=False), key=key
    )
    for i in (0, 2):
        np.testing.assert_array_equal(
            corrected[f"hidden_{i}"]["kernel"], ablation[f"hidden_{i}"]["kernel"]
        )
        assert not np.allclose(ablation[f"hidden_{i}"]["kernel"], params[f"hidden_{i}"]["kernel"])
    for name in ("hidden_1", "hidden_3", "head"):
        for leaf in ("kernel", "bias"):
            np.testing.assert_array_equal(
                ablation[name][leaf],
                np.broadcast_to(params[name][leaf], ablation[name][leaf].shape),
            )


@pytest.mark.parametrize("per_layer", [False, True])
def test_member_subsets_follow_the_documented_sizes_and_keys(net, per_layer):
    params, x_cal = net
    config = PnCConfig(
        n_members=3, rank=4, sigma=0.5, bootstrap_frac=0.05, min_subset=12, ridge=1e-2,
        layers=(0, 2), ridge_center="zero", calibration_size=150, subset_per_layer=per_layer,
    )  # fmt: skip
    n_sub = config.subset_size(150)
    assert n_sub == 12  # max(12, floor(0.05 * 150) = 7); 12 <= 16 + 1: hidden_1 uses the dual path
    key = jax.random.key(9)
    members = build_members(params, CFG, x_cal, config, key=key)
    x_c = x_cal[calibration_indices(key, x_cal.shape[0], config)]
    base_h = hidden_activations(params, x_c, CFG)
    member_keys = jax.random.split(jax.random.split(key)[1], config.n_members)
    subsets = member_subsets(key, 150, config)
    assert subsets.shape == (3, 12) and subsets.dtype == jnp.int32
    assert int(subsets.min()) >= 0 and int(subsets.max()) < 150
    assert member_subsets(key, 150, dataclasses.replace(config, bootstrap_frac=None)) is None
    close = functools.partial(np.testing.assert_allclose, rtol=1e-3, atol=1e-4)
    for m in range(config.n_members):
        pm = _member(members, m)
        k_sub = jax.random.split(member_keys[m])[0]
        idx = {
            i: jax.random.randint(
                jax.random.fold_in(k_sub, i) if per_layer else k_sub, (n_sub,), 0, 150
            )
            for i in (0, 2)
        }
        assert per_layer == (not np.array_equal(idx[0], idx[2]))
        # member_subsets names the rows of the first correction (after layer 0)
        np.testing.assert_array_equal(subsets[m], idx[0])
        for i in (0, 2):  # propagate the subset through the member up to layer i, refit i + 1
            h = x_c[idx[i]]
            for j in range(i + 1):
                h = jax.nn.relu(h @ pm[f"hidden_{j}"]["kernel"] + pm[f"hidden_{j}"]["bias"])
            nxt = f"hidden_{i + 1}"
            k_ref, b_ref = ridge_correction(
                base_h[i][idx[i]],
                h,
                params[nxt]["kernel"],
                params[nxt]["bias"],
                1e-2,
                center="zero",
            )
            close(pm[nxt]["kernel"], k_ref)
            close(pm[nxt]["bias"], b_ref)


@pytest.mark.parametrize("layers", [(1, 3), None])
def test_member_subsets_with_per_layer_draws_key_the_first_perturbed_layer(net, layers):
    """With ``subset_per_layer`` the first correction's rows come from ``fold_in(subset key, l_1)``,
    ``l_1`` the first perturbed layer (0 when every layer is perturbed), and they are the rows
    :func:`build_members` refits the layer after ``l_1`` on."""
    params, x_cal = net
    config = PnCConfig(
        n_members=2, rank=3, sigma=0.5, bootstrap_frac=0.1, min_subset=20, ridge=1e-2,
        layers=layers, subset_per_layer=True,
    )  # fmt: skip
    key = jax.random.key(13)
    subsets = member_subsets(key, 200, config)
    first = layers[0] if layers else 0
    member_keys = jax.random.split(jax.random.split(key)[1], 2)
    for m in range(2):
        k_sub = jax.random.fold_in(jax.random.split(member_keys[m])[0], first)
        np.testing.assert_array_equal(subsets[m], jax.random.randint(k_sub, (20,), 0, 200))
    if layers is None:
        return
    members = build_members(params, CFG, x_cal, config, key=key)
    base_h = hidden_activations(params, x_cal, CFG)
    for m in range(2):
        pm = _member(members, m)
        h = x_cal[subsets[m]]
        for j in range(first + 1):
            h = jax.nn.relu(h @ pm[f"hidden_{j}"]["kernel"] + pm[f"hidden_{j}"]["bias"])
        nxt = f"hidden_{first + 1}"
        k_ref, b_ref = ridge_correction(
            base_h[first][subsets[m]], h, params[nxt]["kernel"], params[nxt]["bias"], 1e-2,
            center=config.ridge_center,
        )  # fmt: skip
        np.testing.assert_allclose(pm[nxt]["kernel"], k_ref, rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(pm[nxt]["bias"], b_ref, rtol=1e-3, atol=1e-4)


def test_calibration_indices_are_distinct_in_range_and_shared_across_configs(net):
    params, x_cal = net
    key = jax.random.key(10)
    config = dataclasses.replace(SPLIT, calibration_size=64)
    rows = np.asarray(calibration_indices(key, 200, config))
    assert rows.shape == (64,) and len(np.unique(rows)) == 64
    assert rows.min() >= 0 and rows.max() < 200
    for other in (
        dataclasses.replace(config, sigma=8.0, ridge=1.0, bootstrap_frac=None),
        dataclasses.replace(config, n_members=7, perturbation_norm="radius", layers=(1,)),
        dataclasses.replace(config, correct=False, subset_per_layer=True, ridge_center="zero"),
    ):
        np.testing.assert_array_equal(calibration_indices(key, 200, other), rows)
    assert not np.array_equal(calibration_indices(jax.random.key(11), 200, config), rows)
    assert calibration_indices(key, 200, SPLIT) is None
    full = np.asarray(
        calibration_indices(key, 200, dataclasses.replace(config, calibration_size=200))
    )
    np.testing.assert_array_equal(np.sort(full), np.arange(200))
    with pytest.raises(ValueError, match="calibration_size=201 exceeds the 200 rows"):
        build_members(
            params, CFG, x_cal, dataclasses.replace(config, calibration_size=201), key=key
        )
    # build_members corrects on exactly these rows
    drawn = build_members(params, CFG, x_cal, config, key=key)
    given = build_members(params, CFG, x_cal[rows], SPLIT, key=key)
    for a, b in zip(jax.tree.leaves(drawn), jax.tree.leaves(given), strict=True):
        np.testing.assert_array_equal(a, b)
    whole = build_members(params, CFG, x_cal, SPLIT, key=key)
    assert not np.allclose(whole["hidden_1"]["kernel"], drawn["hidden_1"]["kernel"])


RIDGES = (1e-4, 1e-2, 1.0)


@pytest.mark.parametrize(
    "changes",
    [
        {"subset_per_layer": True, "ridge_center": "zero"},
        {
            "perturbation_norm": "radius",
            "calibration_size": 120,
            "layers": (0, 1, 3),
            "member_chunk": 3,
        },
        {"correct": False},
    ],
)
def test_ridge_path_equals_separate_builds(net, changes):
    params, x_cal = net
    changes = dict(changes)
    chunk = changes.pop("member_chunk", None)
    config = dataclasses.replace(SPLIT, **changes)
    key = jax.random.key(12)
    path = build_members_ridge_path(params, CFG, x_cal, config, RIDGES, key=key, member_chunk=chunk)
    for r, ridge in enumerate(RIDGES):
        single = build_members(
            params,
            CFG,
            x_cal,
            dataclasses.replace(config, ridge=ridge),
            key=key,
            member_chunk=chunk,
        )
        for a, b in zip(jax.tree.leaves(path), jax.tree.leaves(single), strict=True):
            assert a.shape == (len(RIDGES),) + b.shape
            # The per-ridge work runs the same compiled computation as a single build (in practice
            # bit-identical); allow float32 reassociation, 1e-5 of the leaf's scale.
            scale = max(float(np.max(np.abs(b))), 1e-6)
            np.testing.assert_allclose(a[r], b, rtol=1e-5, atol=1e-5 * scale)
    last = config.perturbed_layers(CFG.n_hidden)[-1] + 1
    refit = path[CFG.layer_names()[last]]["kernel"]
    assert config.correct == (not np.allclose(refit[0], refit[-1], atol=1e-4))


def test_ridge_path_rejects_bad_ridges(net):
    params, x_cal = net
    for bad in ((), (0.1, -1.0), (float("nan"),), ((0.1, 0.2),)):
        with pytest.raises(ValueError, match="ridges"):
            build_members_ridge_path(params, CFG, x_cal, SPLIT, bad, key=jax.random.key(0))


def test_ridge_values_share_one_compilation(net):
    params, x_cal = net
    config = PnCConfig(n_members=2, rank=3, sigma=0.5, bootstrap_frac=0.4, layers=(1, 2))
    before = _build._cache_size()
    build_members(params, CFG, x_cal, config, key=jax.random.key(0))
    compiled = _build._cache_size()
    assert compiled == before + 1  # a configuration no other test builds
    for ridge in (0.0, 3e-3, 10.0):
        build_members(
            params, CFG, x_cal, dataclasses.replace(config, ridge=ridge), key=jax.random.key(1)
        )
    assert _build._cache_size() == compiled
    for ridges in ((1e-4, 1e-2), (0.5, 2.0)):  # one more for the path of two ridge values
        build_members_ridge_path(params, CFG, x_cal, config, ridges, key=jax.random.key(2))
    assert _build._cache_size() == compiled + 1


def test_sigma_values_share_one_compilation_and_give_the_static_products(net):
    """Sigma is traced: every sigma of a grid runs one compiled build (zero, which perturbs
    nothing, its own), and each member's perturbation is ``sigma * (U z)`` of its own sigma (the
    study's results are the same bytes as with sigma compiled in: docs/performance.md)."""
    params, x_cal = net
    config = PnCConfig(
        n_members=3, rank=2, sigma=8.0, bootstrap_frac=0.35, layers=(0,), correct=False
    )
    key = jax.random.key(4)
    before = _build._cache_size()
    built = {}
    for sigma in (8.0, 0.3, 32.0):
        built[sigma] = build_members(
            params, CFG, x_cal, dataclasses.replace(config, sigma=sigma), key=key
        )
    assert _build._cache_size() == before + 1  # a configuration no other test builds
    build_members(params, CFG, x_cal, dataclasses.replace(config, sigma=0.0), key=key)
    assert _build._cache_size() == before + 2
    k_basis, member_keys = PC.ensemble_keys(key, config.n_members)
    shape = params["hidden_0"]["kernel"].shape
    basis = PC.layer_bases(k_basis, {0: shape}, config.rank)[0]
    for sigma, members in built.items():
        static = dataclasses.replace(config, sigma=sigma)
        for m in range(config.n_members):
            dw = PC.perturbation(PC.member_streams(member_keys[m])[1], 0, basis, static, shape)
            got = members["hidden_0"]["kernel"][m] - params["hidden_0"]["kernel"]
            np.testing.assert_allclose(np.asarray(got), np.asarray(dw), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- 1-D toy regression

TOY = PnCConfig(n_members=20, rank=8, sigma=2.0, bootstrap_frac=0.5, ridge=1e-3)


@pytest.fixture(scope="module")
def toy():
    rng = np.random.default_rng(0)
    x = rng.uniform(-2.0, 2.0, size=(400, 1)).astype(np.float32)
    y = (np.sin(2.0 * x) + 0.05 * rng.normal(size=x.shape)).astype(np.float32)
    model, _ = pnc.train(
        x,
        y,
        key=jax.random.key(0),
        model_config=MLPConfig(out_dim=1, hidden=(32, 32)),
        train_config=TrainConfig(steps=1000, batch_size=64, learning_rate=3e-3),
    )
    x_cal = model.x_norm.transform(jnp.asarray(x))
    members = {
        correct: build_members(
            model.params,
            model.config,
            x_cal,
            dataclasses.replace(TOY, correct=correct),
            key=jax.random.key(1),
        )
        for correct in (True, False)
    }
    return model, x_cal, model.y_norm.transform(jnp.asarray(y)), members


def test_toy_members_agree_near_data_and_disagree_far_away(toy):
    model, _, _, members = toy
    grids = {
        "near": np.linspace(-1.8, 1.8, 50),
        "far": np.concatenate([np.linspace(-8, -5, 25), np.linspace(5, 8, 25)]),
    }
    spread = {}
    for name, g in grids.items():
        x = model.x_norm.transform(jnp.asarray(g, jnp.float32)[:, None])
        spread[name] = float(
            jnp.mean(pnc.epistemic_variance(predict_members(members[True], x, model.config)))
        )
    assert spread["far"] > 20.0 * spread["near"], spread


def test_toy_correction_lowers_in_distribution_error(toy):
    model, x_cal, y_std, members = toy
    rmse = lambda mean: float(jnp.sqrt(jnp.mean(jnp.square(mean - y_std))))
    errs = {
        c: rmse(pnc.mixture(predict_members(m, x_cal, model.config))[0]) for c, m in members.items()
    }
    base = rmse(forward(model.params, x_cal, model.config)[0])
    assert errs[True] < 0.5 * errs[False], errs
    assert errs[True] < 2.0 * base + 0.05, (errs, base)


@pytest.mark.parametrize("n", [1, 7, 16, 17, 40, 65, 130])
def test_blocked_cholesky_and_inverse_match_numpy(n):
    from pnc.core._linalg import cholesky_and_inverse

    a = np.random.default_rng(n).normal(size=(n, n))
    spd = a @ a.T + n * np.eye(n)
    chol, inv = jax.jit(cholesky_and_inverse)(jnp.asarray(spd, jnp.float32))
    chol, inv = np.asarray(chol), np.asarray(inv)
    assert np.array_equal(chol, np.tril(chol)) and np.array_equal(inv, np.tril(inv))
    ref = np.linalg.cholesky(spd)
    np.testing.assert_allclose(chol, ref, atol=1e-4 * np.abs(ref).max(), rtol=1e-4)
    np.testing.assert_allclose(inv, np.linalg.inv(ref), atol=1e-5, rtol=1e-4)


def test_blocked_cholesky_flags_an_indefinite_matrix():
    from pnc.core._linalg import cholesky_and_inverse

    m = np.eye(20, dtype=np.float32)
    m[17, 17] = -1.0
    chol, inv = cholesky_and_inverse(jnp.asarray(m))
    assert not np.all(np.isfinite(np.asarray(chol))) and not np.all(np.isfinite(np.asarray(inv)))


def test_spd_solve_refinement_step_reduces_the_residual_of_an_ill_conditioned_solve():
    """float32, condition number 1e6: one refinement step against the unscaled system leaves a
    smaller residual ``||rhs - G x|| / ||rhs||`` (in float64) than the factors' solution alone."""
    from pnc.core._linalg import _factor, spd_solve

    rng = np.random.default_rng(11)
    q, _ = np.linalg.qr(rng.normal(size=(30, 30)))
    gram = ((q * np.logspace(0, -6, 30)) @ q.T).astype(np.float32)
    rhs = rng.normal(size=(30, 2)).astype(np.float32)
    scale, inv_chol = _factor(jnp.asarray(gram))
    alone = scale[:, None] * (inv_chol.T @ (inv_chol @ (scale[:, None] * jnp.asarray(rhs))))
    refined = spd_solve(jnp.asarray(gram), jnp.asarray(rhs))

    def residual(x):
        r = rhs.astype(np.float64) - gram.astype(np.float64) @ np.asarray(x, np.float64)
        return np.linalg.norm(r) / np.linalg.norm(rhs)

    assert residual(alone) > 1e-3  # the factors alone leave a residual at this condition number
    assert residual(refined) < 0.75 * residual(alone)


def test_spd_solve_retries_a_gram_indefinite_at_rounding_level_with_a_jitter():
    """A diagonal entry slightly below zero (as a float32 Gram can come out) fails the first
    factorisation; the jittered retry gives finite values and the other components exactly."""
    from pnc.core._linalg import spd_solve

    diag = np.arange(1.0, 21.0, dtype=np.float32)
    diag[-1] = -1e-7
    rhs = np.ones((20, 1), np.float32)
    out = np.asarray(spd_solve(jnp.asarray(np.diag(diag)), jnp.asarray(rhs)))
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out[:-1, 0], 1.0 / diag[:-1], rtol=1e-6)


def _spd_system(n: int, q: int, seed: int):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n + 5, n))
    return a.T @ a + 0.5 * np.eye(n), rng.normal(size=(n, q))


def _products(jaxpr) -> int:
    """The matrix products (``dot_general``) of a closed jaxpr, those of its sub-jaxprs (loop
    bodies) included."""
    return str(jaxpr).count("dot_general[")


@pytest.mark.parametrize("n", [5, 40])
def test_spd_solve_derivatives_are_those_of_the_exact_solve(n):
    """Forward and reverse mode through spd_solve agree with the derivative of the exact solve
    (float64 under x64): d out = G^{-1} (d rhs - dG out), the factorisation not differentiated."""
    from pnc.core._linalg import spd_solve

    gram, rhs = _spd_system(n, 3, n)
    rng = np.random.default_rng(n + 1)
    d_gram = rng.normal(size=(n, n))
    d_gram = d_gram + d_gram.T
    d_rhs = rng.normal(size=rhs.shape)
    with jax.enable_x64(True):
        args = (jnp.asarray(gram), jnp.asarray(rhs))
        tangents = (jnp.asarray(d_gram), jnp.asarray(d_rhs))
        out, d_out = jax.jvp(spd_solve, args, tangents)
        ref, d_ref = jax.jvp(jnp.linalg.solve, args, tangents)
        np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(d_out, d_ref, rtol=1e-9, atol=1e-11)
        weights = jnp.asarray(rng.normal(size=rhs.shape))
        grads = jax.grad(lambda g, r: jnp.sum(weights * spd_solve(g, r)), argnums=(0, 1))(*args)
        refs = jax.grad(lambda g, r: jnp.sum(weights * jnp.linalg.solve(g, r)), argnums=(0, 1))(
            *args
        )
        for got, want in zip(grads, refs, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("center", ["original", "zero"])
def test_ridge_correction_has_a_reverse_mode_derivative(center):
    """jax.grad through a correction (the solve's implicit derivative) matches central differences
    in float64, for both centres."""
    rng = np.random.default_rng(7)
    h = np.maximum(rng.normal(size=(30, 6)), 0.0)
    dh = rng.normal(size=h.shape)
    kernel, bias = rng.normal(size=(6, 3)), rng.normal(size=3)
    weights = rng.normal(size=(6, 3))
    with jax.enable_x64(True):

        def loss(t):
            k, b = ridge_correction(jnp.asarray(h), jnp.asarray(h + t * dh), jnp.asarray(kernel),
                                    jnp.asarray(bias), 0.05, center=center)  # fmt: skip
            return jnp.sum(weights * k) + jnp.sum(b)

        grad = float(jax.grad(loss)(0.3))
        step = 1e-5
        central = (float(loss(0.3 + step)) - float(loss(0.3 - step))) / (2 * step)
    assert abs(grad) > 1e-3
    np.testing.assert_allclose(grad, central, rtol=1e-6)


def test_spd_solve_derivative_keeps_the_primal_and_one_factorisation():
    """The primal of a differentiated solve is the plain solve bit for bit (float32), and the
    derivative's program factorises once: its products are the plain solve's and the tangent's
    six (``dG out``, the refined solve's four and its residual's), none inside the factorisation's
    loops (differentiating those tripled the products)."""
    from pnc.core._linalg import spd_solve

    gram, rhs = (jnp.asarray(a, jnp.float32) for a in _spd_system(40, 3, 0))
    plain = spd_solve(gram, rhs)
    out, _ = jax.jvp(spd_solve, (gram, rhs), (jnp.ones_like(gram), jnp.ones_like(rhs)))
    np.testing.assert_array_equal(np.asarray(out), np.asarray(plain))
    products = _products(jax.make_jaxpr(spd_solve)(gram, rhs))
    assert products > 6
    scale = lambda t: spd_solve(gram * (1.0 + t), rhs * t)
    assert _products(jax.make_jaxpr(jax.jacfwd(scale))(jnp.float32(0.5))) == products + 6


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("n_members", 0),
        ("rank", 0),
        ("min_subset", 0),
        ("sigma", -1.0),
        ("sigma", float("nan")),
        ("bootstrap_frac", 0.0),
        ("bootstrap_frac", 1.5),
        ("ridge", -1e-3),
        ("perturbation_norm", "uniform"),
    ],
)
def test_mlp_and_conv_configs_reject_the_same_shared_fields(field, value):
    for config_type in (PnCConfig, ConvPnCConfig):
        with pytest.raises(ValueError, match=field):
            config_type(**{field: value})


def test_config_messages_boundaries_and_integer_fields():
    with pytest.raises(
        ValueError, match="^layers must be None or a non-empty tuple of hidden-layer indices$"
    ):
        PnCConfig(layers=())
    for layers in ((1, 1), (0, -1)):
        with pytest.raises(
            ValueError,
            match=f"^{re.escape(f'layers must be distinct non-negative indices, got {layers}')}$",
        ):
            PnCConfig(layers=layers)
    with pytest.raises(
        ValueError, match=r"^layers \(0, 3\) out of range for a network with 3 hidden layers$"
    ):
        PnCConfig(layers=(0, 3)).perturbed_layers(3)
    assert PnCConfig(layers=(0, 2)).perturbed_layers(3) == (0, 2)
    assert PnCConfig().perturbed_layers(3) == (0, 1, 2)
    assert PnCConfig(calibration_size=1).calibration_size == 1  # the smallest allowed
    assert PnCConfig(bootstrap_frac=1.0).bootstrap_frac == 1.0  # the interval is (0, 1]
    config = PnCConfig(
        n_members=np.int64(3), rank=np.int32(2), min_subset=np.int64(4), calibration_size=5.0
    )
    for name, value in (("n_members", 3), ("rank", 2), ("min_subset", 4), ("calibration_size", 5)):
        assert type(getattr(config, name)) is int and getattr(config, name) == value


def test_perturbation_basis_rank_bounds_and_sign_convention():
    shape = (2, 3)  # 6 flat entries
    assert perturbation_basis(jax.random.key(0), shape, 1).shape == (6, 1)
    assert perturbation_basis(jax.random.key(0), shape, 6).shape == (6, 6)
    for rank in (0, 7):
        with pytest.raises(
            ValueError,
            match=rf"^rank must be in \[1, 6\] for a kernel of shape \(2, 3\), got {rank}$",
        ):
            perturbation_basis(jax.random.key(0), shape, rank)
    # U = Q diag(sign(diag R)): U^T G is upper triangular with a positive diagonal, for the same
    # Gaussian G; small diagonal entries (below 1) occur among these keys and must stay positive
    smallest = np.inf
    for seed in range(20):
        key = jax.random.key(seed)
        basis = np.asarray(perturbation_basis(key, shape, 4), np.float64)
        g = np.asarray(jax.random.normal(key, (6, 4), jnp.float32), np.float64)
        r = basis.T @ g
        np.testing.assert_allclose(np.tril(r, -1), 0.0, atol=1e-5)
        assert np.all(np.diag(r) > 0)
        smallest = min(smallest, float(np.min(np.diag(r))))
    assert smallest < 1.0


def test_bases_and_predictions_stay_float32_under_x64(net):
    params, x_cal = net
    config = PnCConfig(n_members=2, rank=3, sigma=0.5, bootstrap_frac=0.4, layers=(1,))
    members = build_members(params, CFG, x_cal, config, key=jax.random.key(0))
    reference = predict_members(members, x_cal[:5], CFG)
    with jax.enable_x64(True):
        assert perturbation_basis(jax.random.key(0), (4, 3), 2).dtype == jnp.float32
        pred = predict_members(members, np.asarray(x_cal[:5], np.float64), CFG)
        assert pred.means.dtype == pred.variances.dtype == jnp.float32
    np.testing.assert_array_equal(pred.means, reference.means)


def test_ridge_path_accepts_one_ridge_and_ridge_zero(net):
    params, x_cal = net
    config = PnCConfig(n_members=2, rank=3, sigma=0.5, bootstrap_frac=0.4, layers=(1,))
    for ridges in ((0.0,), (0.0, 1e-2)):
        path = build_members_ridge_path(params, CFG, x_cal, config, ridges, key=jax.random.key(0))
        assert {leaf.shape[0] for leaf in jax.tree.leaves(path)} == {len(ridges)}


@pytest.mark.parametrize("center", ["original", "zero"])
@pytest.mark.parametrize("b,d,q", [(60, 4, 6), (60, 6, 6), (60, 6, 4), (5, 6, 4), (7, 6, 6)])
def test_ridge_correction_in_float64_matches_the_normal_equations_on_every_path(b, d, q, center):
    """Wide (q >= d) and narrow (q < d) primal layers and the dual, in float64 under x64: the
    solution equals the float64 normal equations to rounding and keeps its inputs' dtype;
    float32 inputs under x64 stay float32."""
    h, hv, kernel, bias = _problem(b=b, d=d, q=q, seed=3)
    k_ref, b_ref = _normal_equations(h, hv, kernel, bias, 0.3, center)
    with jax.enable_x64(True):
        wide = [np.asarray(a, np.float64) for a in (h, hv, kernel, bias)]
        k_new, b_new = _ridge_correction(*wide, 0.3, center=center)
        assert k_new.dtype == b_new.dtype == jnp.float64
        np.testing.assert_allclose(k_new, k_ref, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(b_new, b_ref, rtol=1e-9, atol=1e-10)
        k32, b32 = _ridge_correction(h, hv, kernel, bias, 0.3, center=center)
        assert k32.dtype == b32.dtype == jnp.float32
        np.testing.assert_allclose(k32, k_ref, rtol=1e-4, atol=1e-4)


def test_ridge_correction_messages():
    h, hv, kernel, bias = _problem()
    with pytest.raises(
        ValueError,
        match=re.escape("h_cal and h_cal_perturbed must both be [B, d], got (60, 6) and (59, 6)"),
    ):
        _ridge_correction(h, hv[:59], kernel, bias, 0.1)
    with pytest.raises(
        ValueError, match=re.escape("kernel [d, q] / bias [q] do not match d=6: (6, 4), (3,)")
    ):
        _ridge_correction(h, hv, kernel, bias[:3], 0.1)
    with pytest.raises(ValueError, match="^center must be one of 'original', 'zero', got 'Zero'$"):
        _ridge_correction(h, hv, kernel, bias, 0.1, center="Zero")
    # the default centre is the original layer: a large ridge returns it
    k_new, b_new = _ridge_correction(h, hv, kernel, bias, 1e9)
    np.testing.assert_allclose(k_new, kernel, atol=1e-4)
    np.testing.assert_allclose(b_new, bias, atol=1e-4)


def _system_reference(h, hv, kernel, bias, center):
    """The documented ``(X_v, Gram, right-hand side)`` in float64: ``X_v^T X_v`` and ``X_v^T E``
    for ``B > d + 1`` rows, else ``X_v X_v^T`` and ``E`` (original centre) or ``X Theta`` (zero)."""
    h, hv, kernel, bias = (np.asarray(a, np.float64) for a in (h, hv, kernel, bias))
    xv = np.hstack([np.ones((len(hv), 1)), hv])
    gap = (h - hv) @ kernel  # E = X Theta - X_v Theta
    if len(hv) > hv.shape[1] + 1:
        return xv, xv.T @ xv, xv.T @ gap
    return xv, xv @ xv.T, gap if center == "original" else h @ kernel + bias


def _assert_system(system, reference, dtype, rtol):
    for got, ref in zip(system, reference, strict=True):
        assert got.dtype == dtype and got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol * np.abs(ref).max())


@pytest.mark.parametrize("center", ["original", "zero"])
@pytest.mark.parametrize(
    "b,d,q", [(60, 6, 4), (60, 6, 6), (60, 4, 6), (8, 6, 4), (7, 6, 4), (6, 6, 4), (5, 6, 4)]
)
def test_correction_system_is_the_documented_system_in_the_input_precision(b, d, q, center):
    """Primal for B > d + 1 rows (B = d + 2 included), dual for B <= d + 1 (B = d + 1 and B = d
    included); under x64 float32 inputs give a float32 system and float64 inputs a float64 one."""
    h, hv, kernel, bias = _problem(b=b, d=d, q=q, seed=5)
    reference = _system_reference(h, hv, kernel, bias, center)
    with jax.enable_x64(True):
        system = correction_system(h, hv, kernel, bias, center=center)
        _assert_system(system, reference, jnp.float32, 1e-5)
        wide = [np.asarray(a, np.float64) for a in (h, hv, kernel, bias)]
        system = correction_system(*wide, center=center)
        _assert_system(system, reference, jnp.float64, 1e-12)


def test_correction_system_precision_is_the_widest_of_activations_and_kernel():
    """The system is formed in the wider of ``h_cal_perturbed``'s and the kernel's precision, and
    in at least float32 (float16 inputs give a float32 system)."""
    h, hv, kernel, bias = _problem(b=60, d=6, q=4, seed=6)
    reference = _system_reference(h, hv, kernel, bias, "original")
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    with jax.enable_x64(True):
        # float32 values are exact in float64: a float64 system matches to float64 rounding
        for hv_, kernel_ in ((hv, f64(kernel)), (f64(hv), kernel)):
            _assert_system(correction_system(h, hv_, kernel_, bias), reference, jnp.float64, 1e-12)
        half = [np.asarray(a, np.float16) for a in (h, hv, kernel, bias)]
        reference = _system_reference(*half, "original")
        _assert_system(correction_system(*half), reference, jnp.float32, 1e-5)


def test_correction_pieces_default_to_the_original_centre_and_check_it():
    for b in (60, 5):  # primal and dual
        h, hv, kernel, bias = _problem(b=b)
        k_new, b_new = solve_correction(correction_system(h, hv, kernel, bias), kernel, bias, 0.3)
        k_ref, b_ref = _normal_equations(h, hv, kernel, bias, 0.3, "original")
        np.testing.assert_allclose(k_new, k_ref, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(b_new, b_ref, rtol=1e-4, atol=1e-4)
        system = correction_system(h, hv, kernel, bias, center="zero")
        with pytest.raises(
            ValueError, match="^center must be one of 'original', 'zero', got 'Zero'$"
        ):
            solve_correction(system, kernel, bias, 0.3, center="Zero")


def _trace_dtypes(jaxpr) -> set:
    """Dtypes of every value computed in ``jaxpr`` and in the jaxprs nested in its equations."""
    found = set()
    for eqn in jaxpr.eqns:
        found.update(np.dtype(v.aval.dtype) for v in eqn.outvars if hasattr(v.aval, "dtype"))
        stack = list(eqn.params.values())
        while stack:
            item = stack.pop()
            if isinstance(item, (tuple, list)):
                stack.extend(item)
            elif hasattr(item, "eqns"):
                found |= _trace_dtypes(item)
            elif hasattr(item, "jaxpr") and hasattr(item.jaxpr, "eqns"):
                found |= _trace_dtypes(item.jaxpr)
    return found


@pytest.mark.parametrize("center", ["original", "zero"])
@pytest.mark.parametrize("b,ridge", [(60, 0.3), (60, 0.0), (5, 0.3)])
def test_float32_correction_runs_in_float32_under_x64(b, ridge, center):
    """Under x64 a float32 problem is formed, factorised and solved in float32 (no float64 value
    anywhere in its trace, a float64 ridge included), and still solves the float64 normal
    equations."""
    h, hv, kernel, bias = _problem(b=b)
    ridge = np.float64(ridge)  # not weakly typed: it would widen a product it enters
    with jax.enable_x64(True):
        jaxpr = jax.make_jaxpr(functools.partial(_ridge_correction, center=center))(
            h, hv, kernel, bias, ridge
        )
        k_new, b_new = _ridge_correction(h, hv, kernel, bias, ridge, center=center)
    floats = {t for t in _trace_dtypes(jaxpr.jaxpr) if np.issubdtype(t, np.floating)}
    assert floats == {np.dtype(np.float32)}
    k_ref, b_ref = _normal_equations(h, hv, kernel, bias, ridge, center)
    np.testing.assert_allclose(k_new, k_ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(b_new, b_ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("center", ["original", "zero"])
@pytest.mark.parametrize("b", [6, 7, 8])
def test_ridge0_correction_at_the_primal_dual_boundary(b, center):
    """``B = d, d + 1, d + 2`` rows with ``d = 6``: the interpolating solution closest to the
    centre (``B <= d + 1``) or the least-squares fit (``B = d + 2``), float64 under x64."""
    h, hv, kernel, bias = _problem(b=b, d=6, q=4, seed=7)
    k_ref, b_ref = _normal_equations(h, hv, kernel, bias, 0.0, center)
    with jax.enable_x64(True):
        wide = [np.asarray(a, np.float64) for a in (h, hv, kernel, bias)]
        k_new, b_new = _ridge_correction(*wide, 0.0, center=center)
    np.testing.assert_allclose(k_new, k_ref, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(b_new, b_ref, rtol=1e-8, atol=1e-8)


def test_build_members_under_x64_casts_x_cal_to_float32(net):
    """Under x64 a float64 ``x_cal`` gives the float32 members of its float32 copy, bit for bit."""
    params, x_cal = net
    config = PnCConfig(n_members=2, rank=3, sigma=0.5, bootstrap_frac=0.4, layers=(1,))
    with jax.enable_x64(True):
        given = build_members(params, CFG, x_cal, config, key=jax.random.key(0))
        wide = build_members(
            params, CFG, np.asarray(x_cal, np.float64), config, key=jax.random.key(0)
        )
    for a, b in zip(jax.tree.leaves(wide), jax.tree.leaves(given), strict=True):
        assert a.dtype == b.dtype == jnp.float32
        np.testing.assert_array_equal(a, b)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_ridge_path_rejects_a_ridge_that_overflows_float32(net):
    """The members are computed in float32: a ridge that rounds to inf there is refused."""
    params, x_cal = net
    with pytest.raises(
        ValueError, match=re.escape("ridges must be finite and >= 0, got [0.5, inf]")
    ):
        build_members_ridge_path(params, CFG, x_cal, SPLIT, (0.5, 1e39), key=jax.random.key(0))


def test_predict_members_message(chain):
    _, members, _ = chain
    x = jnp.zeros((4, 3))
    with pytest.raises(ValueError, match=re.escape("x must be [N, in_dim], got shape (3,)")):
        predict_members(members, x[0], CFG)


def test_calibration_sizes_with_the_same_rows_share_one_compilation(net):
    """Only the size of ``D_cal`` enters the compiled build: ``calibration_size=90`` on 200 rows
    and no reduction on 90 rows run the same compilation."""
    params, x_cal = net
    config = PnCConfig(
        n_members=2, rank=2, sigma=0.5, bootstrap_frac=0.5, layers=(2,), calibration_size=90
    )
    before = _build._cache_size()
    build_members(params, CFG, x_cal, config, key=jax.random.key(0))
    compiled = _build._cache_size()
    assert compiled == before + 1  # a configuration no other test builds
    unreduced = dataclasses.replace(config, calibration_size=None)
    build_members(params, CFG, x_cal[:90], unreduced, key=jax.random.key(1))
    assert _build._cache_size() == compiled


# ----------------------------------------------------------------------------- one engine


def test_the_builders_draw_no_randomness_of_their_own():
    """The conv-block and any-model builders take every key split, basis, coefficient and
    bootstrap draw from the engine in :mod:`pnc.core.perturb_correct` (no ``jax.random`` of theirs)."""
    root = Path(pnc.__file__).parent / "core"
    for path in [root / "any_model.py", *sorted((root / "conv").glob("*.py"))]:
        tree = ast.parse(path.read_text())
        uses = [
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and node.attr == "random"
            and isinstance(node.value, ast.Name)
            and node.value.id == "jax"
        ]
        assert not uses, f"{path.name} draws random numbers itself (lines {uses})"
        engine = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "pnc.core.perturb_correct"
            for alias in node.names
        }
        if path.name in ("any_model.py", "block_pnc.py"):
            assert {"ensemble_keys", "layer_bases", "perturb_and_correct", "map_members"} <= engine


def test_the_three_builders_perturb_alike_from_one_key():
    """For one key, the MLP, any-model and conv-block builders draw the same ``dW`` for a layer
    with the same stream id (bit for bit), and the engine's functions reproduce it."""
    from pnc.core import conv as C

    key = jax.random.key(11)
    mlp_cfg = MLPConfig(hidden=(8, 8), out_dim=1)
    params = init_params(mlp_cfg, 3, jax.random.key(0))
    x = jax.random.normal(jax.random.key(1), (20, 3))
    cfg = PnCConfig(n_members=4, rank=3, sigma=0.7, bootstrap_frac=0.5, layers=(1,), correct=False)
    mlp = build_members(params, mlp_cfg, x, cfg, key=key)
    ens = pnc.ensemble(
        pnc.GaussianMLP(mlp_cfg), x, variables={"params": params}, perturb=["hidden_1"],
        correct=None, config=dataclasses.replace(cfg, layers=None), key=key, stream_ids=[1],
    )  # fmt: skip
    np.testing.assert_array_equal(ens.members["hidden_1"]["kernel"], mlp["hidden_1"]["kernel"])

    rcfg = C.ResNetConfig(num_classes=2, widths=(4,), blocks_per_stage=(2,))
    variables = C.init_variables(rcfg, jax.random.key(2), (6, 6, 2))
    images = jax.random.normal(jax.random.key(3), (5, 6, 6, 2))
    ccfg = C.ConvPnCConfig(n_members=4, rank=3, sigma=0.7, blocks=((0, 1),), correct=False)
    block = rcfg.block_specs()[rcfg.block_index(0, 1)].name
    conv = C.build_members(variables, rcfg, images, ccfg, key=key)
    ens = pnc.ensemble(
        C.PreActResNet(rcfg), images, variables=variables, perturb=[f"{block}/conv1"],
        correct=None, config=PnCConfig(n_members=4, rank=3, sigma=0.7,
                                       perturbation_norm="radius"),
        key=key, stream_ids=[rcfg.block_index(0, 1)],
    )  # fmt: skip
    np.testing.assert_array_equal(
        ens.members[f"{block}/conv1"]["kernel"], conv[block]["conv1"]["kernel"]
    )

    # the engine's own draws, one member at a time (unbatched): W + sigma U z in float32 differs
    # from the build's (batched) result by at most the rounding of the K-term sums U z, twice,
    # and of the final addition: 2 K eps sigma |U| |z| + eps |W + dW|, elementwise
    eps = np.finfo(np.float32).eps
    k_basis, member_keys = PC.ensemble_keys(key, cfg.n_members)
    shape = params["hidden_1"]["kernel"].shape
    basis = PC.layer_bases(k_basis, {1: shape}, cfg.rank)[1]
    for m in range(cfg.n_members):
        k_z = PC.member_streams(member_keys[m])[1]
        expected = params["hidden_1"]["kernel"] + PC.perturbation(k_z, 1, basis, cfg, shape)
        z = jax.random.normal(jax.random.fold_in(k_z, 1), (cfg.rank,), jnp.float32)
        sums = (cfg.sigma * (jnp.abs(basis) @ jnp.abs(z))).reshape(shape)
        bound = 2 * cfg.rank * eps * sums + eps * jnp.abs(expected)
        assert bool(jnp.all(jnp.abs(mlp["hidden_1"]["kernel"][m] - expected) <= bound))
