"""Floating-point work of training and of the P&C build, counted from the matrix products.

These are the dominant products of :func:`pnc.train` and :func:`pnc.core.perturb_correct.build_members`
on the Gaussian MLP, counted as multiply-adds (``FLOPs = 2 * MACs``); elementwise work, the
random draws and the one-off forward pass over the calibration set are left out. With a time per
call they give a rate (GFLOP/s), so the benchmark can say how much of a build-over-train ratio
comes from the arithmetic itself and how much from how fast it runs.
"""

from __future__ import annotations

from pnc.core.mlp import MLPConfig
from pnc.core.perturb_correct import PnCConfig


def layer_widths(mlp_config: MLPConfig, in_dim: int) -> list[tuple[int, int]]:
    """``(fan_in, fan_out)`` of every affine layer, hidden layers then the head ``[w, 2 D]``."""
    widths = [in_dim, *(int(w) for w in mlp_config.hidden), 2 * mlp_config.out_dim]
    return list(zip(widths[:-1], widths[1:], strict=True))


def train_macs(mlp_config: MLPConfig, in_dim: int, steps: int, batch_size: int) -> int:
    """Multiply-adds of ``steps`` optimiser steps on batches of ``batch_size`` rows: the forward
    product of every layer and the two backward ones (input and weight gradients)."""
    per_row = sum(a * b for a, b in layer_widths(mlp_config, in_dim))
    return 3 * steps * batch_size * per_row


def pnc_build_macs(mlp_config: MLPConfig, in_dim: int, config: PnCConfig, n_cal: int) -> dict:
    """Multiply-adds of one P&C build with ``n_cal`` calibration rows (after ``calibration_size``).

    Per member, on its ``B = config.subset_size(n_cal)`` rows: the forward products up to the
    input of the last corrected layer; for each corrected layer of fan-in ``d`` and fan-out ``q``
    the Gram and right-hand side ``X_v^T [X_v, h - h_v]`` (``B (d+1)(2d+1)``) and ``(.) K``
    (``(d+1) d q``), the Cholesky factor and its inverse (``2 (d+1)^3 / 3``) and the five
    ``(d+1)^2 q`` products of the solve with one refinement step. Needs ``B > d + 1`` (the primal
    system) and a correcting configuration with ``sigma > 0``.

    Returns:
        ``{"forward", "gram", "solve", "total"}`` multiply-adds over all members.
    """
    layers = config.perturbed_layers(mlp_config.n_hidden)
    widths = layer_widths(mlp_config, in_dim)
    rows = config.subset_size(n_cal)
    corrected = [i + 1 for i in layers]
    if not config.correct or config.sigma == 0:
        raise ValueError("the count is for a correcting build with sigma > 0")
    if any(rows <= widths[j][0] + 1 for j in corrected):
        raise ValueError(f"{rows} rows per member: the count assumes the primal system (B > d + 1)")
    forward = sum(rows * a * b for a, b in widths[: corrected[-1]])
    gram = solve = 0
    for j in corrected:
        d, q = widths[j]
        gram += rows * (d + 1) * (2 * d + 1) + (d + 1) * d * q
        solve += 2 * (d + 1) ** 3 // 3 + 5 * (d + 1) ** 2 * q
    members = int(config.n_members)
    out = {"forward": forward, "gram": gram, "solve": solve}
    out = {name: members * value for name, value in out.items()}
    out["total"] = sum(out.values())
    return out
