"""MC Dropout: an independent mask per element, in training and at test time."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

import pnc.methods.regression as methods
from pnc import MLPConfig
from pnc.core.mlp import GaussianMLP, init_params
from pnc.core.training import Standardizer, TrainedModel, nll_loss

CONFIG = MLPConfig(out_dim=2, hidden=(16, 16), dropout_rate=0.5)


def _dropout_outputs(params, x, key):
    """Post-dropout activations of every hidden layer for the call the training loss makes."""
    _, state = GaussianMLP(CONFIG).apply(
        {"params": params},
        x,
        deterministic=False,
        rngs={"dropout": key},
        capture_intermediates=lambda module, _: isinstance(module, nn.Dropout),
        mutable=["intermediates"],
    )
    return [v["__call__"][0] for v in state["intermediates"].values()]


def test_training_masks_differ_across_the_examples_of_a_batch():
    params = init_params(CONFIG, 3, jax.random.key(0))
    row = jnp.array([[0.5, -1.0, 2.0]])
    batch = jnp.repeat(row, 8, axis=0)  # identical examples: only the masks can tell them apart
    outputs = _dropout_outputs(params, batch, jax.random.key(1))
    assert len(outputs) == 2
    for h in outputs:
        assert h.shape == (8, 16)
        dropped = np.asarray(h == 0.0)
        assert dropped.any() and not dropped.all()
        assert len({tuple(r) for r in dropped}) > 1, "one mask shared across the batch"
    # the training loss of the identical examples therefore differs from one example's loss
    y = jnp.zeros((8, 2))
    key = jax.random.key(2)
    losses = jax.vmap(lambda x, t: nll_loss(params, GaussianMLP(CONFIG), x[None], t[None], key))(
        batch, y
    )
    batch_loss = nll_loss(params, GaussianMLP(CONFIG), batch, y, key)
    assert not np.allclose(batch_loss, losses[0])


def test_test_time_passes_draw_a_mask_per_example():
    params = init_params(CONFIG, 3, jax.random.key(0))
    norm = Standardizer(jnp.zeros(3), jnp.ones(3))
    model = TrainedModel(CONFIG, params, norm, Standardizer(jnp.zeros(2), jnp.ones(2)))
    run = methods.TrainingRun(methods.TrainingSpec("mc_dropout", (("rate", 0.5),)), model)
    method = methods.get("mc_dropout")
    config = method.make_config({"rate": 0.5, "n_samples": 6, "chunk_size": 3})
    posterior = method.build(run, config, None, None, key=jax.random.key(0))
    x = jnp.repeat(jnp.array([[0.5, -1.0, 2.0]]), 10, axis=0)
    pred = method.predict(posterior, x, key=jax.random.key(3))
    means = np.asarray(pred.means)  # [S, N, D]
    assert means.shape == (6, 10, 2)
    for s in range(6):  # within one pass, identical inputs get different sub-networks
        assert not np.allclose(means[s], means[s, :1]), s
    assert not np.allclose(means[0], means[1])  # and the passes differ
    again = method.predict(posterior, x, key=jax.random.key(3))
    np.testing.assert_array_equal(np.asarray(again.means), means)
