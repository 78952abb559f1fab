import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pnc
from pnc import MLPConfig, TrainConfig, forward, hidden_activations, init_params
from pnc.perturb_correct import (
    PnCConfig,
    build_members,
    perturbation_basis,
    predict_members,
)
from pnc.perturb_correct import ridge_correction as _ridge_correction

ridge_correction = jax.jit(_ridge_correction)


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
    assert PnCConfig(layers=(2, 0)).layers == (0, 2)
    assert PnCConfig(bootstrap_frac=0.1).subset_size(1234) == 123
    assert PnCConfig(bootstrap_frac=0.1).subset_size(3) == 1
    assert PnCConfig(bootstrap_frac=None).subset_size(77) == 77
    with pytest.raises(ValueError):
        PnCConfig(layers=(3,)).perturbed_layers(3)


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
    from pnc._linalg import cholesky_and_inverse

    a = np.random.default_rng(n).normal(size=(n, n))
    spd = a @ a.T + n * np.eye(n)
    chol, inv = jax.jit(cholesky_and_inverse)(jnp.asarray(spd, jnp.float32))
    chol, inv = np.asarray(chol), np.asarray(inv)
    assert np.array_equal(chol, np.tril(chol)) and np.array_equal(inv, np.tril(inv))
    ref = np.linalg.cholesky(spd)
    np.testing.assert_allclose(chol, ref, atol=1e-4 * np.abs(ref).max(), rtol=1e-4)
    np.testing.assert_allclose(inv, np.linalg.inv(ref), atol=1e-5, rtol=1e-4)


def test_blocked_cholesky_flags_an_indefinite_matrix():
    from pnc._linalg import cholesky_and_inverse

    m = np.eye(20, dtype=np.float32)
    m[17, 17] = -1.0
    chol, inv = cholesky_and_inverse(jnp.asarray(m))
    assert not np.all(np.isfinite(np.asarray(chol))) and not np.all(np.isfinite(np.asarray(inv)))
