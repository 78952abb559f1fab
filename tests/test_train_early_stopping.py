"""Training as the authors ran it: AdamW, early stopping on validation NLL, best parameters restored."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pnc import MLPConfig, TrainConfig
from pnc.core.mlp import forward, gaussian_nll
from pnc.core.training import Standardizer, fit, fit_params, fit_summary, train

CFG = MLPConfig(out_dim=1, hidden=(16,))


def _data(seed=0, n=256):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, size=(n, 1)).astype(np.float32)
    y = (np.sin(3 * x) + 0.1 * rng.normal(size=x.shape)).astype(np.float32)
    return jnp.asarray(x), jnp.asarray(y)


def _val_nll(params, xv, yv):
    mean, var = forward(params, xv, CFG)
    return float(jnp.mean(gaussian_nll(mean, var, yv)))


def test_early_stopping_returns_the_best_validation_parameters():
    x, y = _data(0)
    # validation from a shifted function: its NLL turns up while training fits the train rows
    xv = x[:64]
    yv = -y[:64]
    tc = TrainConfig(steps=600, batch_size=32, learning_rate=1e-2, patience=2, eval_every=20)
    result = jax.jit(fit, static_argnums=(0, 1))(CFG, tc, x, y, jax.random.key(0), (xv, yv))
    val = np.asarray(result.val_nll)
    made = val[np.isfinite(val)]
    best_step = int(result.best_step)
    taken = int(result.steps_taken)
    assert taken < tc.steps, "validation NLL kept improving: the test data do not exercise a stop"
    assert taken % tc.eval_every == 0
    # it stopped after exactly `patience` checks without improvement
    assert int(np.argmin(made)) == len(made) - 1 - tc.patience
    assert best_step == (int(np.argmin(made)) + 1) * tc.eval_every
    # the returned parameters are the best check's, recomputed independently
    np.testing.assert_allclose(_val_nll(result.params, xv, yv), made.min(), rtol=1e-5)
    # the trajectory is plain training's (no early stopping, same key) up to the stop
    plain = TrainConfig(steps=tc.steps, batch_size=32, learning_rate=1e-2)
    replay = jax.jit(fit, static_argnums=(0, 1))(CFG, plain, x, y, jax.random.key(0))
    assert np.isfinite(np.asarray(replay.losses)).all()
    losses = np.asarray(result.losses)
    assert np.isfinite(losses[:taken]).all() and np.isnan(losses[taken:]).all()
    np.testing.assert_allclose(losses[:taken], np.asarray(replay.losses)[:taken], rtol=1e-5)
    summary = fit_summary(result)
    assert summary["stopped_early"] and summary["steps_taken"] == taken
    assert summary["best_val_nll"] == pytest.approx(float(made.min()))


def test_without_patience_the_last_iterate_is_returned_and_nothing_is_checked():
    x, y = _data(1)
    tc = TrainConfig(steps=50, batch_size=16, learning_rate=1e-2)
    result = jax.jit(fit, static_argnums=(0, 1))(CFG, tc, x, y, jax.random.key(3))
    params, losses = jax.jit(fit_params, static_argnums=(0, 1))(CFG, tc, x, y, jax.random.key(3))
    assert int(result.steps_taken) == 50 and int(result.best_step) == 50
    assert np.isnan(np.asarray(result.val_nll)).all()
    np.testing.assert_array_equal(np.asarray(losses), np.asarray(result.losses))
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(result.params), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_run_that_keeps_improving_trains_every_step_with_a_partial_last_chunk():
    x, y = _data(2)
    tc = TrainConfig(steps=130, batch_size=32, learning_rate=3e-3, patience=50, eval_every=50)
    result = jax.jit(fit, static_argnums=(0, 1))(CFG, tc, x, y, jax.random.key(1), (x, y))
    assert int(result.steps_taken) == 130
    assert np.asarray(result.val_nll).shape == (3,)  # after steps 50, 100 and 130
    assert np.isfinite(np.asarray(result.losses)).all()


def test_early_stopping_is_vmappable_over_member_keys():
    x, y = _data(3)
    xv, yv = x[:64], -y[:64]
    tc = TrainConfig(steps=400, batch_size=32, learning_rate=1e-2, patience=2, eval_every=20)
    keys = jax.random.split(jax.random.key(0), 3)
    batched = jax.jit(jax.vmap(lambda k: fit(CFG, tc, x, y, k, (xv, yv))))(keys)
    for i in range(3):
        single = jax.jit(fit, static_argnums=(0, 1))(CFG, tc, x, y, keys[i], (xv, yv))
        assert int(batched.steps_taken[i]) == int(single.steps_taken)
        for a, b in zip(
            jax.tree.leaves(batched.params), jax.tree.leaves(single.params), strict=True
        ):
            np.testing.assert_allclose(a[i], b, rtol=1e-5, atol=1e-6)


def test_train_with_validation_and_without_standardisation():
    x, y = _data(4)
    x, y = np.asarray(x) * 10 + 3, np.asarray(y)
    tc = TrainConfig(
        steps=60, batch_size=32, learning_rate=1e-2, patience=3, eval_every=20, standardize=False
    )
    model, losses = train(
        x, y, key=jax.random.key(0), model_config=CFG, train_config=tc, validation=(x[:32], y[:32])
    )
    np.testing.assert_array_equal(model.x_norm.mean, 0.0)
    np.testing.assert_array_equal(model.y_norm.std, 1.0)
    assert losses.shape == (60,)
    ident = Standardizer.identity(2)
    np.testing.assert_array_equal(ident.transform(jnp.ones((1, 2))), 1.0)


def test_bad_recipes_are_rejected():
    with pytest.raises(ValueError, match="patience"):
        TrainConfig(patience=0)
    with pytest.raises(ValueError, match="eval_every"):
        TrainConfig(eval_every=0)
    with pytest.raises(ValueError, match="weight_decay"):
        TrainConfig(weight_decay=-1.0)
    x, y = _data(5)
    with pytest.raises(ValueError, match="validation"):
        fit(CFG, TrainConfig(steps=10, patience=2), x, y, jax.random.key(0))
    with pytest.raises(ValueError, match="validation dims"):
        train(
            np.asarray(x),
            np.asarray(y),
            key=jax.random.key(0),
            model_config=CFG,
            train_config=TrainConfig(steps=10, patience=2),
            validation=(np.zeros((4, 3), np.float32), np.zeros((4, 1), np.float32)),
        )
