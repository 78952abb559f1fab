"""KFAC Laplace: Kronecker factors against the exact per-example Fisher, and the sampler."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pnc.methods.regression as methods
from pnc import MLPConfig, forward, gaussian_nll, init_params
from pnc.core.training import Standardizer, TrainedModel
from pnc.methods.regression import TrainingRun, TrainingSpec
from pnc.methods.regression.laplace import (
    augmented_layer,
    eigen_factors,
    kfac_factors,
    kfac_factors_for_targets,
    layer_offset,
)


def test_kronecker_block_equals_exact_fisher_block_for_one_example():
    """One example's Fisher block of the per-dimension *mean* NLL (the authors' loss; with D = 2 the
    summed NLL would give 4 times this block); the head is two blocks, mean and variance head."""
    config = MLPConfig(out_dim=2, hidden=(3, 4))
    params = init_params(config, 2, jax.random.key(0))
    x = jnp.array([[0.7, -1.3]])
    target = jnp.array([[[0.4, -0.2]]])  # one sampled output, [C=1, n=1, D=2]
    factors = kfac_factors_for_targets(params, x, target, config)

    def nll(p):
        mean, var = forward(p, x, config)
        return jnp.mean(gaussian_nll(mean, var, target[0]))

    grads = jax.jit(jax.grad(nll))(params)
    for name in config.layer_names():
        g_vec = np.asarray(augmented_layer(grads[name]), np.float64).reshape(-1)  # row-major
        exact = np.outer(g_vec, g_vec)
        if name == "head":  # two blocks: no curvature between the mean and the variance head
            column = np.tile(np.arange(4) >= 2, grads[name]["kernel"].shape[0] + 1)
            exact = exact * (column[:, None] == column[None, :])
            assert np.abs(np.outer(g_vec, g_vec) - exact).max() > 1e-6
        A, G = (np.asarray(f, np.float64) for f in factors[name])
        assert np.abs(exact).max() > 1e-6
        np.testing.assert_allclose(np.kron(A, G), exact, rtol=1e-4, atol=1e-7 * np.abs(exact).max())


def test_factors_average_over_examples_and_targets():
    config = MLPConfig(out_dim=1, hidden=(3,))
    params = init_params(config, 2, jax.random.key(1))
    x = jax.random.normal(jax.random.key(2), (5, 2))
    targets = jax.random.normal(jax.random.key(3), (2, 5, 1))
    factors = kfac_factors_for_targets(params, x, targets, config)
    per_example = [
        kfac_factors_for_targets(params, x[i : i + 1], targets[c : c + 1, i : i + 1], config)
        for c in range(2)
        for i in range(5)
    ]
    for name in config.layer_names():
        A = np.mean([f[name][0] for f in per_example[:5]], axis=0)
        G = np.mean([f[name][1] for f in per_example], axis=0)
        np.testing.assert_allclose(factors[name][0], A, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(factors[name][1], G, rtol=1e-4, atol=1e-6)


def test_sampler_covariance_is_inverse_kronecker_precision():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 3))
    g = rng.normal(size=(2, 2))
    A, G = a @ a.T + 0.1 * np.eye(3), g @ g.T + 0.1 * np.eye(2)
    n_data, delta = 4.0, 0.5
    eigen = eigen_factors({"layer": (jnp.asarray(A, jnp.float32), jnp.asarray(G, jnp.float32))})
    z = jax.random.normal(jax.random.key(0), (200_000, 3, 2))
    offsets = jax.jit(jax.vmap(lambda zi: layer_offset(eigen["layer"], n_data, delta, zi)))(z)
    samples = np.asarray(offsets, np.float64).reshape(len(z), -1)
    expected = np.linalg.inv(n_data * np.kron(A, G) + delta * np.eye(6))
    np.testing.assert_allclose(samples.mean(0), 0.0, atol=0.01)
    np.testing.assert_allclose(np.cov(samples.T), expected, atol=0.02 * np.abs(expected).max())


def _base_run(config, in_dim):
    params = init_params(config, in_dim, jax.random.key(0))
    norm = Standardizer(jnp.zeros(in_dim), jnp.ones(in_dim))
    y_norm = Standardizer(jnp.zeros(config.out_dim), jnp.ones(config.out_dim))
    return TrainingRun(TrainingSpec("base"), TrainedModel(config, params, norm, y_norm))


@pytest.mark.parametrize(("max_rows", "rows_used"), [(None, 50), (100, 50), (20, 20)])
def test_precision_uses_the_rows_actually_used(max_rows, rows_used):
    """``n`` in ``n A (x) G + delta`` is the number of rows the factors were estimated on."""
    config = MLPConfig(out_dim=2, hidden=(3,))
    run = _base_run(config, 2)
    x = jax.random.normal(jax.random.key(1), (50, 2))
    method = methods.get("laplace")
    laplace_config = method.make_config({"max_rows": max_rows, "n_samples": 4})
    key = jax.random.key(2)
    posterior = method.build(run, laplace_config, x, x[:, :2], key=key)
    assert posterior.n_data == rows_used
    # the factors are those of exactly these rows (same subset and Fisher draws as build)
    k_rows, k_fisher = jax.random.split(key)
    if max_rows is not None and max_rows < 50:
        x = x[jax.random.choice(k_rows, 50, (max_rows,), replace=False)]
    factors = kfac_factors(run.model.params, x, k_fisher, config=config)
    expected = eigen_factors(factors)
    for name in config.layer_names():
        np.testing.assert_allclose(
            posterior.eigen[name]["eig_a"], expected[name]["eig_a"], rtol=1e-5, atol=1e-7
        )
        np.testing.assert_allclose(
            posterior.eigen[name]["eig_g"], expected[name]["eig_g"], rtol=1e-5, atol=1e-7
        )
    # and a prediction samples the head with precision n a g^T + delta, that n
    head = posterior.eigen["head"]  # [d_in + 1, d_out] = [4, 4]
    z = jax.random.normal(jax.random.key(3), (4, 4))
    precision = rows_used * np.outer(head["eig_a"], head["eig_g"]) + laplace_config.prior_precision
    manual = (
        np.asarray(head["q_a"]) @ (np.asarray(z) / np.sqrt(precision)) @ np.asarray(head["q_g"]).T
    )
    offset = layer_offset(head, jnp.float32(posterior.n_data), laplace_config.prior_precision, z)
    np.testing.assert_allclose(offset, manual, rtol=1e-4, atol=1e-8)


def test_max_rows_must_be_positive_or_null():
    with pytest.raises(ValueError, match="max_rows"):
        methods.get("laplace").make_config({"max_rows": 0})
