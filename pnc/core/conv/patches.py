"""The patchwise view of a 2-D convolution (paper, Appendix B.1, eq. conv-as-matmul).

A convolution of NHWC feature maps ``X [N, H, W, C_in]`` with a kernel of side ``k``, stride ``s``
and ``C_out`` output channels is a matrix product of the unfolded input with the kernel matrix::

    flat(Conv(X, W)) = P_s(X) mat(W_OIHW),

where :func:`unfold` is ``P_s`` (one row per output position ``(n, h', w')``, its ``C_in k^2``
entries ordered ``(c_in, u, v)``, channel slowest, as in OIHW) and :func:`kernel_matrix` is
``mat(W_OIHW)`` (``[C_in k^2, C_out]``, column ``c_out`` the flattened ``W_OIHW[c_out]``). Kernels
are stored in Flax's HWIO layout; the permutation to OIHW is done only here. A bias broadcast over
positions is a column of ones prepended to ``P_s(X)`` (:func:`with_ones`).

``padding`` is anything ``lax.conv_general_dilated`` accepts: ``"SAME"``, ``"VALID"`` or one
``(low, high)`` pair per spatial axis.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
from jax import lax

Array = jax.Array
Padding = str | Sequence[tuple[int, int]]

_DIMENSIONS = ("NHWC", "OIHW", "NHWC")


def _pairs(value: int | Sequence[int]) -> tuple[int, int]:
    return (int(value), int(value)) if isinstance(value, int) else tuple(int(v) for v in value)


def unfold(
    x: Array, kernel_size: int | Sequence[int], stride: int | Sequence[int], padding: Padding
) -> Array:
    """``P_s(X)``: the receptive field of every output position as one row.

    Args:
        x: feature maps ``[N, H, W, C_in]``.
        kernel_size: ``k`` (or ``(k_h, k_w)``).
        stride: ``s`` (or ``(s_h, s_w)``).
        padding: ``"SAME"``, ``"VALID"`` or ``((lo, hi), (lo, hi))``.

    Returns:
        patches ``[N, H', W', C_in k^2]``, entries ordered ``(c_in, u, v)`` (channel slowest);
        reshape to ``[N H' W', C_in k^2]`` for the design matrix.
    """
    if x.ndim != 4:
        raise ValueError(f"x must be NHWC [N, H, W, C], got shape {x.shape}")
    return lax.conv_general_dilated_patches(
        x,
        filter_shape=_pairs(kernel_size),
        window_strides=_pairs(stride),
        padding=padding if isinstance(padding, str) else tuple(tuple(p) for p in padding),
        dimension_numbers=_DIMENSIONS,
    )


def kernel_matrix(kernel: Array) -> Array:
    """``mat(W_OIHW)``: an HWIO kernel ``[k_h, k_w, C_in, C_out]`` as ``[C_in k_h k_w, C_out]``."""
    if kernel.ndim != 4:
        raise ValueError(f"kernel must be HWIO [k_h, k_w, C_in, C_out], got shape {kernel.shape}")
    return jnp.transpose(kernel, (2, 0, 1, 3)).reshape(-1, kernel.shape[3])


def kernel_from_matrix(matrix: Array, shape: Sequence[int]) -> Array:
    """Inverse of :func:`kernel_matrix`: ``[C_in k_h k_w, C_out]`` back to HWIO ``shape``."""
    k_h, k_w, c_in, c_out = (int(d) for d in shape)
    if matrix.shape != (c_in * k_h * k_w, c_out):
        raise ValueError(
            f"matrix of shape {matrix.shape} does not fit an HWIO kernel {tuple(shape)}"
        )
    return jnp.transpose(matrix.reshape(c_in, k_h, k_w, c_out), (1, 2, 0, 3))


def with_ones(rows: Array) -> Array:
    """``Ybar = [1, Y]``: the bias-augmented design, ``[R, D]`` -> ``[R, 1 + D]``."""
    return jnp.concatenate([jnp.ones(rows.shape[:-1] + (1,), rows.dtype), rows], axis=-1)


def conv(x: Array, kernel: Array, stride: int | Sequence[int], padding: Padding) -> Array:
    """``Conv(X, W)`` for NHWC ``x`` and an HWIO ``kernel`` (what ``flax.linen.Conv`` computes)."""
    return lax.conv_general_dilated(
        x,
        kernel,
        window_strides=_pairs(stride),
        padding=padding if isinstance(padding, str) else tuple(tuple(p) for p in padding),
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
    )


def conv_as_matmul(x: Array, kernel: Array, stride: int | Sequence[int], padding: Padding) -> Array:
    """``P_s(X) mat(W_OIHW)`` reshaped to ``[N, H', W', C_out]``: equals :func:`conv` (eq.
    conv-as-matmul)."""
    p = unfold(x, kernel.shape[:2], stride, padding)
    return (p.reshape(-1, p.shape[-1]) @ kernel_matrix(kernel)).reshape(
        p.shape[:3] + (kernel.shape[3],)
    )
