"""P&C on a flax.linen CNN with BatchNorm: a conv pair, mixture entropy on shifted images.

A small CNN (``Conv_0 -> BatchNorm -> ReLU -> Conv_1 -> BatchNorm -> ReLU -> mean pool -> Dense``)
is trained to tell three kinds of generated stripe images apart. P&C perturbs ``Conv_0`` and
corrects ``Conv_1`` with the patchwise ridge correction (paper, Appendix B), BatchNorm in
inference mode on its running statistics. The OOD score is the mixture entropy of the members'
softmax (``pnc.core.conv.ood_scores``) on test images against the same images under a shift (much
stronger pixel noise and inverted contrast); the single network's entropy is reported beside it.

Run: ``python examples/linen_cnn.py`` (prints JSON).
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


class CNN(nn.Module):
    """``x [N, H, W, 1] -> logits [N, 3]``; ``train=False`` (the default) is inference mode."""

    @nn.compact
    def __call__(self, x, train: bool = False):
        for features in (16, 32):
            x = nn.Conv(features, (3, 3))(x)
            x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
            x = nn.relu(x)
        return nn.Dense(3)(x.mean(axis=(1, 2)))


def shift(images: np.ndarray, seed: int) -> np.ndarray:
    """The shifted test images: inverted contrast plus Gaussian noise of standard deviation 1."""
    rng = np.random.default_rng(seed)
    return (-images + rng.standard_normal(images.shape)).astype(np.float32)


def main(quick: bool = False, n_members: int = 50) -> dict:
    size = 12
    x_train, y_train = bar_images(1024 if quick else 2048, size, seed=0)
    x_test, y_test = bar_images(256, size, seed=1)
    x_shift = shift(x_test, seed=2)
    model = CNN()
    variables = model.init(jax.random.key(0), x_train[:1])
    tx = optax.adam(3e-3)
    opt_state = tx.init(variables["params"])

    @jax.jit
    def step(variables, opt_state, x, y):
        def loss_fn(params):
            logits, updates = model.apply(
                {"params": params, "batch_stats": variables["batch_stats"]}, x, train=True,
                mutable=["batch_stats"],
            )  # fmt: skip
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), updates

        (loss, updates), grads = jax.value_and_grad(loss_fn, has_aux=True)(variables["params"])
        upd, opt_state = tx.update(grads, opt_state)
        params = optax.apply_updates(variables["params"], upd)
        return {"params": params, "batch_stats": updates["batch_stats"]}, opt_state, loss

    rng = np.random.default_rng(0)
    batch, epochs = 64, 3 if quick else 6
    epoch_s = []
    for _ in range(epochs):
        start = time.perf_counter()
        order = rng.permutation(len(x_train))
        for i in range(0, len(x_train), batch):
            idx = order[i : i + batch]
            variables, opt_state, loss = step(variables, opt_state, x_train[idx], y_train[idx])
        jax.block_until_ready(loss)
        epoch_s.append(time.perf_counter() - start)

    base_logits = model.apply(variables, x_test)
    accuracy = float(jnp.mean(jnp.argmax(base_logits, -1) == y_test))
    config = pnc.PnCConfig(n_members=n_members, rank=20, sigma=4.0, perturbation_norm="radius",
                           bootstrap_frac=0.25, ridge=1e-3)  # fmt: skip
    x_cal = x_train[:256]
    build = lambda: pnc.ensemble(  # noqa: E731
        model, x_cal, variables=variables, perturb=["Conv_0"], correct=["Conv_1"],
        config=config, key=jax.random.key(1),
    )  # fmt: skip
    start = time.perf_counter()
    ens = jax.block_until_ready(build())
    build_first_s = time.perf_counter() - start
    start = time.perf_counter()
    ens = jax.block_until_ready(build())
    build_s = time.perf_counter() - start

    logits_id, logits_ood = ens(x_test), ens(x_shift)
    pnc_auroc = auroc(ood_scores(logits_id)["entropy"], ood_scores(logits_ood)["entropy"])
    base_entropy = lambda x: entropy(jax.nn.softmax(model.apply(variables, x)))  # noqa: E731
    epoch = float(np.median(epoch_s[1:]))
    out = {
        "example": "linen_cnn",
        "n_members": n_members,
        "base_test_accuracy": accuracy,
        "ensemble_test_accuracy": float(
            jnp.mean(jnp.argmax(jax.nn.softmax(logits_id).mean(0), -1) == y_test)
        ),
        "auroc_mixture_entropy": pnc_auroc,
        "auroc_base_entropy": auroc(base_entropy(x_test), base_entropy(x_shift)),
        "auroc_mutual_information": auroc(
            ood_scores(logits_id)["mutual_information"], ood_scores(logits_ood)["mutual_information"]
        ),
        "build_first_call_s": build_first_s,
        "build_s": build_s,
        "epoch_s": epoch,
        "build_over_epoch": build_s / epoch,
        "forward_s": timed(jax.jit(lambda x: model.apply(variables, x)), x_test),
        "predict_shared_s": timed(ens, x_test),
        "predict_full_s": timed(ens.full_passes, x_test),
    }
    out["shared_over_forward"] = out["predict_shared_s"] / out["forward_s"]
    out["full_over_forward"] = out["predict_full_s"] / out["forward_s"]
    return out


if __name__ == "__main__":
    print(json.dumps(main(quick="--quick" in sys.argv), indent=2))
