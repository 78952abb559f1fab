import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pnc import MLPConfig, TrainConfig, forward, load_model, save_model, train
from pnc.core.mlp import GaussianMLP, bound_logvar, init_params
from pnc.core.predictive import Predictive, mixture


def _toy(n=512, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-3, 3, size=(n, 2)).astype(np.float32)
    y = np.stack([np.sin(x[:, 0]) + 0.1 * rng.normal(size=n), x[:, 1] ** 2], axis=1)
    return x, y.astype(np.float32)


def test_functional_forward_matches_module():
    cfg = MLPConfig(out_dim=3, hidden=(16, 8))
    params = init_params(cfg, 5, jax.random.key(0))
    x = jax.random.normal(jax.random.key(1), (7, 5))
    m1, v1 = GaussianMLP(cfg).apply({"params": params}, x)
    m2, v2 = forward(params, x, cfg)
    np.testing.assert_allclose(m1, m2, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(v1, v2, rtol=1e-6, atol=1e-6)
    assert sorted(params) == ["head", "hidden_0", "hidden_1"]


def test_logvar_bounds_hold_for_extreme_inputs():
    raw = jnp.array([-1e6, -50.0, 0.0, 50.0, 1e6])
    lv = bound_logvar(raw, -10.0, 4.0)
    assert jnp.all(jnp.isfinite(lv))
    assert jnp.all(lv >= -10.0) and jnp.all(lv <= 4.0)
    assert jnp.all(jnp.diff(lv) >= 0)


def test_training_reduces_nll_and_is_deterministic():
    x, y = _toy()
    cfg = MLPConfig(out_dim=2, hidden=(32, 32))
    tc = TrainConfig(steps=600, batch_size=64, learning_rate=3e-3)
    m1, losses = train(x, y, key=jax.random.key(3), model_config=cfg, train_config=tc)
    m2, _ = train(x, y, key=jax.random.key(3), model_config=cfg, train_config=tc)
    assert losses.shape == (600,)
    assert losses[-50:].mean() < losses[:50].mean() - 0.5
    for a, b in zip(jax.tree.leaves(m1.params), jax.tree.leaves(m2.params), strict=True):
        np.testing.assert_array_equal(a, b)
    m3, _ = train(x, y, key=jax.random.key(4), model_config=cfg, train_config=tc)
    assert not np.array_equal(m1.params["head"]["kernel"], m3.params["head"]["kernel"])
    # standardised predictions beat the constant predictor on the training data
    mean, _ = m1.predict(x)
    y_std = m1.y_norm.transform(y)
    assert float(jnp.mean((mean - y_std) ** 2)) < 0.2


def test_save_load_roundtrip(tmp_path):
    x, y = _toy(128)
    cfg = MLPConfig(out_dim=2, hidden=(8,))
    model, _ = train(
        x, y, key=jax.random.key(0), model_config=cfg, train_config=TrainConfig(steps=10)
    )
    save_model(model, tmp_path / "m", extra={"seed": 0})
    loaded, meta = load_model(tmp_path / "m")
    assert meta["extra"] == {"seed": 0} and meta["in_dim"] == 2
    assert loaded.config == cfg
    np.testing.assert_array_equal(model.predict(x)[0], loaded.predict(x)[0])
    assert not list(tmp_path.glob("**/*.pkl"))


def test_trained_model_is_a_pytree_with_static_config():
    x, y = _toy(64)
    cfg = MLPConfig(out_dim=2, hidden=(8,))
    model, _ = train(
        x, y, key=jax.random.key(0), model_config=cfg, train_config=TrainConfig(steps=5)
    )
    leaves = jax.tree.leaves(model)
    assert len(leaves) == len(jax.tree.leaves(model.params)) + 4  # + x/y mean and std
    assert all(isinstance(leaf, jax.Array) for leaf in leaves)
    assert jax.block_until_ready(model) is model
    doubled = jax.tree.map(lambda a: 2 * a, model)
    assert doubled.config == cfg
    np.testing.assert_array_equal(doubled.x_norm.std, 2 * model.x_norm.std)
    mean = jax.jit(lambda m, v: m.predict(v)[0])(model, x)  # config is static under jit
    np.testing.assert_allclose(mean, model.predict(x)[0], rtol=1e-6, atol=1e-6)


def test_bad_inputs_raise():
    with pytest.raises(ValueError):
        MLPConfig(out_dim=0)
    with pytest.raises(ValueError):
        train(np.zeros((5, 2)), np.zeros((4, 1)), key=jax.random.key(0))
    x = np.ones((10, 2))
    x[0, 0] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        train(x, np.zeros((10, 1)), key=jax.random.key(0))


def test_mixture_moments():
    means = jnp.array([[[0.0]], [[2.0]]])
    variances = jnp.array([[[1.0]], [[3.0]]])
    mean, var = mixture(Predictive(means, variances))
    assert float(mean[0, 0]) == 1.0
    assert float(var[0, 0]) == pytest.approx(2.0 + 1.0)


def test_softplus_variance_head_by_hand():
    """The authors' variance link: ``var = log(1 + exp(v)) + min_variance`` on the head's second
    half, computed here in float64 from the head's weights; the module agrees with the function."""
    cfg = MLPConfig(out_dim=2, hidden=(6,), variance="softplus", min_variance=1e-3)
    params = init_params(cfg, 3, jax.random.key(4))
    x = np.random.default_rng(0).normal(size=(5, 3)) * 3.0
    h = np.maximum(x @ np.asarray(params["hidden_0"]["kernel"], np.float64) + np.asarray(params["hidden_0"]["bias"]), 0.0)  # fmt: skip
    out = h @ np.asarray(params["head"]["kernel"], np.float64) + np.asarray(params["head"]["bias"])
    mean, var = forward(params, jnp.asarray(x, jnp.float32), cfg)
    np.testing.assert_allclose(mean, out[:, :2], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(var, np.log1p(np.exp(out[:, 2:])) + 1e-3, rtol=1e-5, atol=1e-6)
    module_mean, module_var = GaussianMLP(cfg).apply({"params": params}, jnp.asarray(x, jnp.float32))  # fmt: skip
    np.testing.assert_allclose(module_var, var, rtol=1e-6)
    # the floor holds where the softplus underflows, and large raw outputs pass through linearly
    far = {**params, "head": {"kernel": params["head"]["kernel"], "bias": jnp.asarray([0.0, 0.0, -200.0, 50.0])}}  # fmt: skip
    _, var_far = forward(far, jnp.zeros((1, 3)), MLPConfig(out_dim=2, hidden=(6,), variance="softplus", min_variance=1e-3))  # fmt: skip
    np.testing.assert_allclose(var_far[0], [1e-3, 50.0 + 1e-3], rtol=1e-6)
