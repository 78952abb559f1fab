"""The README's picture: P&C on a 1-D regression, with and without the correction.

A Gaussian MLP (``pnc.train``, 2 x 64) is fitted to ``y = sin(3x) + noise`` on ``x in [-2, 2]``.
From it, 20 members perturb both hidden layers along a shared random basis; the ablation stops
there, P&C then refits each perturbed layer's successor on the training inputs by ridge
regression. The left panel draws the ablation's member means, the right panel P&C's: corrected,
the members agree where the data are and fan out away from them.

Run: ``python examples/one_d.py [--out docs/images/one_d.png]`` (needs matplotlib, which the
``[workflow]`` extra installs). Prints JSON: the members' spread on the data and away from them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import jax
import numpy as np

import pnc

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "images" / "one_d.png"


def members_on_a_line(steps: int = 3000, n_members: int = 20) -> dict:
    """Train, build P&C and its ablation, predict on ``[-6, 6]``.

    Returns ``x`` [200], the data ``x_train``/``y_train`` [N], the members' means ``corrected`` and
    ``perturbed`` [M, 200] in the targets' units, and the members' standard deviation of the
    mean on the data (``|x| <= 2``) and away from them (``|x| >= 4``) for both.
    """
    rng = np.random.default_rng(0)
    x_train = rng.uniform(-2, 2, (400, 1)).astype(np.float32)
    y_train = (np.sin(3 * x_train) + 0.1 * rng.standard_normal(x_train.shape)).astype(np.float32)
    model, _ = pnc.train(
        x_train,
        y_train,
        key=jax.random.key(0),
        model_config=pnc.MLPConfig(out_dim=1, hidden=(64, 64)),
        train_config=pnc.TrainConfig(steps=steps),
    )
    x = np.linspace(-6, 6, 200, dtype=np.float32)[:, None]
    config = pnc.PnCConfig(n_members=n_members, rank=20, sigma=4.0, bootstrap_frac=0.3)
    result = {"x": x[:, 0], "x_train": x_train[:, 0], "y_train": y_train[:, 0]}
    x_cal = model.x_norm.transform(x_train)
    x_test = model.x_norm.transform(x)
    for name, correct in (("corrected", True), ("perturbed", False)):
        members = pnc.build_members(
            model.params,
            model.config,
            x_cal,
            dataclasses.replace(config, correct=correct),
            key=jax.random.key(1),  # the same perturbations for both
        )
        means = np.asarray(pnc.predict_members(members, x_test, model.config).means)[..., 0]
        means = means * model.y_norm.std[0] + model.y_norm.mean[0]  # targets' units
        spread = means.std(axis=0)
        result[name] = means
        result[f"{name}_spread_on_data"] = float(spread[np.abs(x[:, 0]) <= 2].mean())
        result[f"{name}_spread_off_data"] = float(spread[np.abs(x[:, 0]) >= 4].mean())
    return result


def draw(result: dict, out: Path) -> None:
    """The two panels, ablation left and P&C right, as a PNG at ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), sharey=True, dpi=120)
    panels = (("perturbed", "perturbed only"), ("corrected", "perturbed and corrected (P&C)"))
    for ax, (name, title) in zip(axes, panels, strict=True):
        ax.axvspan(-2, 2, color="0.93", zorder=0)
        ax.plot(result["x"], result[name].T, color="tab:orange", lw=0.8, alpha=0.6)
        ax.scatter(result["x_train"], result["y_train"], s=3, color="0.3", zorder=3)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("x (shaded: where the training data are)")
        ax.set_ylim(-3, 3)
    axes[0].set_ylabel("member means")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, metadata={"Software": None})
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="the PNG to write")
    parser.add_argument("--steps", type=int, default=3000, help="training steps")
    args = parser.parse_args(argv)
    result = members_on_a_line(steps=args.steps)
    draw(result, args.out)
    summary = {k: v for k, v in result.items() if k.endswith(("_on_data", "_off_data"))}
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
