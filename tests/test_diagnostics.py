import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pnc import MLPConfig, init_params
from pnc.core import diagnostics as dg
from pnc.core.perturb_correct import perturbation_basis

CFG = MLPConfig(out_dim=2, hidden=(8, 6))


@pytest.fixture(scope="module")
def net64():
    """A small random network in float64 (Proposition 1 is an identity; check it tightly)."""
    with jax.enable_x64(True):
        params = jax.tree.map(
            lambda a: jnp.asarray(a, jnp.float64), init_params(CFG, 3, jax.random.key(0))
        )
        x_cal = jax.random.normal(jax.random.key(1), (40, 3), jnp.float64)
        x = jnp.concatenate(
            [x_cal[:3], 4.0 * jax.random.normal(jax.random.key(2), (3, 3), jnp.float64)]
        )
        yield params, x_cal, x


@pytest.mark.parametrize("layer,ridge", [(0, 0.0), (1, 0.3)])
def test_proposition1_autodiff_sensitivity_equals_decomposition(net64, layer, ridge):
    params, x_cal, x = net64
    with jax.enable_x64(True):
        shape = params[f"hidden_{layer}"]["kernel"].shape
        basis = perturbation_basis(jax.random.key(3), shape, 5).astype(jnp.float64)
        a = dg.corrected_sensitivity(params, CFG, layer, basis, x_cal, x, ridge)
        b = dg.sensitivity_decomposition(params, CFG, layer, basis, x_cal, x, ridge)
        q = 6 if layer == 0 else 2 * CFG.out_dim
        assert a.shape == (6, q, 5) and a.dtype == jnp.float64
        assert float(jnp.max(jnp.abs(a))) > 1e-3  # not trivially zero
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9 * float(jnp.max(jnp.abs(a))))
        # the Jacobian alone (no correction) is a different operator
        j = dg.representation_jacobian(params, CFG, layer, basis, x)
        assert np.all(j[:, 0, :] == 0.0)  # bias coordinate
        uncorrected = jnp.einsum("qd,ndt->nqt", dg.theta(params, CFG, layer), j)
        assert not np.allclose(a, uncorrected, atol=1e-6)


def test_residual_vanishes_on_small_calibration_set_with_zero_ridge(net64):
    params, x_cal, _ = net64
    with jax.enable_x64(True):
        basis = perturbation_basis(jax.random.key(4), (8, 6), 3).astype(jnp.float64)
        v = jnp.array([0.4, -0.3, 0.2])
        s = x_cal[:5]  # B = 5 <= d + 1 = 7: the affine repair interpolates (Theorem 1, x in S)
        r_in = dg.post_correction_residual(params, CFG, 1, basis, s, s, v, 0.0)
        r_out = dg.post_correction_residual(params, CFG, 1, basis, s, x_cal[5:], v, 0.0)
        r_zero = dg.post_correction_residual(params, CFG, 1, basis, s, x_cal, jnp.zeros(3), 0.0)
        assert float(jnp.max(jnp.abs(r_in))) < 1e-9 * float(jnp.max(jnp.abs(r_out)))
        np.testing.assert_array_equal(r_zero, 0.0)


def test_hat_weights_recover_representation_and_bound_by_leverage():
    rng = np.random.default_rng(0)
    y_cal = jnp.asarray(rng.normal(size=(30, 4)))
    y = jnp.asarray(rng.normal(size=(7, 4)) * 3.0)
    with jax.enable_x64(True):
        y_cal, y = jnp.asarray(y_cal, jnp.float64), jnp.asarray(y, jnp.float64)
        for ridge in (0.0, 0.5):
            w = dg.hat_weights(y_cal, y, ridge)
            lev = dg.ridge_leverage(y_cal, y, ridge)
            g = dg.augment(y_cal).T @ dg.augment(y_cal) + ridge * jnp.eye(5)
            g_inv_y = jnp.linalg.solve(g, dg.augment(y).T).T
            # eq. hat-weight-recovery and eq. hat-weight-leverage
            np.testing.assert_allclose(
                w @ dg.augment(y_cal), dg.augment(y) - ridge * g_inv_y, atol=1e-10
            )
            np.testing.assert_allclose(
                jnp.sum(w**2, axis=1), lev - ridge * jnp.sum(g_inv_y**2, axis=1), rtol=1e-10
            )
            assert np.all(jnp.sum(w**2, axis=1) <= lev + 1e-12)


def test_leverage_grows_off_the_calibration_support():
    rng = np.random.default_rng(1)
    y_cal = jnp.asarray(rng.normal(size=(500, 5)), jnp.float32)
    near = jnp.asarray(rng.normal(size=(50, 5)), jnp.float32)
    lev_near = dg.ridge_leverage(y_cal, near, 1e-3)
    lev_far = dg.ridge_leverage(y_cal, 10.0 * near, 1e-3)
    assert float(jnp.median(lev_far)) > 20.0 * float(jnp.median(lev_near))
    # the mean leverage of the calibration rows themselves is (d+1)/B at ridge 0
    np.testing.assert_allclose(jnp.mean(dg.ridge_leverage(y_cal, y_cal, 0.0)), 6 / 500, rtol=1e-3)


def test_effective_rank_definitions_agree():
    rng = np.random.default_rng(2)
    a = jnp.asarray(rng.normal(size=(3, 6, 9)), jnp.float32)
    c = jnp.einsum("nqt,npt->nqp", a, a)
    np.testing.assert_allclose(dg.effective_rank(a), dg.covariance_effective_rank(c), rtol=1e-5)
    np.testing.assert_allclose(dg.covariance_effective_rank(jnp.eye(7)), 7.0, rtol=1e-6)
    rank1 = jnp.outer(jnp.arange(1.0, 5.0), jnp.arange(1.0, 4.0))
    np.testing.assert_allclose(dg.effective_rank(rank1), 1.0, rtol=1e-6)
    ev = jnp.array([4.0, 1.0, 1.0])  # participation ratio 36 / 18
    np.testing.assert_allclose(dg.covariance_effective_rank(jnp.diag(ev)), 2.0, rtol=1e-6)


@pytest.mark.parametrize("spectrum", ["flat", "spiked"])
def test_theorem2_random_sketch_mean_and_relative_variance(spectrum):
    rng = np.random.default_rng(3)
    u, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    w, _ = np.linalg.qr(rng.normal(size=(10, 6)))
    sv = np.ones(6) if spectrum == "flat" else np.array([5.0, 1.0, 0.5, 0.2, 0.1, 0.1])
    a = jnp.asarray(u @ np.diag(sv) @ w.T, jnp.float32)  # [q=6, T=10]
    sigma, n, reps = 1.7, 10, 4000
    r_eff = float(dg.effective_rank(a))
    expected = sigma**2 * float(jnp.sum(a**2))
    keys = jax.random.split(jax.random.key(4), reps)
    sketches = np.asarray(jax.vmap(lambda k: dg.random_probe_sensitivity(a, sigma, n, key=k))(keys))
    rel_var = 2.0 / (n * r_eff)  # eq. relative-sketch-variance
    # the mean of reps sketches has relative standard error sqrt(rel_var / reps); allow 4 of them
    assert abs(sketches.mean() / expected - 1.0) < 4.0 * np.sqrt(rel_var / reps)
    # the sample relative variance of the sketch matches 2 / (n r_eff) (chi-square-like spread)
    observed = sketches.var() / expected**2
    assert abs(observed / rel_var - 1.0) < 0.2, (observed, rel_var)


def test_mahalanobis_matches_direct_formula_and_grows_with_shift():
    rng = np.random.default_rng(5)
    h_cal = rng.normal(size=(400, 4)) @ np.diag([3.0, 1.0, 0.5, 0.1]) + 2.0
    h = np.vstack([h_cal[:5], h_cal[:5] + 5.0])
    got = np.asarray(
        dg.mahalanobis_distance(jnp.asarray(h_cal, jnp.float32), jnp.asarray(h, jnp.float32), 1e-3)
    )
    cov = np.cov(h_cal.T, bias=True)
    cov += 1e-3 * np.trace(cov) / 4 * np.eye(4)
    diff = h - h_cal.mean(0)
    want = np.sqrt(np.einsum("ni,ij,nj->n", diff, np.linalg.inv(cov), diff))
    np.testing.assert_allclose(got, want, rtol=1e-4)
    assert np.all(got[5:] > got[:5])
    with pytest.raises(ValueError):
        dg.mahalanobis_distance(jnp.asarray(h_cal), jnp.asarray(h), 0.0)


def test_perturbation_magnitudes_of_members():
    params = init_params(CFG, 3, jax.random.key(0))
    x = jax.random.normal(jax.random.key(1), (50, 3))
    shifts = jnp.array([0.0, 0.3, -0.7])  # member m adds shifts[m] to the hidden_1 bias
    members = jax.tree.map(lambda a: jnp.broadcast_to(a, (3,) + a.shape), params)
    members["hidden_1"] = dict(
        members["hidden_1"], bias=members["hidden_1"]["bias"] + shifts[:, None]
    )
    dh, dy = dg.perturbation_magnitudes(params, members, CFG, x)
    assert dh.shape == dy.shape == (50,)
    h1 = jax.nn.relu(
        jax.nn.relu(x @ params["hidden_0"]["kernel"] + params["hidden_0"]["bias"])
        @ params["hidden_1"]["kernel"]
        + params["hidden_1"]["bias"][None]
        + shifts[:, None, None]
    )
    want_dh = jnp.mean(jnp.linalg.norm(h1 - h1[0], axis=-1), axis=0)
    mean = h1 @ params["head"]["kernel"][:, :2] + params["head"]["bias"][:2]
    want_dy = jnp.mean(jnp.linalg.norm(mean - mean[0], axis=-1), axis=0)
    np.testing.assert_allclose(dh, want_dh, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dy, want_dy, rtol=1e-5, atol=1e-6)
    assert float(jnp.mean(dh)) > 0.1
    first = jax.tree.map(lambda a: a[:1], members)  # the base network itself: no change
    np.testing.assert_array_equal(dg.perturbation_magnitudes(params, first, CFG, x)[0], 0.0)
    with pytest.raises(ValueError):
        dg.perturbation_magnitudes(params, members, CFG, x, layer=2)
