"""P&C on a small flax.linen ViT-style encoder: perturb ``fc1``, correct ``fc2`` in the last block.

Generated stripe images (three orientations) are cut into 4x4 patches, embedded, passed through
two pre-norm transformer blocks (self-attention, then an MLP ``fc1 -> GELU -> fc2``), mean-pooled
and classified. P&C perturbs ``block_1/fc1`` and corrects ``block_1/fc2`` by Lemma 1 on every
token of the calibration images. Everything up to ``block_1/fc1`` (the patch embedding, the first
block, the attention of the second) runs once per batch; only the last MLP and the head run per
member. Reported: the AUROC of the mixture entropy between test images and a shift (inverted
contrast plus noise), and the cost of the ensemble's prediction relative to one forward pass.

Run: ``python examples/transformer.py`` (prints JSON).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import auroc, bar_images, timed  # noqa: E402

import pnc  # noqa: E402
from pnc.core.conv import entropy, ood_scores  # noqa: E402


class Block(nn.Module):
    """Pre-norm transformer block on tokens ``[N, T, dim]``."""

    dim: int
    heads: int
    hidden: int

    @nn.compact
    def __call__(self, x):
        attn = nn.MultiHeadDotProductAttention(num_heads=self.heads, name="attn")
        x = x + attn(nn.LayerNorm(name="ln1")(x))
        h = nn.Dense(self.hidden, name="fc1")(nn.LayerNorm(name="ln2")(x))
        return x + nn.Dense(self.dim, name="fc2")(nn.gelu(h))


class ViT(nn.Module):
    """``x [N, H, W, 1] -> logits [N, 3]`` with ``patch x patch`` tokens."""

    dim: int = 32
    depth: int = 2
    heads: int = 4
    hidden: int = 64
    patch: int = 4

    @nn.compact
    def __call__(self, x):
        p = self.patch
        x = nn.Conv(self.dim, (p, p), strides=p, padding="VALID", name="embed")(x)
        x = x.reshape(x.shape[0], -1, self.dim)
        pos = self.param("pos", nn.initializers.normal(0.02), (1, x.shape[1], self.dim))
        x = x + pos
        for i in range(self.depth):
            x = Block(self.dim, self.heads, self.hidden, name=f"block_{i}")(x)
        return nn.Dense(3, name="head")(nn.LayerNorm(name="ln_out")(x).mean(axis=1))


def shift(images: np.ndarray, seed: int) -> np.ndarray:
    """Inverted contrast plus Gaussian noise of standard deviation 1."""
    rng = np.random.default_rng(seed)
    return (-images + rng.standard_normal(images.shape)).astype(np.float32)


def main(quick: bool = False, n_members: int = 50) -> dict:
    size = 12
    x_train, y_train = bar_images(1024 if quick else 2048, size, seed=0)
    x_test, y_test = bar_images(256, size, seed=1)
    x_shift = shift(x_test, seed=2)
    model = ViT()
    params = model.init(jax.random.key(0), x_train[:1])["params"]
    tx = optax.adam(2e-3)
    opt_state = tx.init(params)

    @jax.jit
    def step(params, opt_state, x, y):
        def loss_fn(p):
            logits = model.apply({"params": p}, x)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        upd, opt_state = tx.update(grads, opt_state)
        return optax.apply_updates(params, upd), opt_state, loss

    rng = np.random.default_rng(0)
    batch, epochs = 64, 3 if quick else 8
    epoch_s = []
    for _ in range(epochs):
        start = time.perf_counter()
        order = rng.permutation(len(x_train))
        for i in range(0, len(x_train), batch):
            idx = order[i : i + batch]
            params, opt_state, loss = step(params, opt_state, x_train[idx], y_train[idx])
        jax.block_until_ready(loss)
        epoch_s.append(time.perf_counter() - start)
    variables = {"params": params}

    config = pnc.PnCConfig(n_members=n_members, rank=20, sigma=4.0, perturbation_norm="radius",
                           bootstrap_frac=0.25, ridge=1e-3)  # fmt: skip
    x_cal = x_train[:256]
    build = lambda: pnc.ensemble(  # noqa: E731
        model, x_cal, variables=variables, perturb=["block_1/fc1"], correct=["block_1/fc2"],
        config=config, key=jax.random.key(1),
    )  # fmt: skip
    start = time.perf_counter()
    ens = jax.block_until_ready(build())
    build_first_s = time.perf_counter() - start
    start = time.perf_counter()
    ens = jax.block_until_ready(build())
    build_s = time.perf_counter() - start

    logits_id, logits_ood = ens(x_test), ens(x_shift)
    scores_id, scores_ood = ood_scores(logits_id), ood_scores(logits_ood)
    base_entropy = lambda x: entropy(jax.nn.softmax(model.apply(variables, x)))  # noqa: E731
    epoch = float(np.median(epoch_s[1:]))
    forward_s = timed(jax.jit(lambda x: model.apply(variables, x)), x_test)
    shared_s = timed(ens, x_test)
    full_s = timed(ens.full_passes, x_test)
    return {
        "example": "transformer",
        "n_members": n_members,
        "base_test_accuracy": float(
            jnp.mean(jnp.argmax(model.apply(variables, x_test), -1) == y_test)
        ),
        "ensemble_test_accuracy": float(
            jnp.mean(jnp.argmax(jax.nn.softmax(logits_id).mean(0), -1) == y_test)
        ),
        "auroc_mixture_entropy": auroc(scores_id["entropy"], scores_ood["entropy"]),
        "auroc_mutual_information": auroc(
            scores_id["mutual_information"], scores_ood["mutual_information"]
        ),
        "auroc_base_entropy": auroc(base_entropy(x_test), base_entropy(x_shift)),
        "build_first_call_s": build_first_s,
        "build_s": build_s,
        "epoch_s": epoch,
        "build_over_epoch": build_s / epoch,
        "forward_s": forward_s,
        "predict_shared_s": shared_s,
        "predict_full_s": full_s,
        "shared_over_forward": shared_s / forward_s,
        "full_over_forward": full_s / forward_s,
    }


if __name__ == "__main__":
    print(json.dumps(main(quick="--quick" in sys.argv), indent=2))
