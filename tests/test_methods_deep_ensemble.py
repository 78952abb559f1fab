"""Deep Ensemble: the mixture predictive (paper) and one draw per member (the authors' code)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pnc.methods.regression as methods
from pnc import MLPConfig, mixture
from pnc.core.mlp import init_params
from pnc.core.predictive import epistemic_variance
from pnc.core.training import Standardizer, TrainedModel

CONFIG = MLPConfig(out_dim=2, hidden=(8,))


def _posterior(predictive, n_members=5):
    members = jax.vmap(lambda k: init_params(CONFIG, 3, k))(
        jax.random.split(jax.random.key(0), n_members)
    )
    first = jax.tree.map(lambda a: a[0], members)
    norm = Standardizer(jnp.zeros(3), jnp.ones(3))
    model = TrainedModel(CONFIG, first, norm, Standardizer(jnp.zeros(2), jnp.ones(2)))
    spec = methods.TrainingSpec("deep_ensemble", (("n_members", n_members),))
    run = methods.TrainingRun(spec, model, {"members": members})
    method = methods.get("deep_ensemble")
    config = method.make_config({"n_members": n_members, "predictive": predictive})
    return method, method.build(run, config, None, None, key=jax.random.key(0))


def test_sample_predictive_is_the_mean_and_variance_of_one_draw_per_member():
    x = jax.random.normal(jax.random.key(1), (4000, 3))
    method, gaussians = _posterior("mixture")
    _, drawn = _posterior("sample")
    members = method.predict(gaussians, x, key=jax.random.key(2))
    pred = method.predict(drawn, x, key=jax.random.key(2))
    draws = np.asarray(pred.means, np.float64)  # [M, N, D]
    assert draws.shape == (5, 4000, 2)
    np.testing.assert_array_equal(np.asarray(pred.variances), 0.0)
    # the predictive mean and variance are those of the M draws (population variance)
    mean, var = (np.asarray(a, np.float64) for a in mixture(pred))
    np.testing.assert_allclose(mean, draws.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var, draws.var(0), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.asarray(epistemic_variance(pred)), var, rtol=1e-4, atol=1e-6)
    # each draw comes from its own member's Gaussian: standardised residuals are N(0, 1)
    resid = (draws - np.asarray(members.means)) / np.sqrt(np.asarray(members.variances))
    assert abs(resid.mean()) < 0.02 and abs(resid.std() - 1.0) < 0.02
    # seeded by the predict key
    same = method.predict(drawn, x, key=jax.random.key(2))
    np.testing.assert_array_equal(np.asarray(same.means), draws)
    other = method.predict(drawn, x, key=jax.random.key(3))
    assert not np.allclose(np.asarray(other.means), draws)


def test_mixture_predictive_keeps_each_members_gaussian():
    x = jax.random.normal(jax.random.key(1), (10, 3))
    method, posterior = _posterior("mixture")
    a = method.predict(posterior, x, key=jax.random.key(2))
    b = method.predict(posterior, x, key=jax.random.key(3))
    np.testing.assert_array_equal(np.asarray(a.means), np.asarray(b.means))
    assert bool(jnp.all(a.variances > 0))


def test_predictive_option_is_post_hoc_and_checked():
    method = methods.get("deep_ensemble")
    sample = method.make_config({"predictive": "sample"})
    assert method.config_id(sample) == "n_members=5,predictive=sample"
    assert method.config_id(method.make_config()) == "n_members=5"
    assert method.training_spec(sample) == method.training_spec(method.make_config())
    with pytest.raises(ValueError, match="predictive must be one of mixture, sample"):
        method.make_config({"predictive": "mean"})


def test_mixture_reading_shares_the_run_and_pins_the_mixture():
    """``deep_ensemble_mixture``: the same run and keys as the Deep Ensemble, its members' Gaussians
    as the predictive whatever the predict key, and only ``n_members`` accepted."""
    variant, de = methods.get("deep_ensemble_mixture"), methods.get("deep_ensemble")
    config = variant.make_config({"n_members": 5})
    assert config.predictive == "mixture" and variant.config_keys == ("n_members",)
    assert variant.training_spec(config) == de.training_spec(de.make_config({"n_members": 5}))
    assert variant.key_id == "deep_ensemble" and variant.run_kind == de.run_kind
    assert not variant.ranked and de.ranked
    with pytest.raises(ValueError, match="unknown"):
        variant.make_config({"n_members": 5, "predictive": "sample"})
    with pytest.raises(ValueError, match="fixes predictive='mixture'"):
        variant.build(None, de.make_config({"predictive": "sample"}), None, None, key=None)
    _, posterior = _posterior("mixture")
    mixed = variant.build(
        methods.TrainingRun(
            methods.TrainingSpec("deep_ensemble", (("n_members", 5),)),
            posterior.model,
            {"members": posterior.members},
        ),
        config,
        None,
        None,
        key=jax.random.key(0),
    )
    x = jax.random.normal(jax.random.key(1), (6, 3))
    a = variant.predict(mixed, x, key=jax.random.key(2))
    b = de.predict(posterior, x, key=jax.random.key(9))
    np.testing.assert_array_equal(np.asarray(a.means), np.asarray(b.means))
    np.testing.assert_array_equal(np.asarray(a.variances), np.asarray(b.variances))
    assert float(np.min(np.asarray(a.variances))) > 0.0
