"""Every method on a 1-D toy regression: shapes, epistemic growth away from the data,
determinism, and training-run persistence."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pnc.methods.regression as methods
from pnc import Collection, MLPConfig, TrainConfig
from pnc.core.predictive import epistemic_variance
from pnc.methods.regression import TrainingRun

MODEL = MLPConfig(out_dim=1, hidden=(24, 24))
# SWAG collects 4 iterates (steps 200, 250, 300, 350) of the base run
TRAIN = TrainConfig(
    steps=400,
    batch_size=32,
    learning_rate=3e-3,
    collection=Collection(start_step=200, every=50, rank=20),
)

# small, fast configurations of the paper's methods (paper defaults elsewhere); the properties
# below are theirs (a new method meets the contract, tests/test_methods_contract.py)
CONFIGS = {
    "pnc": {"n_members": 20, "sigma": 1.0, "bootstrap_frac": 0.3},
    "pnc_nocorr": {"n_members": 20, "sigma": 0.3},
    "deep_ensemble": {"n_members": 3},
    "deep_ensemble_mixture": {"n_members": 3},
    "mc_dropout": {"rate": 0.1, "n_samples": 40, "chunk_size": 20},
    "swag": {"scale": 1.0, "n_samples": 40, "chunk_size": 20},
    "laplace": {"prior_precision": 10.0, "n_samples": 40, "max_rows": 200, "chunk_size": 20},
    "subspace": {
        "temperature": 1.0,
        "trajectory_steps": 400,  # its own run, 4 iterates as SWAG's
        "collect_start": 200,
        "collect_every": 50,
        "n_samples": 40,
        "burn_in": 20,
        "max_rows": 200,
        "chunk_size": 20,
    },
}


def test_every_toy_configuration_is_of_a_registered_method():
    assert set(CONFIGS) <= set(methods.METHOD_IDS)


@pytest.fixture(scope="module")
def toy():
    rng = np.random.default_rng(0)
    x = rng.uniform(-2.0, 2.0, size=(300, 1)).astype(np.float32)
    y = (np.sin(2.0 * x) + 0.1 * rng.normal(size=x.shape)).astype(np.float32)
    runs = {}
    for method_id in ("swag", "deep_ensemble", "mc_dropout", "subspace"):
        method = methods.get(method_id)
        spec = method.training_spec(method.make_config(CONFIGS[method_id]))
        runs[spec.run_id] = methods.train_spec(
            spec, x, y, model_config=MODEL, train_config=TRAIN, key=jax.random.key(0)
        )
    base = runs["base"].model
    return {
        "runs": runs,
        "x": base.x_norm.transform(jnp.asarray(x)),
        "y": base.y_norm.transform(jnp.asarray(y)),
        "inside": base.x_norm.transform(jnp.linspace(-1.5, 1.5, 40)[:, None]),
        "far": base.x_norm.transform(
            jnp.concatenate([jnp.linspace(-9.0, -6.0, 20), jnp.linspace(6.0, 9.0, 20)])[:, None]
        ),
    }


def _posterior(toy, method_id, key=1):
    method = methods.get(method_id)
    config = method.make_config(CONFIGS[method_id])
    run = toy["runs"][method.training_spec(config).run_id]
    return method, method.build(run, config, toy["x"], toy["y"], key=jax.random.key(key))


@pytest.mark.parametrize("method_id", CONFIGS)
def test_epistemic_variance_grows_away_from_the_data(toy, method_id):
    method, posterior = _posterior(toy, method_id)
    inside = method.predict(posterior, toy["inside"], key=jax.random.key(2))
    far = method.predict(posterior, toy["far"], key=jax.random.key(2))
    expected_s = CONFIGS[method_id].get("n_samples") or CONFIGS[method_id].get("n_members")
    assert inside.means.shape == inside.variances.shape == (expected_s, 40, 1)
    assert bool(jnp.all(jnp.isfinite(inside.means)) & jnp.all(inside.variances > 0))
    epi_in = float(jnp.mean(epistemic_variance(inside)))
    epi_far = float(jnp.mean(epistemic_variance(far)))
    assert epi_in > 0.0
    assert epi_far > 3.0 * epi_in, (epi_in, epi_far)


@pytest.mark.parametrize("method_id", ["mc_dropout", "swag", "laplace", "subspace", "pnc"])
def test_same_key_same_samples(toy, method_id):
    method, post_a = _posterior(toy, method_id, key=5)
    _, post_b = _posterior(toy, method_id, key=5)
    a = method.predict(post_a, toy["inside"], key=jax.random.key(7))
    b = method.predict(post_b, toy["inside"], key=jax.random.key(7))
    np.testing.assert_array_equal(a.means, b.means)
    np.testing.assert_array_equal(a.variances, b.variances)
    _, post_c = _posterior(toy, method_id, key=6)
    c = method.predict(post_c, toy["inside"], key=jax.random.key(8))
    assert not np.array_equal(a.means, c.means)


def test_chunking_does_not_change_samples(toy):
    method = methods.get("swag")
    run = toy["runs"]["base"]
    preds = []
    for chunk in (8, 20):
        config = method.make_config({"n_samples": 40, "chunk_size": chunk})
        posterior = method.build(run, config, toy["x"], toy["y"], key=jax.random.key(0))
        preds.append(method.predict(posterior, toy["inside"], key=jax.random.key(3)))
    for p in preds[1:]:
        np.testing.assert_allclose(p.means, preds[0].means, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("run_id", "method_id"),
    [
        ("base", "swag"),
        ("deep_ensemble-n_members3", "deep_ensemble"),
        ("mc_dropout-rate0.1", "mc_dropout"),
    ],
)
def test_training_run_roundtrip(toy, tmp_path, run_id, method_id):
    run = toy["runs"][run_id]
    run.save(tmp_path)
    loaded = TrainingRun.load(tmp_path)
    assert loaded.spec == run.spec and loaded.model.config == run.model.config
    assert loaded.meta == run.meta
    pairs = zip(
        jax.tree.leaves((run.model.params, dict(run.extras))),
        jax.tree.leaves((loaded.model.params, dict(loaded.extras))),
        strict=True,
    )
    for a, b in pairs:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert not list(tmp_path.glob("*.pkl"))
    method = methods.get(method_id)
    config = method.make_config(CONFIGS[method_id])
    outs = [
        method.predict(
            method.build(r, config, toy["x"], toy["y"], key=jax.random.key(0)),
            toy["inside"],
            key=jax.random.key(1),
        ).means
        for r in (run, loaded)
    ]
    np.testing.assert_array_equal(outs[0], outs[1])


def test_build_rejects_the_wrong_run(toy):
    with pytest.raises(ValueError, match="deep_ensemble"):
        methods.get("deep_ensemble").build(
            toy["runs"]["base"],
            methods.DeepEnsembleConfig(3),
            toy["x"],
            toy["y"],
            key=jax.random.key(0),
        )
    with pytest.raises(ValueError, match="base run"):
        methods.get("swag").build(
            toy["runs"]["mc_dropout-rate0.1"],
            methods.SWAGConfig(),
            toy["x"],
            toy["y"],
            key=jax.random.key(0),
        )
    with pytest.raises(ValueError, match="inputs of shape"):
        method, posterior = _posterior(toy, "swag")
        method.predict(posterior, jnp.zeros((3, 2)), key=jax.random.key(0))
    assert dataclasses.is_dataclass(methods.SWAGConfig())


@pytest.mark.parametrize("method_id", CONFIGS)
def test_posterior_is_a_pytree_of_its_arrays(toy, method_id):
    method, posterior = _posterior(toy, method_id)
    leaves = jax.tree.leaves(posterior)
    assert leaves and all(isinstance(leaf, jax.Array) for leaf in leaves)
    # every field holding arrays contributes its leaves; sizes and hyperparameters are static
    data, static = [], []
    for field in dataclasses.fields(posterior):
        value = getattr(posterior, field.name)
        (static if isinstance(value, int | float | str) else data).append(value)
    assert [id(leaf) for leaf in jax.tree.leaves(data)] == [id(leaf) for leaf in leaves]
    treedef = jax.tree.structure(posterior)
    assert jax.tree.structure(jax.tree.unflatten(treedef, leaves)) == treedef
    assert set(map(id, jax.tree.leaves(posterior.model.params))) <= set(map(id, leaves))
    assert jax.block_until_ready(posterior) is posterior
    copy = jax.tree.map(jnp.copy, posterior)
    a = method.predict(posterior, toy["inside"], key=jax.random.key(3))
    b = method.predict(copy, toy["inside"], key=jax.random.key(3))
    np.testing.assert_array_equal(a.means, b.means)


def test_pnc_build_many_groups_ridge_values_and_matches_separate_builds(toy):
    """Configurations differing only in ``ridge`` are built together (one ridge path) and give
    the members of separate builds; every other configuration is a group of its own."""
    method = methods.get("pnc")
    run = toy["runs"]["base"]
    configs = [
        method.make_config({"n_members": 6, "sigma": 1.0, "bootstrap_frac": 0.3, "ridge": r})
        for r in (1e-4, 1e-1, 10.0)
    ] + [method.make_config({"n_members": 6, "sigma": 2.0, "bootstrap_frac": 0.3})]
    assert method.build_groups(configs) == [[0, 1, 2], [3]]
    key = jax.random.key(7)
    together = method.build_many(run, configs, toy["x"], toy["y"], key=key)
    for config, posterior in zip(configs, together, strict=True):
        alone = method.build(run, config, toy["x"], toy["y"], key=key)
        leaves = zip(
            jax.tree.leaves(posterior.members), jax.tree.leaves(alone.members), strict=True
        )
        for a, b in leaves:
            np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    # the ridge really changes the refit layer (so the comparison above could fail)
    k0, k2 = (together[i].members["hidden_1"]["kernel"] for i in (0, 2))
    assert float(jnp.max(jnp.abs(k0 - k2))) > 1e-3


def test_default_build_many_is_one_build_per_configuration(toy):
    method = methods.get("swag")
    configs = [method.make_config({"scale": s, "n_samples": 4}) for s in (0.5, 2.0)]
    assert method.build_groups(configs) == [[0], [1]]
    run = toy["runs"]["base"]
    many = method.build_many(run, configs, toy["x"], toy["y"], key=jax.random.key(0))
    assert [p.scale for p in many] == [0.5, 2.0]
