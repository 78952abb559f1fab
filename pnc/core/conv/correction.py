"""The convolutional correction: patchwise ridge regression for ``Conv_2`` (paper, Appendix B.3-B.4).

With ``Y`` the patchwise design of the (perturbed) input of ``Conv_2`` (:func:`pnc.core.conv.patches.unfold`,
``[R, D]`` with ``D = C_in k^2``), ``Ybar = [1, Y]`` (``[R, 1 + D]``), the base model's ``Conv_2``
outputs ``T_orig`` (``[R, C_out]``) and ``Theta = [b; mat(W)]`` (bias row first), the correction
(eq. conv-correction) is::

    min_Theta ||Ybar Theta - T_orig||_F^2 + lambda ||Theta - Theta_0||_F^2,   Theta_0 = [0; mat(W_2)],

whose minimiser is (eqs. conv-normal-eqs, conv-ridge-soln)::

    H = Ybar^T Ybar,   beta = Ybar^T (T_orig - Y mat(W_2)),   Theta - Theta_0 = (H + lambda I)^{-1} beta.

``H`` and ``beta`` are accumulated over calibration chunks in one ``lax.scan`` over a stacked,
mask-padded chunk axis (eq. conv-chunk-update, :func:`accumulate_normal_equations`), so memory is
bounded by the chunk, not the calibration subset. When the subset has no more patch rows than
``H`` has columns, the same minimiser is computed from the ``R x R`` dual system
``Theta - Theta_0 = Ybar^T (Ybar Ybar^T + lambda I)^{-1} (T_orig - Y mat(W_2))``
(:func:`dual_ridge_solution`), which is smaller and, at ``lambda = 0``, interpolates the targets.
Both use the fully connected correction's SPD solver (Jacobi-scaled blocked Cholesky, one step of
iterative refinement; :func:`pnc.core.perturb_correct.ridge_correction`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp

from pnc.core._linalg import spd_solve
from pnc.core.conv.patches import Padding, kernel_from_matrix, kernel_matrix, unfold, with_ones
from pnc.core.perturb_correct import ridge_solve

Array = jax.Array

SYSTEMS = ("auto", "primal", "dual")
"""How the ridge system is solved: ``primal`` (chunked normal equations, ``(1 + D)^2``),
``dual`` (``R x R``), ``auto`` (``dual`` iff ``R <= 1 + D``, as the fully connected correction)."""


def stack_chunks(n_rows: int, chunk_size: int) -> tuple[Array, Array]:
    """Row indices and mask of ``n_rows`` rows split into chunks, the last one padded.

    Returns:
        ``(index [C, b], mask [C, b])`` with ``C = ceil(n_rows / b)``, ``b = min(chunk_size,
        n_rows)``; padded slots hold index 0 and mask 0.
    """
    b = max(1, min(int(chunk_size), int(n_rows)))
    n_chunks = math.ceil(n_rows / b)
    flat = jnp.arange(n_chunks * b)
    mask = (flat < n_rows).astype(jnp.float32)
    return jnp.where(flat < n_rows, flat, 0).reshape(n_chunks, b), mask.reshape(n_chunks, b)


def design_rows(u: Array, kernel2: Array, stride: int, padding: Padding) -> Array:
    """``Y``: the patchwise design of ``Conv_2``'s input ``u [B, H, W, C_in]``, ``[B H' W', D]``."""
    p = unfold(u, kernel2.shape[:2], stride, padding)
    return p.reshape(-1, p.shape[-1])


def chunk_normal_equations(
    u: Array, targets: Array, mask: Array, kernel2: Array, stride: int, padding: Padding
) -> tuple[Array, Array]:
    """One chunk's contribution to ``(H, beta)`` (eq. conv-chunk-update).

    Args:
        u: input of ``Conv_2`` on the chunk (perturbed), ``[b, H, W, C_in]``.
        targets: the base model's ``Conv_2`` outputs on the same images, ``[b, H', W', C_out]``.
        mask: ``[b]``, 1 for real images and 0 for padding.
        kernel2: ``W_2`` (HWIO, ``[k, k, C_in, C_out]``).
        stride, padding: those of ``Conv_2``.

    Returns:
        ``(Ybar^T Ybar [1 + D, 1 + D], Ybar^T (T - Y mat(W_2)) [1 + D, C_out])`` over unmasked rows.
    """
    y = design_rows(u, kernel2, stride, padding)
    per_row = jnp.repeat(mask.astype(y.dtype), y.shape[0] // mask.shape[0])
    residual = targets.reshape(y.shape[0], -1) - y @ kernel_matrix(kernel2)
    y_bar = with_ones(y) * per_row[:, None]
    return y_bar.T @ y_bar, y_bar.T @ residual


def accumulate_normal_equations(
    design: Callable[[Array], Array],
    inputs: Array,
    targets: Array,
    mask: Array,
    kernel2: Array,
    stride: int,
    padding: Padding,
) -> tuple[Array, Array]:
    """``(H, beta)`` of eq. conv-normal-eqs summed over stacked chunks in one ``lax.scan``.

    Args:
        design: maps a chunk of ``inputs`` to ``Conv_2``'s input on it (e.g. the perturbed
            ``ReLU(BN_2(Conv_1(.)))``); it runs inside the scan, so only one chunk's design exists
            at a time.
        inputs: ``[C, b, ...]`` (a pytree of such arrays is allowed).
        targets: ``[C, b, H', W', C_out]``.
        mask: ``[C, b]``.
        kernel2, stride, padding: ``Conv_2``.

    Returns:
        ``(H [1 + D, 1 + D], beta [1 + D, C_out])``.
    """
    d1 = 1 + math.prod(kernel2.shape[:3])
    dtype = kernel2.dtype
    init = (jnp.zeros((d1, d1), dtype), jnp.zeros((d1, kernel2.shape[3]), dtype))

    def step(carry, chunk):
        x, t, m = chunk
        h, b = chunk_normal_equations(design(x), t, m, kernel2, stride, padding)
        return (carry[0] + h, carry[1] + b), None

    (gram, beta), _ = jax.lax.scan(step, init, (inputs, targets, mask))
    return gram, beta


def ridge_solution(
    gram: Array, beta: Array, kernel2: Array, ridge: float | Array
) -> tuple[Array, Array]:
    """``Theta = Theta_0 + (H + lambda I)^{-1} beta`` (eq. conv-ridge-soln), as ``(kernel, bias)``.

    Returns:
        ``(W_2 + reshape(delta[1:]) [k, k, C_in, C_out], delta[0] [C_out])``.
    """
    delta = ridge_solve(gram, beta, ridge)
    return kernel2 + kernel_from_matrix(delta[1:], kernel2.shape), delta[0]


def dual_ridge_solution(
    y: Array, residual: Array, row_mask: Array, kernel2: Array, ridge: float | Array
) -> tuple[Array, Array]:
    """The same minimiser from the dual: ``Theta - Theta_0 = Ybar^T (Ybar Ybar^T + lambda I)^{-1} E``.

    Args:
        y: design ``Y`` ``[R, D]``.
        residual: ``E = T_orig - Y mat(W_2)``, ``[R, C_out]``.
        row_mask: ``[R]``, 0 for padded rows (they get a unit diagonal and contribute nothing).
        kernel2: ``W_2``.
        ridge: ``lambda >= 0``; at 0 (and ``R <= 1 + D``) the corrected ``Conv_2`` reproduces the
            targets on every unmasked row.

    Returns:
        ``(kernel [k, k, C_in, C_out], bias [C_out])``.
    """
    w = row_mask.astype(y.dtype)
    y_bar = with_ones(y) * w[:, None]
    gram = y_bar @ y_bar.T + jnp.diag(1.0 - w + jnp.asarray(ridge, y.dtype))
    delta = y_bar.T @ spd_solve(gram, residual * w[:, None])
    return kernel2 + kernel_from_matrix(delta[1:], kernel2.shape), delta[0]


def use_dual(system: str, n_rows: int, kernel2_shape) -> bool:
    """Whether :data:`SYSTEMS` ``system`` solves the dual for ``n_rows`` patch rows."""
    if system not in SYSTEMS:
        raise ValueError(f"system must be one of {SYSTEMS}, got {system!r}")
    return system == "dual" or (system == "auto" and n_rows <= 1 + math.prod(kernel2_shape[:3]))


def conv_ridge_correction(
    u: Array,
    targets: Array,
    kernel2: Array,
    ridge: float | Array,
    *,
    stride: int = 1,
    padding: Padding = ((1, 1), (1, 1)),
    chunk_size: int = 64,
    system: str = "primal",
) -> tuple[Array, Array]:
    """Refit ``Conv_2`` and a new bias on given inputs (eq. conv-correction), for any caller.

    Args:
        u: (perturbed) inputs of ``Conv_2``, ``[N, H, W, C_in]``.
        targets: the base model's ``Conv_2`` outputs, ``[N, H', W', C_out]``.
        kernel2: ``W_2`` (HWIO).
        ridge: ``lambda >= 0``.
        stride, padding: ``Conv_2``'s.
        chunk_size: images per chunk of the primal accumulation.
        system: one of :data:`SYSTEMS`.

    Returns:
        ``(kernel [k, k, C_in, C_out], bias [C_out])``.
    """
    n = u.shape[0]
    n_rows = n * targets.shape[1] * targets.shape[2]
    if use_dual(system, n_rows, kernel2.shape):
        y = design_rows(u, kernel2, stride, padding)
        residual = targets.reshape(n_rows, -1) - y @ kernel_matrix(kernel2)
        return dual_ridge_solution(y, residual, jnp.ones((n_rows,), y.dtype), kernel2, ridge)
    index, mask = stack_chunks(n, chunk_size)
    gram, beta = accumulate_normal_equations(
        lambda x: x, u[index], targets[index], mask, kernel2, stride, padding
    )
    return ridge_solution(gram, beta, kernel2, ridge)
