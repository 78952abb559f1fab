"""SWAG (Maddox et al., 2019): a Gaussian fitted to the iterates of the optimiser.

The moments are collected during the shared ``base`` run (:mod:`pnc.methods.base_run`; the
authors' schedule: every step from step 1,000): running first and second moments of the flattened
parameters and the last ``K`` deviation columns ``theta_i - mean_i``. Samples are

    theta = mean + sqrt(scale) * (diag^{1/2} z1 + D z2 / sqrt(K - 1)),   z1 ~ N(0, I_P), z2 ~ N(0, I_K)

with ``diag = clamp(second moment - mean^2, 0)`` and ``D`` the ``[P, K]`` deviation matrix, i.e. the
covariance ``scale * (diag + D D^T / (K - 1))``. Maddox et al. write the covariance as
``(diag + D D^T / (K - 1)) / 2``; here that factor 1/2 is part of ``scale`` (``scale = 0.5`` is
their sampler), which is swept post hoc over {0.1, 0.3, 1, 3, 10} (paper, Appendix C).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from pnc.methods.base import (
    MethodBase,
    TrainingRun,
    TrainingSpec,
    check_inputs,
    check_positive,
    sample_predictive,
)
from pnc.methods.base_run import base_spec, swag_statistics, train_base
from pnc.mlp import MLPConfig, Params, forward
from pnc.predictive import Predictive
from pnc.train import TrainedModel

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class SWAGConfig:
    """SWAG hyperparameters (paper, Appendix C).

    Attributes:
        scale: covariance scale (post hoc; grid {0.1, 0.3, 1, 3, 10}).
        rank: number of deviation columns used, the most recent ones (at most the ``K``
            collected).
        n_samples: ``S`` weight samples.
        chunk_size: samples evaluated together in :meth:`SWAG.predict`.
    """

    scale: float = 1.0
    rank: int = 20
    n_samples: int = 100
    chunk_size: int = 25

    def __post_init__(self) -> None:
        check_positive(self, "scale", "rank", "n_samples", "chunk_size")


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=("mean", "std", "deviations", "model"),
    meta_fields=("scale", "n_samples", "chunk_size"),
)
@dataclasses.dataclass(frozen=True)
class SWAGPosterior:
    """Diagonal-plus-low-rank Gaussian over the flattened parameters (a pytree of its arrays).

    Attributes:
        mean: ``[P]``, flattened in ``ravel_pytree`` order of ``model.params``.
        std: ``diag^{1/2}``, ``[P]``.
        deviations: the ``K`` most recent deviation columns, most recent first, ``[K, P]``.
        scale: covariance scale (static).
        model: the base model (its params give the unflattening template).
        n_samples: ``S`` weight samples (static).
        chunk_size: samples evaluated together (static).
    """

    mean: Array
    std: Array
    deviations: Array
    scale: float
    model: TrainedModel
    n_samples: int
    chunk_size: int


def swag_sample(mean: Array, std: Array, deviations: Array, scale: float, key: Array) -> Array:
    """One flat sample ``mean + sqrt(scale) (std * z1 + D z2 / sqrt(K - 1))`` (module docstring)."""
    rank = deviations.shape[0]
    z = jax.random.normal(key, (mean.shape[0] + rank,), mean.dtype)
    z1, z2 = z[: mean.shape[0]], z[mean.shape[0] :]
    low_rank = z2 @ deviations / jnp.sqrt(max(rank - 1, 1))
    return mean + jnp.sqrt(scale) * (std * z1 + low_rank)


@functools.partial(jax.jit, static_argnames=("model_config", "n_samples", "chunk_size"))
def _predict_flat_gaussian(
    template: Params,
    mean: Array,
    std: Array,
    deviations: Array,
    scale: Array,
    x: Array,
    key: Array,
    *,
    model_config: MLPConfig,
    n_samples: int,
    chunk_size: int,
) -> Predictive:
    unravel = ravel_pytree(template)[1]

    def one(k: Array) -> tuple[Array, Array]:
        theta = swag_sample(mean, std, deviations, scale, k)
        return forward(unravel(theta), x, model_config)

    return sample_predictive(one, jax.random.split(key, n_samples), chunk_size)


class SWAG(MethodBase):
    """SWAG on the shared base run (Maddox et al., 2019)."""

    id: ClassVar[str] = "swag"
    config_cls: ClassVar[type] = SWAGConfig
    training_fields: ClassVar[tuple[str, ...]] = ()
    posthoc_fields: ClassVar[tuple[str, ...]] = ("scale", "rank", "n_samples", "chunk_size")
    id_fields: ClassVar[tuple[str, ...]] = ("scale",)

    def training_spec(self, config: SWAGConfig) -> TrainingSpec:
        self._check_config(config)
        return base_spec()

    def train(self, spec, x, y, *, model_config, train_config, key, validation=None) -> TrainingRun:
        self._check_kind(spec, "base")
        return train_base(
            spec,
            x,
            y,
            model_config=model_config,
            train_config=train_config,
            key=key,
            validation=validation,
        )

    def build(self, run: TrainingRun, config: SWAGConfig, x, y, *, key) -> SWAGPosterior:
        """Read the SWAG moments of ``run`` (``x``, ``y`` and ``key`` are not needed)."""
        self._check_config(config)
        stats = swag_statistics(run)
        deviations = stats["deviations"][: min(config.rank, stats["n_valid"])]
        return SWAGPosterior(
            mean=stats["mean"],
            std=jnp.sqrt(jnp.maximum(stats["var"], 0.0)),
            deviations=deviations,
            scale=config.scale,
            model=run.model,
            n_samples=config.n_samples,
            chunk_size=config.chunk_size,
        )

    def predict(self, posterior: SWAGPosterior, x: Array, *, key: Array) -> Predictive:
        x = check_inputs(x, posterior.model.in_dim)
        return _predict_flat_gaussian(
            posterior.model.params,
            posterior.mean,
            posterior.std,
            posterior.deviations,
            jnp.asarray(posterior.scale, jnp.float32),
            x,
            key,
            model_config=posterior.model.config,
            n_samples=posterior.n_samples,
            chunk_size=posterior.chunk_size,
        )
