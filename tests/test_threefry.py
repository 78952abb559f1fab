"""pnc.core.threefry draws JAX's random bits and Bernoulli masks bit for bit, and the MLP's dropout
(pnc.core.mlp.Dropout) gives Flax's dropout outputs."""

from __future__ import annotations

import json

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pnc.core import threefry
from pnc.core.mlp import Dropout, GaussianMLP, MLPConfig, init_params

KEYS = {
    "typed": jax.random.key(7),
    "raw": jax.random.PRNGKey(2**40 + 3),
    "split": jax.random.split(jax.random.key(1), 3)[2],
    "fold_in": jax.random.fold_in(jax.random.key(11), 5),
}
SHAPES = [(), (1,), (7,), (3, 5), (301, 200), (2, 3, 4, 5)]


@pytest.mark.parametrize("name", sorted(KEYS))
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_bits_and_masks_are_jax_bits(name, shape):
    key = KEYS[name]
    assert np.array_equal(threefry.random_bits(key, shape), jax.random.bits(key, shape, np.uint32))
    for p in (0.5, 0.9, 0.95, 1e-3):
        mine = threefry.bernoulli(key, p, shape)
        assert mine.dtype == jnp.bool_ and mine.shape == shape
        assert np.array_equal(mine, jax.random.bernoulli(key, p, shape))


def test_masks_under_jit_and_vmap_are_jax_masks():
    keys = jax.random.split(jax.random.key(3), 6)
    mine = jax.jit(jax.vmap(lambda k: threefry.bernoulli(k, 0.8, (50, 20))))(keys)
    theirs = jax.jit(jax.vmap(lambda k: jax.random.bernoulli(k, 0.8, (50, 20))))(keys)
    assert np.array_equal(mine, theirs)


def test_hash_matches_the_published_test_vectors():
    """Random123's known-answer vectors for Threefry-2x32 with 20 rounds."""
    u32 = np.uint32
    cases = [
        ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
        ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
        ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
    ]
    for (k0, k1), (x0, x1), expected in cases:
        y = threefry.threefry2x32(u32(k0), u32(k1), np.array([x0], u32), np.array([x1], u32))
        assert (int(y[0][0]), int(y[1][0])) == expected


def test_bad_keys_and_sizes_are_refused():
    with pytest.raises(ValueError, match="uint32"):
        threefry.random_bits(jnp.zeros((3,), jnp.uint32), (4,))
    with pytest.raises(ValueError, match="2\\*\\*32"):
        threefry.random_bits(KEYS["typed"], (2**16, 2**16))
    with pytest.raises(ValueError, match="Threefry keys only"):
        threefry.random_bits(jax.random.key(0, impl="rbg"), (4,))


class _FlaxDropoutMLP(nn.Module):
    """GaussianMLP's layers with Flax's own dropout, for comparison."""

    config: MLPConfig

    @nn.compact
    def __call__(self, x, *, deterministic=True):
        h = x
        for i, width in enumerate(self.config.hidden):
            h = nn.relu(nn.Dense(width, name=f"hidden_{i}")(h))
            h = nn.Dropout(rate=self.config.dropout_rate)(h, deterministic=deterministic)
        return nn.Dense(2 * self.config.out_dim, name="head")(h)


def test_mlp_dropout_gives_flax_dropout_outputs():
    config = MLPConfig(out_dim=3, hidden=(16, 16), dropout_rate=0.2)
    params = init_params(config, 5, jax.random.key(0))
    x = jax.random.normal(jax.random.key(1), (40, 5))
    keys = jax.random.split(jax.random.key(2), 4)

    def ours(k):
        mean, _ = GaussianMLP(config).apply({"params": params}, x, deterministic=False,
                                            rngs={"dropout": k})  # fmt: skip
        return mean

    def flax_own(k):
        out = _FlaxDropoutMLP(config).apply({"params": params}, x, deterministic=False,
                                            rngs={"dropout": k})  # fmt: skip
        return out[..., : config.out_dim]

    a, b = jax.jit(jax.vmap(ours))(keys), jax.jit(jax.vmap(flax_own))(keys)
    assert np.array_equal(a, b)
    assert not np.array_equal(a[0], a[1])  # the masks do vary with the key


def test_dropout_is_identity_when_deterministic_or_rate_zero():
    x = jnp.arange(12.0).reshape(3, 4)
    assert np.array_equal(Dropout(rate=0.5).apply({}, x, deterministic=True), x)
    assert np.array_equal(Dropout(rate=0.0).apply({}, x, deterministic=False), x)


def test_benchmark_reports_both_draws_with_the_same_bits(tmp_path, capsys):
    from bench.mask_draws import main

    out = tmp_path / "threefry.json"
    assert main(["--rows", "64", "--width", "8", "--repeats", "2", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["same_bits"] is True
    for draw in ("jax", "unrolled"):
        assert result[draw]["numbers"] == 64 * 8 * 2 and result[draw]["cpu_s"] > 0
    assert json.loads(capsys.readouterr().out) == result


def test_draws_follow_jax_when_threefry_is_not_partitionable():
    key = KEYS["typed"]
    with jax.threefry_partitionable(False):
        assert np.array_equal(
            threefry.bernoulli(key, 0.7, (33, 9)), jax.random.bernoulli(key, 0.7, (33, 9))
        )
