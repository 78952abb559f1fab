"""SWAG's Gaussian over the flattened weights (Maddox et al., 2019) and its samplers, the one place
both studies take them from: the MuJoCo study's SWAG (:mod:`pnc.methods.regression.swag`) and the
CIFAR study's (:mod:`pnc.methods.ood.swag_detector`).

With ``diag`` the per-weight variance of the collected iterates and ``D`` the ``[K, P]`` matrix of
their deviations from the running mean, SWAG's Gaussian is ``N(mean, (diag + D^T D / (K - 1)) /
2)``, and a sample is

    theta = mean + sqrt(diag / 2) z1 + D^T z2 / sqrt(2 (K - 1)),   z1 ~ N(0, I_P), z2 ~ N(0, I_K).

The two studies turn the key into ``z1, z2`` differently, evaluate the sum in a different order
and differ at the edges. A single function cannot give both studies' samples bit for bit, so each
rule is a function here, kept exactly as it produced the stored results:

- :func:`swag_sample` (MuJoCo): ``z1, z2`` are one normal vector ``[P + K]`` drawn from the key
  (``z1`` first); the diagonal enters as ``std = sqrt(max(diag, 0))``; ``scale`` multiplies the
  standard deviation of both terms, ``mean + scale sqrt(1/2) (std z1 + D^T z2 / sqrt(K - 1))``;
  ``K = 0`` is the diagonal sampler and ``K = 1`` an error.
- :func:`swag_sample_split_keys` (CIFAR): ``z1`` and ``z2`` come from the two keys of
  ``jax.random.split(key)``; ``diag`` is floored at ``1e-30``; no scale; ``mean + sqrt(diag / 2)
  z1 + D^T z2 / sqrt(2 max(K - 1, 1))`` (so ``K = 1`` divides by ``sqrt(2)``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array

#: The floor of the diagonal variance in :func:`swag_sample_split_keys`.
VARIANCE_FLOOR = 1e-30


def swag_sample(mean: Array, std: Array, deviations: Array, scale: float, key: Array) -> Array:
    """One flat sample ``mean + scale sqrt(1/2) (std * z1 + D^T z2 / sqrt(K - 1))``, ``[P]``
    (the MuJoCo study's rule).

    Args:
        mean: ``[P]``; std: ``diag^{1/2}``, ``[P]``; deviations: ``D``, ``[K, P]`` (``K = 0``: the
            diagonal sampler; otherwise ``K >= 2``); scale: multiplier of the standard deviation.

    The covariance of the samples is ``scale^2 (diag + D^T D / (K - 1)) / 2``.
    """
    n_params, rank = mean.shape[0], deviations.shape[0]
    if rank == 1:
        raise ValueError("the low-rank SWAG term needs at least 2 deviation columns, got 1")
    z = jax.random.normal(key, (n_params + rank,), mean.dtype)
    z1, z2 = z[:n_params], z[n_params:]
    noise = std * z1
    if rank:
        noise = noise + z2 @ deviations / jnp.sqrt(rank - 1.0)
    return mean + scale * jnp.sqrt(0.5) * noise


def swag_sample_split_keys(mean: Array, var: Array, deviations: Array, key: Array) -> Array:
    """One flat sample ``mean + sqrt(var / 2) z1 + D^T z2 / sqrt(2 max(K - 1, 1))``, ``[P]`` (the
    CIFAR study's rule), with ``z1`` and ``z2`` drawn from the two keys of
    ``jax.random.split(key)``.

    Args:
        mean: ``[P]``; var: the diagonal variance ``[P]`` (floored at :data:`VARIANCE_FLOOR`);
            deviations: ``D``, ``[K, P]``, ``K >= 1``.
    """
    var = jnp.clip(var, VARIANCE_FLOOR, None)
    k1, k2 = jax.random.split(key)
    z1 = jax.random.normal(k1, mean.shape)
    z2 = jax.random.normal(k2, (deviations.shape[0],))
    return (
        mean
        + jnp.sqrt(var / 2.0) * z1
        + deviations.T @ z2 / jnp.sqrt(2.0 * max(deviations.shape[0] - 1, 1))
    )
