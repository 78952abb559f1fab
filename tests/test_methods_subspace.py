"""Subspace Inference: the tempered likelihood the chain targets, the PCA subspace, the options."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

import pnc.methods.regression as methods
import pnc.methods.regression.subspace as subspace
from pnc import MLPConfig, forward, gaussian_nll, init_params
from pnc.core.training import Standardizer, TrainedModel
from pnc.methods.regression import TrainingRun, TrainingSpec

CONFIG = MLPConfig(out_dim=2, hidden=(4,))


def _run(n_columns=4):
    params = init_params(CONFIG, 3, jax.random.key(0))
    flat = ravel_pytree(params)[0]
    rng = np.random.default_rng(0)
    swag = {
        "mean": np.asarray(flat, np.float64),
        "sq_mean": np.asarray(flat, np.float64) ** 2 + 0.01,
        "var": np.full(flat.shape, 0.01),
        "deviations": 0.05 * rng.normal(size=(n_columns, flat.shape[0])),
        "n_snapshots": np.float32(n_columns),
    }
    x_norm = Standardizer(jnp.zeros(3), jnp.ones(3))
    y_norm = Standardizer(jnp.zeros(2), jnp.ones(2))
    model = TrainedModel(CONFIG, params, x_norm, y_norm)
    return TrainingRun(TrainingSpec("base"), model, {"swag": swag})


def _captured_log_lik(monkeypatch, config_overrides, x, y):
    """Build Subspace with the chain replaced by a recorder; return the log-likelihood it was given
    as a function of ``z``, and the posterior."""
    seen = {}

    def fake_chain(mean, basis, template, x_used, y_used, scale, key, *, config, **kwargs):
        seen.update(mean=mean, basis=basis, template=template, x=x_used, y=y_used, scale=scale)
        seen["config"] = config
        return jnp.zeros((kwargs["n_samples"], basis.shape[0])), 1

    monkeypatch.setattr(subspace, "_subspace_chain", fake_chain)
    method = methods.get("subspace")
    config = method.make_config({"rank": 3, "n_samples": 2, **config_overrides})
    posterior = method.build(_run(), config, x, y, key=jax.random.key(1))

    def log_lik(z):
        return subspace.subspace_log_likelihood(
            z,
            seen["mean"],
            seen["basis"],
            seen["template"],
            seen["x"],
            seen["y"],
            seen["scale"],
            seen["config"],
        )

    return log_lik, seen, posterior


def _sum_nll(posterior, z, x, y):
    unravel = ravel_pytree(posterior.model.params)[1]
    mean, var = forward(unravel(posterior.mean + z @ posterior.basis), x, CONFIG)
    return float(jnp.sum(gaussian_nll(mean, var, y)))


@pytest.mark.parametrize("temperature", [1.0, 2.0, 10.0])
def test_temperature_enters_squared_on_all_rows(monkeypatch, temperature):
    """The chain's target is log L(z) = -sum_{i, d} NLL / T^2 over all N rows (default max_rows)."""
    x = jax.random.normal(jax.random.key(2), (30, 3))
    y = jax.random.normal(jax.random.key(3), (30, 2))
    log_lik, seen, posterior = _captured_log_lik(monkeypatch, {"temperature": temperature}, x, y)
    assert seen["x"].shape == (30, 3)  # every row
    z = jnp.array([0.3, -0.2, 0.5])
    expected = -_sum_nll(posterior, z, x, y) / temperature**2
    np.testing.assert_allclose(float(log_lik(z)), expected, rtol=1e-5)


def test_subset_of_rows_is_rescaled_to_all_rows(monkeypatch):
    x = jax.random.normal(jax.random.key(4), (40, 3))
    y = jax.random.normal(jax.random.key(5), (40, 2))
    log_lik, seen, posterior = _captured_log_lik(
        monkeypatch, {"temperature": 3.0, "max_rows": 10}, x, y
    )
    assert seen["x"].shape == (10, 3)
    z = jnp.array([0.1, 0.4, -0.3])
    expected = -(40 / 10) * _sum_nll(posterior, z, seen["x"], seen["y"]) / 9.0
    np.testing.assert_allclose(float(log_lik(z)), expected, rtol=1e-5)


def test_pca_components_are_the_authors_scaled_principal_directions():
    """``B = diag(s / sqrt(K - 1)) V^T``, so with k = K the components reproduce the deviations'
    second moment ``D^T D / (K - 1)`` (the authors: ``U S / sqrt(n - 1)`` of the columns)."""
    deviations = jnp.asarray(np.random.default_rng(1).normal(size=(5, 12)), jnp.float32)
    basis = subspace.pca_subspace(deviations, 5)
    d = np.asarray(deviations, np.float64)
    b = np.asarray(basis, np.float64)
    np.testing.assert_allclose(b.T @ b, d.T @ d / 4, rtol=1e-4, atol=1e-5)
    norms = np.linalg.norm(b, axis=1)
    assert np.all(np.diff(norms) <= 1e-6)  # ordered by singular value
    assert subspace.pca_subspace(deviations, 2).shape == (2, 12)


def test_defaults_follow_the_authors_and_options_are_checked():
    method = methods.get("subspace")
    config = method.make_config()
    assert (config.max_rows, config.burn_in, config.predictive) == (None, 100, "mixture")
    assert method.config_id(method.make_config({"max_rows": None})) == "temperature=1"
    assert (
        method.config_id(method.make_config({"predictive": "sample", "thin": 1}))
        == "temperature=1,thin=1,predictive=sample"
    )
    with pytest.raises(ValueError, match="predictive must be one of mixture, sample"):
        method.make_config({"predictive": "draws"})
    with pytest.raises(ValueError, match="max_rows"):
        method.make_config({"max_rows": 0})


def test_restored_posterior_predicts_the_built_ones_bits():
    """The two-phase evaluation stores the chain's samples and restores the posterior from them
    (the subspace computed again from the run): its predictions are the built posterior's, bit for
    bit, and samples of another shape are refused."""
    method = methods.get("subspace")
    config = method.make_config({"rank": 3, "n_samples": 4, "burn_in": 2})
    x = jax.random.normal(jax.random.key(2), (30, 3))
    y = jax.random.normal(jax.random.key(3), (30, 2))
    built = method.build(_run(), config, x, y, key=jax.random.key(1))
    arrays = method.posterior_arrays(built)
    assert method.stores_posteriors and set(arrays) == {"z", "n_evals"}
    restored = method.restore_posterior(_run(), config, arrays)
    a = method.predict(built, x, key=jax.random.key(4))
    b = method.predict(restored, x, key=jax.random.key(4))
    assert np.array_equal(a.means, b.means) and np.array_equal(a.variances, b.variances)
    assert restored.n_evals == built.n_evals
    with pytest.raises(ValueError, match="do not fit"):
        method.restore_posterior(_run(), config, {**arrays, "z": arrays["z"][:2]})
    assert not methods.get("swag").stores_posteriors
    with pytest.raises(ValueError, match="does not store"):
        methods.get("swag").posterior_arrays(built)
