"""SWAG: the moments collected during the base run and the sampler's covariance."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

import pnc.methods.regression as methods
from pnc import MLPConfig, TrainConfig
from pnc.core.mlp import init_params
from pnc.core.training import (
    Collection,
    Standardizer,
    TrainedModel,
    init_train_state,
    make_train_step,
)
from pnc.methods.regression import TrainingRun, TrainingSpec
from pnc.methods.regression.base_run import base_spec, swag_statistics, train_base
from pnc.methods.regression.swag import swag_sample


def test_moments_equal_numpy_on_the_stored_trajectory():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(64, 2)).astype(np.float32)
    y = (x[:, :1] * x[:, 1:] + 0.1 * rng.normal(size=(64, 1))).astype(np.float32)
    model_config = MLPConfig(out_dim=1, hidden=(4,))
    collection = Collection(start_step=20, every=4, rank=3)
    train_config = TrainConfig(steps=43, batch_size=8, learning_rate=1e-2, collection=collection)
    spec = base_spec()
    assert spec.run_id == "base"
    run = train_base(
        spec, x, y, model_config=model_config, train_config=train_config, key=jax.random.key(0)
    )

    # replay plain training with the same keys and keep every iterate
    xs, ys = run.model.x_norm.transform(x), run.model.y_norm.transform(y)
    k_init, k_data = jax.random.split(jax.random.key(0))
    state = init_train_state(model_config, train_config, 2, k_init)
    step = jax.jit(make_train_step(model_config, train_config, xs, ys))
    trajectory = []
    for k in jax.random.split(k_data, train_config.steps):
        state, _ = step(state, k)
        trajectory.append(np.asarray(ravel_pytree(state.params)[0], np.float64))
    trajectory = np.stack(trajectory)  # [steps, P]

    n_snap = collection.n_snapshots(train_config.steps)
    assert n_snap == 6  # the iterates after (0-based) steps 20, 24, 28, 32, 36, 40
    snap = trajectory[[20 + collection.every * j for j in range(n_snap)]]
    stats = {k: np.asarray(v) for k, v in run.extras["swag"].items()}
    assert float(stats["n_snapshots"]) == n_snap
    np.testing.assert_allclose(
        ravel_pytree(run.model.params)[0], trajectory[-1], rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(stats["mean"], snap.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(stats["sq_mean"], (snap**2).mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(stats["var"], snap.var(0), rtol=1e-3, atol=1e-9)
    # deviation of snapshot j from the running mean after it, kept in slot j mod K (last K kept)
    running = np.cumsum(snap, axis=0) / np.arange(1, n_snap + 1)[:, None]
    expected = np.zeros((collection.rank, snap.shape[1]))
    for j in range(n_snap):
        expected[j % collection.rank] = snap[j] - running[j]
    np.testing.assert_allclose(stats["deviations"], expected, rtol=1e-4, atol=1e-6)


def test_runs_differing_only_in_their_schedule_share_one_program(caplog):
    """The collection schedule is traced: a second run with another schedule (Subspace's own run
    beside the base run) reuses the first one's compiled program, and collects on its own
    schedule exactly as a program compiled for that schedule alone."""
    from pnc.methods.regression.base_run import fit_swag

    rng = np.random.default_rng(3)
    x = rng.normal(size=(48, 3)).astype(np.float32)
    y = np.tanh(x[:, :2]).astype(np.float32)
    model_config = MLPConfig(out_dim=2, hidden=(5,))
    configs = [
        TrainConfig(steps=37, batch_size=8, collection=Collection(start_step=s, every=e, rank=3))
        for s, e in ((10, 3), (21, 5))
    ]
    with jax.log_compiles(True), caplog.at_level("WARNING", logger="jax._src.dispatch"):
        runs = [
            train_base(base_spec(), x, y, model_config=model_config, train_config=c,
                       key=jax.random.key(1))
            for c in configs
        ]  # fmt: skip
    compiled = [r for r in caplog.records if "compilation of jit(fit_swag)" in r.getMessage()]
    assert len(compiled) == 1
    xs, ys = runs[1].model.x_norm.transform(x), runs[1].model.y_norm.transform(y)
    alone = jax.jit(fit_swag, static_argnums=(0, 1))(
        model_config, configs[1], xs, ys, jax.random.key(1)
    ).observed
    assert float(runs[1].extras["swag"]["n_snapshots"]) == configs[1].collection.n_snapshots(37)
    for name in ("mean", "sq_mean", "deviations"):
        np.testing.assert_array_equal(runs[1].extras["swag"][name], getattr(alone, name))
    assert not np.array_equal(runs[0].extras["swag"]["mean"], runs[1].extras["swag"]["mean"])


def test_a_run_without_snapshots_falls_back_to_its_parameters():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(32, 1)).astype(np.float32)
    run = train_base(
        base_spec(),
        x,
        np.sin(x),
        model_config=MLPConfig(out_dim=1, hidden=(2,)),
        train_config=TrainConfig(steps=60),  # collection starts at step 1000: nothing collected
        key=jax.random.key(0),
    )
    stats = swag_statistics(run)
    assert stats["n_valid"] == 0
    np.testing.assert_array_equal(stats["mean"], ravel_pytree(run.model.params)[0])
    np.testing.assert_array_equal(stats["var"], 0.0)


def _sample_cov(mean, std, deviations, scale, n=200_000):
    keys = jax.random.split(jax.random.key(0), n)
    draw = jax.jit(jax.vmap(lambda k: swag_sample(mean, std, deviations, scale, k)))
    samples = np.asarray(draw(keys), np.float64)
    return samples.mean(0), np.cov(samples.T)


@pytest.mark.parametrize("scale", [0.3, 3.0])
def test_sample_covariance_is_half_diag_plus_low_rank_times_scale_squared(scale):
    """Maddox et al.'s covariance (diag + D^T D / (K - 1)) / 2, with ``scale`` multiplying the
    standard deviation: the covariance grows as ``scale**2`` (0.09 and 9 here, not 0.3 and 3)."""
    rng = np.random.default_rng(0)
    n_params, rank = 5, 3
    mean = jnp.asarray(rng.normal(size=n_params), jnp.float32)
    std = jnp.asarray(rng.uniform(0.2, 1.0, size=n_params), jnp.float32)
    deviations = jnp.asarray(rng.normal(size=(rank, n_params)), jnp.float32)
    sample_mean, cov = _sample_cov(mean, std, deviations, scale)
    d = np.asarray(deviations, np.float64)
    unit = 0.5 * (np.diag(np.asarray(std, np.float64) ** 2) + d.T @ d / (rank - 1))
    np.testing.assert_allclose(sample_mean, mean, atol=0.01 * scale)
    np.testing.assert_allclose(cov, scale**2 * unit, atol=0.02 * scale**2 * np.abs(unit).max())


def test_diagonal_sampler_ignores_the_deviations():
    """``covariance: diag`` (the authors' sampler): mean + scale sqrt(0.5 var) eps."""
    rng = np.random.default_rng(1)
    std = jnp.asarray(rng.uniform(0.2, 1.0, size=4), jnp.float32)
    scale = 2.0
    _, cov = _sample_cov(jnp.zeros(4), std, jnp.zeros((0, 4)), scale)
    expected = np.diag(scale**2 * 0.5 * np.asarray(std, np.float64) ** 2)
    np.testing.assert_allclose(cov, expected, atol=0.02 * expected.max())
    with pytest.raises(ValueError, match="at least 2 deviation columns"):
        swag_sample(jnp.zeros(4), std, jnp.ones((1, 4)), 1.0, jax.random.key(0))


def test_covariance_option_is_checked_and_named_in_the_config_id():
    swag = methods.get("swag")
    assert swag.make_config().covariance == "diag_lowrank"
    config = swag.make_config({"scale": 0.3, "covariance": "diag"})
    assert swag.config_id(config) == "scale=0.3,covariance=diag"
    with pytest.raises(ValueError, match="covariance must be one of diag_lowrank, diag"):
        swag.make_config({"covariance": "full"})


def test_statistics_unroll_the_ring_buffer_most_recent_first():
    config = MLPConfig(out_dim=1, hidden=(1,))
    params = jax.tree.map(jnp.zeros_like, init_params(config, 1, jax.random.key(0)))
    n_params = ravel_pytree(params)[0].shape[0]
    ring = np.arange(3)[:, None] * np.ones((3, n_params))  # slot i holds value i
    swag = {
        "mean": np.zeros(n_params),
        "sq_mean": np.zeros(n_params),
        "var": np.zeros(n_params),
        "deviations": ring,
        "n_snapshots": np.float32(5),  # snapshots 0..4 -> slots 0, 1, 2, 0, 1: newest in slot 1
    }
    norm = Standardizer(jnp.zeros(1), jnp.ones(1))
    run = TrainingRun(
        TrainingSpec("base"), TrainedModel(config, params, norm, norm), {"swag": swag}
    )
    np.testing.assert_array_equal(swag_statistics(run)["deviations"][:, 0], [1.0, 0.0, 2.0])


def test_build_keeps_the_deviations_only_for_the_low_rank_covariance():
    config = MLPConfig(out_dim=1, hidden=(2,))
    params = init_params(config, 1, jax.random.key(0))
    n_params = ravel_pytree(params)[0].shape[0]
    swag = {
        "mean": np.zeros(n_params),
        "sq_mean": np.ones(n_params),
        "var": np.ones(n_params),
        "deviations": np.ones((3, n_params)),
        "n_snapshots": np.float32(3),
    }
    norm = Standardizer(jnp.zeros(1), jnp.ones(1))
    run = TrainingRun(
        TrainingSpec("base"), TrainedModel(config, params, norm, norm), {"swag": swag}
    )
    method = methods.get("swag")
    x = jnp.zeros((4, 1))

    def build(overrides):
        config = method.make_config(overrides)
        return method.build(run, config, x, x, key=jax.random.key(0))

    assert build({"rank": 2}).deviations.shape == (2, n_params)
    assert build({"rank": 2, "covariance": "diag"}).deviations.shape == (0, n_params)
    # fewer than 2 columns: the low-rank term is left out (the authors' sampler)
    assert build({"rank": 1}).deviations.shape == (0, n_params)
    swag["n_snapshots"] = np.float32(1)
    assert build({"rank": 3}).deviations.shape == (0, n_params)
