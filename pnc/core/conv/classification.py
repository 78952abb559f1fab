"""The classification predictive of an ensemble and its OOD scores (paper, Section 5.4).

Member ``m``'s predictive is ``p_m = softmax(logits_m / T)`` with one temperature ``T`` shared by
all members (fitted on ID validation data, :func:`fit_temperature`); the ensemble predicts the
mixture ``pbar = mean_m p_m``. OOD scores (larger = more likely OOD unless noted):

- mixture entropy ``H[pbar]`` (the paper's score for P&C);
- maximum softmax probability ``max_k pbar_k`` (MSP; *smaller* = more likely OOD);
- mutual information ``H[pbar] - mean_m H[p_m]`` (the disagreement part of the entropy).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array


def member_probabilities(logits: Array, temperature: float | Array = 1.0) -> Array:
    """``p_m = softmax(logits_m / T)``, ``[M, N, K]``."""
    return jax.nn.softmax(jnp.asarray(logits, jnp.float32) / temperature, axis=-1)


def mixture_probabilities(logits: Array, temperature: float | Array = 1.0) -> Array:
    """``pbar = mean_m p_m``, ``[N, K]``."""
    return jnp.mean(member_probabilities(logits, temperature), axis=0)


def entropy(p: Array) -> Array:
    """``-sum_k p_k log p_k`` over the last axis (``0 log 0 = 0``)."""
    return -jnp.sum(jnp.where(p > 0, p * jnp.log(jnp.where(p > 0, p, 1.0)), 0.0), axis=-1)


def ood_scores(logits: Array, temperature: float | Array = 1.0) -> dict[str, Array]:
    """``{"entropy", "msp", "mutual_information"}``, each ``[N]``, from member logits ``[M, N, K]``."""
    p = member_probabilities(logits, temperature)
    pbar = jnp.mean(p, axis=0)
    h = entropy(pbar)
    return {
        "entropy": h,
        "msp": jnp.max(pbar, axis=-1),
        "mutual_information": h - jnp.mean(entropy(p), axis=0),
    }


def mixture_nll(logits: Array, labels: Array, temperature: float | Array = 1.0) -> Array:
    """Mean negative log-likelihood of the mixture, ``-mean_n log pbar_{y_n}``."""
    logp = jax.nn.log_softmax(jnp.asarray(logits, jnp.float32) / temperature, axis=-1)
    log_mix = jax.scipy.special.logsumexp(logp, axis=0) - math.log(logp.shape[0])  # [N, K]
    return -jnp.mean(jnp.take_along_axis(log_mix, jnp.asarray(labels)[:, None], axis=1))


def fit_temperature(
    logits: Array, labels: Array, *, lower: float = 1e-2, upper: float = 1e2, iterations: int = 60
) -> float:
    """The shared temperature minimising :func:`mixture_nll`: golden-section search over
    ``log T`` in ``[log lower, log upper]`` (the authors' protocol: ``[1e-2, 1e2]``)."""
    nll = jax.jit(lambda log_t: mixture_nll(logits, labels, jnp.exp(log_t)))
    a, b = math.log(lower), math.log(upper)
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = float(nll(c)), float(nll(d))
    for _ in range(iterations):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = float(nll(c))
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = float(nll(d))
    return float(np.exp((a + b) / 2.0))
