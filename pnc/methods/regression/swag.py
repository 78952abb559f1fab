"""SWAG (Maddox et al., 2019): a Gaussian fitted to the iterates of the optimiser.

The moments are collected during the shared ``base`` run (:mod:`pnc.methods.regression.base_run`;
the authors' schedule: every step from step 1,000): running first and second moments of the
flattened parameters and the last ``K`` deviation columns ``theta_i - mean_i``. With ``diag =
clamp(second moment - mean^2, 0)`` and ``D`` the ``[K, P]`` deviation matrix, samples are

    theta = mean + scale * sqrt(1/2) * (diag^{1/2} z1 + D^T z2 / sqrt(K - 1)),
    z1 ~ N(0, I_P), z2 ~ N(0, I_K),

i.e. the covariance ``scale^2 * (diag + D^T D / (K - 1)) / 2``. Maddox et al. (Section 3, their
sampling equation) put the factor 1/2 on the *covariance*, both terms: ``Sigma = (Sigma_diag +
Sigma_low-rank) / 2``, sampled as ``theta_SWA + Sigma_diag^{1/2} z1 / sqrt(2) + D z2 / sqrt(2 (K -
1))``; ``scale = 1`` is exactly their sampler. ``scale`` multiplies the *standard deviation* of both
terms (so the sample covariance grows as ``scale^2``), as in the authors' sampler (mean + scale *
sqrt(0.5 var) eps); it is swept post hoc over {0.1, 0.3, 1, 3, 10} (paper, Appendix C).

``covariance`` picks the Gaussian: ``diag_lowrank`` (both terms; the sampler the paper names,
Appendix C) or ``diag`` (the first term only, ``D`` dropped; the authors' MuJoCo code, which
collected no deviation columns).

The sampler is :func:`pnc.core.swag_gaussian.swag_sample` (re-exported here), beside the CIFAR study's.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from pnc.core.mlp import MLPConfig, Params, forward
from pnc.core.predictive import Predictive
from pnc.core.swag_gaussian import swag_sample
from pnc.core.training import TrainedModel
from pnc.methods.configs import check_choice, check_positive
from pnc.methods.labels import SHARED_LABELS
from pnc.methods.regression.base_run import OnBaseRun, snapshot_problems, swag_statistics
from pnc.methods.regression.contract import MethodBase
from pnc.methods.regression.runs import TrainingRun
from pnc.methods.regression.sampling import check_inputs, sample_predictive

Array = jax.Array

COVARIANCES = ("diag_lowrank", "diag")
"""Values of :attr:`SWAGConfig.covariance`."""


@dataclasses.dataclass(frozen=True)
class SWAGConfig:
    """SWAG hyperparameters (paper, Appendix C).

    Attributes:
        scale: multiplier of the sampler's standard deviation (post hoc; grid
            {0.1, 0.3, 1, 3, 10}); ``scale = 1`` is Maddox et al.'s sampler.
        rank: number of deviation columns used, the most recent ones (at most the ``K``
            collected; ``diag_lowrank`` needs at least 2).
        covariance: ``diag_lowrank`` (the paper) or ``diag`` (the authors' MuJoCo code).
        n_samples: ``S`` weight samples.
        chunk_size: samples evaluated together in :meth:`SWAG.predict`.
    """

    scale: float = 1.0
    rank: int = 20
    covariance: str = "diag_lowrank"
    n_samples: int = 100
    chunk_size: int = 25

    def __post_init__(self) -> None:
        check_positive(self, "scale", "rank", "n_samples", "chunk_size")
        check_choice(self, "covariance", COVARIANCES)


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
        deviations: the ``K`` most recent deviation columns, most recent first, ``[K, P]``
            (``K = 0`` for ``covariance = diag``).
        scale: multiplier of the standard deviation (static).
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


class SWAG(OnBaseRun, MethodBase):
    """SWAG on the shared base run (Maddox et al., 2019)."""

    id: ClassVar[str] = "swag"
    label: ClassVar[str] = SHARED_LABELS["swag"]
    short_label: ClassVar[str] = label
    table_order: ClassVar[int] = 30
    style: ClassVar[Mapping[str, object]] = {
        "color": "#009E73",
        "marker": "D",
        "linestyle": "-.",
        "hatch": "xx",
    }
    hparam_abbreviations: ClassVar[Mapping[str, str]] = {
        "scale": "sws",
        "rank": "K",
        "n_samples": "S",
    }
    hparam_legend: ClassVar[Mapping[str, str]] = {"sws": "SWAG scale"}
    config_cls: ClassVar[type] = SWAGConfig
    training_fields: ClassVar[tuple[str, ...]] = ()
    posthoc_fields: ClassVar[tuple[str, ...]] = (
        "scale",
        "rank",
        "covariance",
        "n_samples",
        "chunk_size",
    )
    id_fields: ClassVar[tuple[str, ...]] = ("scale",)

    def study_problems(self, config: SWAGConfig, study) -> tuple[list[str], list[str]]:
        """The base run's snapshots (``train.collection`` over ``train.steps``): >= 2 needed."""
        from pnc.core.training import Collection

        try:
            collection = Collection(**study.train["collection"])
        except (TypeError, ValueError) as err:
            return [f"train.collection: {err}"], []
        steps = int(study.train["steps"])
        where = "train.collection over train.steps"
        return snapshot_problems(self.id, collection, steps, where, config.rank)

    def build(self, run: TrainingRun, config: SWAGConfig, x, y, *, key) -> SWAGPosterior:
        """Read the SWAG moments of ``run`` (``x``, ``y`` and ``key`` are not needed).

        ``diag_lowrank`` uses the ``min(rank, collected)`` most recent deviation columns; with fewer
        than 2 collected (a run early-stopped near the start of its collection) the low-rank term
        is left out, as the authors' sampler does, and only the diagonal term remains.
        """
        self._check_config(config)
        stats = swag_statistics(run)
        n_columns = 0 if config.covariance == "diag" else min(config.rank, stats["n_valid"])
        deviations = stats["deviations"][: n_columns if n_columns >= 2 else 0]
        return SWAGPosterior(
            mean=stats["mean"],
            std=jnp.sqrt(jnp.maximum(stats["var"], 0.0)),
            deviations=deviations,
            scale=config.scale,
            model=run.model,
            n_samples=config.n_samples,
            chunk_size=config.chunk_size,
        )

    def parameter_samples(self, posterior: SWAGPosterior, key: Array) -> tuple[Any, Any]:
        """The parameter samples :meth:`predict` evaluates (same key use), ``[S]``-leading, and
        the reference network (the SWA mean)."""
        unravel = ravel_pytree(posterior.model.params)[1]
        keys = jax.random.split(key, posterior.n_samples)
        scale = jnp.asarray(posterior.scale, jnp.float32)
        flat = jax.vmap(
            lambda k: swag_sample(posterior.mean, posterior.std, posterior.deviations, scale, k)
        )(keys)
        return jax.vmap(unravel)(flat), unravel(posterior.mean)

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
