"""What the methods share around prediction: input checks, standardisers, chunked sampling and
the rules that turn ``S`` Gaussians into a predictive.

All arrays handled by a method are in *standardised* units: :func:`standardise` gives the
standardisers of the raw training data (stored in ``run.model``), :func:`check_inputs` checks the
standardised inputs a method predicts on, :func:`sample_predictive` evaluates ``S`` weight samples
in chunks, and :func:`apply_predictive_rule` applies a method's ``predictive`` option
(:data:`PREDICTIVE_RULES`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pnc.core.predictive import Predictive, gaussian_draws
from pnc.core.training import Standardizer, TrainConfig, standardizers

Array = jax.Array


# ----------------------------------------------------------------------------- data


def standardise(
    x: np.ndarray, y: np.ndarray, out_dim: int, train_config: TrainConfig
) -> tuple[Standardizer, Standardizer]:
    """The input/target standardisers of raw training data ``x [N, in]``, ``y [N, D]``
    (identities when ``train_config.standardize`` is false)."""
    x = np.asarray(x)
    y = np.asarray(y)
    if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must be [N, *] with the same N, got {x.shape} and {y.shape}")
    if y.shape[1] != out_dim:
        raise ValueError(f"model out_dim {out_dim} != target dim {y.shape[1]}")
    return standardizers(x, y, train_config)


def check_inputs(x: Array, in_dim: int) -> Array:
    """Standardised inputs as float32 ``[N, in_dim]`` (clear error otherwise)."""
    x = jnp.asarray(x, jnp.float32)
    if x.ndim != 2 or x.shape[1] != in_dim:
        raise ValueError(f"expected standardised inputs of shape [N, {in_dim}], got {x.shape}")
    return x


# ----------------------------------------------------------------------------- sampling


def sample_predictive(
    sample_fn: Callable[[Any], tuple[Array, Array]], xs: Any, chunk_size: int
) -> Predictive:
    """Evaluate ``sample_fn`` on every leading slice of ``xs`` in chunks of ``chunk_size``.

    Inside a chunk the samples are computed with ``vmap``; chunks run one after another
    (``lax.map``), so at most ``chunk_size`` weight samples exist at once.

    Args:
        sample_fn: maps one sample's inputs (a key, a coordinate vector, ...) to
            ``(mean [N, D], var [N, D])``.
        xs: pytree whose leaves have a leading sample axis ``S``.
        chunk_size: samples evaluated together.

    Returns:
        :class:`Predictive` with ``means``/``variances`` of shape ``[S, N, D]``.
    """
    means, variances = jax.lax.map(sample_fn, xs, batch_size=chunk_size)
    return Predictive(means, variances)


# ----------------------------------------------------------------------------- predictive rules


PREDICTIVE_RULES = ("mixture", "sample")
"""How a method's ``S`` Gaussians become its predictive (the ``predictive`` option).

``mixture``: the ``S`` Gaussians themselves, combined by :func:`pnc.mixture` (Lakshminarayanan et
al.); ``sample``: one draw from each, as point masses (:func:`pnc.core.predictive.gaussian_draws`), so
the predictive mean and variance are those of the ``S`` draws (the authors' code)."""


def apply_predictive_rule(pred: Predictive, rule: str, key: Array) -> Predictive:
    """``pred`` itself (``mixture``) or one draw per sample from ``key`` (``sample``)."""
    if rule == "mixture":
        return pred
    if rule == "sample":
        return gaussian_draws(pred, key)
    raise ValueError(f"predictive must be one of {', '.join(PREDICTIVE_RULES)}; got {rule!r}")
