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


def aleatoric_variance(pred: Predictive) -> Array:
    """Mean of the sample variances, ``[N, D]``."""
    return jnp.mean(pred.variances, axis=0)


def epistemic_variance(pred: Predictive) -> Array:
    """Variance of the sample means across the ``S`` samples, ``[N, D]`` (population variance)."""
    return jnp.var(pred.means, axis=0)
