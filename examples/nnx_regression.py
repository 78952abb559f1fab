"""P&C on a flax.nnx MLP regressor: epistemic variance inside and outside the calibration range.

A Gaussian MLP (mean and variance heads) is trained on ``y = sin(2x) + noise`` for
``x in [-2, 2]``; P&C perturbs ``linear1`` and ``linear2`` and corrects ``linear2`` and ``head``
on the training inputs. The ensemble's epistemic variance (the variance of the member means) is
small where the calibration data lie and grows outside them.

Run: ``python examples/nnx_regression.py`` (prints JSON).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import timed  # noqa: E402

import pnc  # noqa: E402


class Regressor(nnx.Module):
    """``x [N, 1] -> (mean [N, 1], variance [N, 1])``."""

    def __init__(self, width: int, rngs: nnx.Rngs):
        self.linear1 = nnx.Linear(1, width, rngs=rngs)
        self.linear2 = nnx.Linear(width, width, rngs=rngs)
        self.head = nnx.Linear(width, 2, rngs=rngs)

    def __call__(self, x):
        h = jax.nn.relu(self.linear2(jax.nn.relu(self.linear1(x))))
        out = self.head(h)
        return out[:, :1], jax.nn.softplus(out[:, 1:]) + 1e-4


def nll(model, x, y):
    mean, var = model(x)
    return jnp.mean(0.5 * (jnp.log(var) + jnp.square(y - mean) / var))


@nnx.jit
def train_step(model, optimizer, x, y):
    loss, grads = nnx.value_and_grad(nll)(model, x, y)
    optimizer.update(model, grads)
    return loss


def main(quick: bool = False, n_members: int = 50) -> dict:
    rng = np.random.default_rng(0)
    x = rng.uniform(-2.0, 2.0, (512, 1)).astype(np.float32)
    y = (np.sin(2 * x) + 0.1 * rng.standard_normal(x.shape)).astype(np.float32)
    model = Regressor(64, nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(3e-3), wrt=nnx.Param)
    batch, epochs = 64, 40 if quick else 150
    epoch_s = []
    for _epoch in range(epochs):
        start = time.perf_counter()
        order = rng.permutation(len(x))
        for i in range(0, len(x), batch):
            loss = train_step(model, optimizer, x[order[i : i + batch]], y[order[i : i + batch]])
        jax.block_until_ready(loss)
        epoch_s.append(time.perf_counter() - start)

    config = pnc.PnCConfig(n_members=n_members, rank=10, sigma=2.0, perturbation_norm="radius",
                           bootstrap_frac=0.3, ridge=1e-3)  # fmt: skip
    build = lambda: pnc.ensemble(  # noqa: E731
        model, x, perturb=["linear1", "linear2"], correct=["linear2", "head"], config=config,
        key=jax.random.key(0),
    )  # fmt: skip
    start = time.perf_counter()
    ens = jax.block_until_ready(build())
    build_first_s = time.perf_counter() - start
    start = time.perf_counter()
    ens = jax.block_until_ready(build())
    build_s = time.perf_counter() - start

    inside = np.linspace(-2.0, 2.0, 201, dtype=np.float32)[:, None]
    outside = np.concatenate([np.linspace(-5, -3, 101), np.linspace(3, 5, 101)])
    outside = outside.astype(np.float32)[:, None]
    epi = {}
    for name, xs in (("inside", inside), ("outside", outside)):
        _, var = pnc.mixture(pnc.Predictive(*ens(xs)))
        epi[name] = float(jnp.mean(pnc.epistemic_variance(pnc.Predictive(*ens(xs)))))
        assert bool(jnp.all(var > 0))
    x_eval = jnp.asarray(np.linspace(-5, 5, 1000, dtype=np.float32)[:, None])
    out = {
        "example": "nnx_regression",
        "n_members": n_members,
        "train_final_nll": float(loss),
        "epistemic_var_inside": epi["inside"],
        "epistemic_var_outside": epi["outside"],
        "outside_over_inside": epi["outside"] / epi["inside"],
        "build_first_call_s": build_first_s,
        "build_s": build_s,
        "epoch_s": float(np.median(epoch_s[1:])),
        "build_over_epoch": build_s / float(np.median(epoch_s[1:])),
        "forward_s": timed(jax.jit(lambda xx: model(xx)), x_eval),
        "predict_shared_s": timed(ens, x_eval),
        "predict_full_s": timed(ens.full_passes, x_eval),
    }
    out["shared_over_forward"] = out["predict_shared_s"] / out["forward_s"]
    out["full_over_forward"] = out["predict_full_s"] / out["forward_s"]
    return out


if __name__ == "__main__":
    print(json.dumps(main(quick="--quick" in sys.argv), indent=2))
