"""The one predictive interface shared by every method: a stack of Gaussian predictive samples.

Every method (P&C, its uncorrected ablation and the five baselines) turns inputs ``x [N, in]`` into
``S`` Gaussian predictions, held as :class:`Predictive` with ``means`` and ``variances`` of shape
``[S, N, D]`` in standardised target units. Evaluation only ever sees this object.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

Array = jax.Array


class Predictive(NamedTuple):
    """``S`` Gaussian predictive samples: ``means``, ``variances`` each ``[S, N, D]``."""

    means: Array
    variances: Array

    @property
    def n_samples(self) -> int:
        return int(self.means.shape[0])


def mixture(pred: Predictive) -> tuple[Array, Array]:
    """Moment-matched uniform mixture (Deep Ensembles' combination rule).

    Returns:
        ``(mean, variance)``, each ``[N, D]``: the mean of the sample means, and the mean of the
        sample variances (aleatoric) plus the variance of the sample means (epistemic).
    """
    mean = jnp.mean(pred.means, axis=0)
    return mean, jnp.mean(pred.variances, axis=0) + jnp.var(pred.means, axis=0)


def gaussian_draws(pred: Predictive, key: Array) -> Predictive:
    """Replace every Gaussian sample by one draw from it (the authors' "sample" predictive).

    ``y_s = mean_s + sqrt(var_s) * eps_s`` with ``eps ~ N(0, I)`` of shape ``[S, N, D]`` drawn from
    ``key``; the result holds the draws as point masses (``means = y``, ``variances = 0``), so
    :func:`mixture` gives the mean and the population variance (``ddof = 0``) of the ``S`` draws
    and :func:`epistemic_variance` equals that variance.

    Args:
        pred: ``S`` Gaussian samples, means/variances ``[S, N, D]``.
        key: PRNG key of the draws.

    Returns:
        :class:`Predictive` with ``means`` the draws and ``variances`` zeros, each ``[S, N, D]``.
    """
    eps = jax.random.normal(key, pred.means.shape, pred.means.dtype)
    draws = pred.means + jnp.sqrt(pred.variances) * eps
    return Predictive(draws, jnp.zeros_like(draws))


def aleatoric_variance(pred: Predictive) -> Array:
    """Mean of the sample variances, ``[N, D]``."""
    return jnp.mean(pred.variances, axis=0)


def epistemic_variance(pred: Predictive) -> Array:
    """Variance of the sample means across the ``S`` samples, ``[N, D]`` (population variance)."""
    return jnp.var(pred.means, axis=0)
