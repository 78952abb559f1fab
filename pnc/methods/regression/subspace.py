"""Subspace Inference (Izmailov et al., 2020) in the SWAG PCA subspace of its own training run.

As the authors ran it, the trajectory comes from a separate, shorter run (2,000 steps, early-stopped
like every run, 20 iterates collected every 50 steps from step 1,000; the ``subspace`` training
run, :meth:`SubspaceInference.train`), not from the shared base run.

The subspace is ``theta(z) = theta_SWA + z^T B`` with ``theta_SWA`` the SWA mean and ``B`` the
top-``k`` principal directions of the SWAG deviation matrix ``D`` (``[K, P]``), scaled by their
singular values divided by ``sqrt(K - 1)``: ``D = U diag(s) V^T``, ``B = diag(s_{1..k} / sqrt(K -
1)) V^T_{1..k}`` (as the authors' PCA subspace: components ``U S / sqrt(n - 1)`` of the ``n``
deviation columns). The prior on the coordinates is ``z ~ N(0, I_k)`` (so the prior in weight space
is the SWAG low-rank Gaussian restricted to the subspace). The tempered log-likelihood is

    log L(z) = -(1 / T^2) (N / n) sum_{i in rows} sum_d NLL(y_id | theta(z), x_i),

the temperature entering *squared*, as in the authors' code (``-sum NLL / T^2``). ``rows`` are all
``N`` training rows (``max_rows = None``, the authors' protocol) or a fixed random subset of
``n = max_rows`` rows rescaled to ``N`` (a fixed subset, not minibatches, so that slice sampling
targets one distribution). ``T`` is swept post hoc over {1, 10, 100, 1e3, 1e4} (paper, Appendix C).
Samples come from one elliptical slice sampling chain started at ``z = 0`` (the SWA mean), after
``burn_in`` steps, keeping every ``thin``-th state (the authors: 100 burn-in, ``thin = 1``).

``predictive`` turns the ``S`` sampled networks into the predictive
(:data:`pnc.methods.regression.sampling.PREDICTIVE_RULES`): ``mixture`` of their Gaussians, or
``sample``, one draw from each (the authors' code), seeded by the predict key.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from pnc.core.mlp import MLPConfig, Params, forward, gaussian_nll
from pnc.core.predictive import Predictive
from pnc.core.training import Collection, TrainedModel
from pnc.methods.configs import check_choice, check_max_rows, check_positive
from pnc.methods.regression.base_run import snapshot_problems, swag_statistics, train_base
from pnc.methods.regression.contract import MethodBase
from pnc.methods.regression.ess import elliptical_slice_chain
from pnc.methods.regression.runs import TrainingRun, TrainingSpec
from pnc.methods.regression.sampling import (
    PREDICTIVE_RULES,
    apply_predictive_rule,
    check_inputs,
    sample_predictive,
)

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class SubspaceConfig:
    """Subspace Inference hyperparameters.

    Attributes:
        temperature: ``T`` (post hoc; grid {1, 10, 100, 1e3, 1e4}).
        rank: ``k``, subspace dimension (at most the ``K`` deviation columns collected).
        trajectory_steps: length of Subspace Inference's own training run (a training field; the
            authors': 2,000 steps, early-stopped like every run).
        collect_start: first step whose iterate is collected in that run (authors': 1,000).
        collect_every: collection period in steps (authors': 50).
        n_snapshots: ``K``, deviation columns kept (authors': 20).
        n_samples: ``S`` retained samples.
        burn_in: discarded initial ESS steps.
        thin: keep every ``thin``-th ESS state.
        max_rows: training rows in the likelihood (``None``: all rows; otherwise a fixed random
            subset of that many rows, rescaled to ``N``).
        predictive: ``mixture`` or ``sample``
        (:data:`pnc.methods.regression.sampling.PREDICTIVE_RULES`). chunk_size: samples evaluated
        together in :meth:`SubspaceInference.predict`.
    """

    temperature: float = 1.0
    rank: int = 20
    trajectory_steps: int = 2000
    collect_start: int = 1000
    collect_every: int = 50
    n_snapshots: int = 20
    n_samples: int = 100
    burn_in: int = 100
    thin: int = 2
    max_rows: int | None = None
    predictive: str = "mixture"
    chunk_size: int = 25

    def __post_init__(self) -> None:
        check_positive(
            self,
            "temperature",
            "rank",
            "trajectory_steps",
            "collect_every",
            "n_snapshots",
            "n_samples",
            "thin",
            "chunk_size",
        )
        check_max_rows(self)
        check_choice(self, "predictive", PREDICTIVE_RULES)
        if self.collect_start < 0:
            raise ValueError(f"collect_start must be >= 0, got {self.collect_start}")
        if self.burn_in < 0:
            raise ValueError(f"burn_in must be >= 0, got {self.burn_in}")


def pca_subspace(deviations: Array, rank: int) -> Array:
    """``B = diag(s_{1..k} / sqrt(K - 1)) V^T_{1..k}`` from ``D = U diag(s) V^T``, ``[k, P]``.

    Args:
        deviations: ``D``, ``[K, P]`` (one deviation per row).
        rank: ``k`` (at most ``K``).
    """
    n_cols = deviations.shape[0]
    _, s, vt = jnp.linalg.svd(deviations / jnp.sqrt(max(n_cols - 1, 1)), full_matrices=False)
    k = min(rank, n_cols)
    return s[:k, None] * vt[:k]


def subspace_log_likelihood(
    z: Array,
    mean: Array,
    basis: Array,
    template: Params,
    x: Array,
    y: Array,
    scale: Array,
    config: MLPConfig,
) -> Array:
    """``-scale * sum_{i, d} NLL(y_id | theta(z), x_i)`` with ``scale = N / (n T^2)``.

    Args:
        z: subspace coordinates ``[k]``; mean: ``theta_SWA``, ``[P]``; basis: ``B``, ``[k, P]``;
        x: ``[n, in]``, y: ``[n, D]`` (standardised); scale: :func:`likelihood_scale`.
    """
    params = ravel_pytree(template)[1](mean + z @ basis)
    m, v = forward(params, x, config)
    return -scale * jnp.sum(gaussian_nll(m, v, y))


def likelihood_scale(n_data: int, n_rows: int, temperature: float) -> float:
    """``N / (n T^2)``: the factor of ``-sum NLL`` over ``n`` of ``N`` rows at temperature ``T``."""
    return n_data / (n_rows * temperature**2)


@functools.partial(jax.jit, static_argnames=("config", "n_samples", "burn_in", "thin"))
def _subspace_chain(
    mean: Array,
    basis: Array,
    template: Params,
    x: Array,
    y: Array,
    scale: Array,
    key: Array,
    *,
    config: MLPConfig,
    n_samples: int,
    burn_in: int,
    thin: int,
) -> tuple[Array, Array]:
    def log_lik(z: Array) -> Array:
        return subspace_log_likelihood(z, mean, basis, template, x, y, scale, config)

    z0 = jnp.zeros((basis.shape[0],), mean.dtype)
    return elliptical_slice_chain(log_lik, z0, key, n_samples=n_samples, burn_in=burn_in, thin=thin)


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=("mean", "basis", "z", "model"),
    meta_fields=("n_evals", "predictive", "chunk_size"),
)
@dataclasses.dataclass(frozen=True)
class SubspacePosterior:
    """Samples of the subspace coordinates (a pytree of its arrays).

    Attributes:
        mean: the SWA mean ``theta_SWA``, ``[P]``.
        basis: the scaled principal directions ``B``, ``[k, P]``.
        z: the retained ESS samples, ``[S, k]``.
        n_evals: likelihood evaluations of the chain (static).
        model: the base model (its params give the unflattening template).
        predictive: ``mixture`` or ``sample`` (static).
        chunk_size: samples evaluated together (static).
    """

    mean: Array
    basis: Array
    z: Array
    n_evals: int
    model: TrainedModel
    predictive: str
    chunk_size: int


@functools.partial(jax.jit, static_argnames=("model_config", "chunk_size"))
def _predict_subspace(
    template: Params,
    mean: Array,
    basis: Array,
    z: Array,
    x: Array,
    *,
    model_config: MLPConfig,
    chunk_size: int,
) -> Predictive:
    unravel = ravel_pytree(template)[1]

    def one(zi: Array) -> tuple[Array, Array]:
        return forward(unravel(mean + zi @ basis), x, model_config)

    return sample_predictive(one, z, chunk_size)


class SubspaceInference(MethodBase):
    """Subspace Inference with elliptical slice sampling on the shared base run."""

    id: ClassVar[str] = "subspace"
    run_kind: ClassVar[str] = "subspace"
    label: ClassVar[str] = "Subspace"
    short_label: ClassVar[str] = "Sub."
    table_order: ClassVar[int] = 50
    style: ClassVar[Mapping[str, object]] = {
        "color": "#56B4E9",
        "marker": "P",
        "linestyle": (0, (5, 1)),
        "hatch": "++",
    }
    hparam_abbreviations: ClassVar[Mapping[str, str]] = {
        "rank": "K",
        "n_samples": "S",
        "temperature": "T",
    }
    hparam_legend: ClassVar[Mapping[str, str]] = {"T": "Subspace temperature"}
    config_cls: ClassVar[type] = SubspaceConfig
    training_fields: ClassVar[tuple[str, ...]] = (
        "trajectory_steps",
        "collect_start",
        "collect_every",
        "n_snapshots",
    )
    posthoc_fields: ClassVar[tuple[str, ...]] = (
        "temperature",
        "rank",
        "n_samples",
        "burn_in",
        "thin",
        "max_rows",
        "predictive",
        "chunk_size",
    )
    id_fields: ClassVar[tuple[str, ...]] = ("temperature",)
    stores_posteriors: ClassVar[bool] = True  # a chain costs minutes; its samples, 8 kB

    def study_problems(self, config: SubspaceConfig, study) -> tuple[list[str], list[str]]:
        """Its own run's snapshots (``collect_start``/``collect_every`` over
        ``trajectory_steps``): >= 2 needed."""
        from pnc.core.training import Collection

        collection = Collection(config.collect_start, config.collect_every, config.n_snapshots)
        where = "methods.subspace collect_start/collect_every over trajectory_steps"
        return snapshot_problems(self.id, collection, config.trajectory_steps, where, config.rank)

    def training_spec(self, config: SubspaceConfig) -> TrainingSpec:
        self._check_config(config)
        options = (
            ("every", config.collect_every),
            ("snapshots", config.n_snapshots),
            ("start", config.collect_start),
            ("steps", config.trajectory_steps),
        )
        return TrainingSpec("subspace", options)

    def train(self, spec, x, y, *, model_config, train_config, key, validation=None) -> TrainingRun:
        """Subspace Inference's own run: ``train_config`` (optimiser, early stopping) with the
        spec's length and collection schedule."""
        self._check_kind(spec, "subspace")
        options = dict(spec.options)
        if set(options) != {"every", "snapshots", "start", "steps"}:
            raise ValueError(
                f"subspace runs take the options every, snapshots, start, steps; got {spec.options}"
            )
        collection = Collection(
            int(options["start"]), int(options["every"]), int(options["snapshots"])
        )
        own = dataclasses.replace(train_config, steps=int(options["steps"]), collection=collection)
        return train_base(
            spec,
            x,
            y,
            model_config=model_config,
            train_config=own,
            key=key,
            validation=validation,
        )

    def _subspace(self, run: TrainingRun, config: SubspaceConfig) -> tuple[Array, Array]:
        """``(theta_SWA, B)`` of ``run``'s trajectory."""
        stats = swag_statistics(run)
        if stats["n_valid"] < 2:
            raise ValueError(
                f"run {run.spec.run_id} collected {stats['n_valid']} iterate(s); the subspace needs"
                " >= 2 (it stopped early before the collection started: lower collect_start)"
            )
        return stats["mean"], pca_subspace(stats["deviations"][: stats["n_valid"]], config.rank)

    def build(self, run: TrainingRun, config: SubspaceConfig, x, y, *, key) -> SubspacePosterior:
        """Build the subspace and run the ESS chain on standardised ``x [N, in]``, ``y [N, D]``."""
        self._check_config(config)
        x = check_inputs(x, run.model.in_dim)
        y = jnp.asarray(y, jnp.float32)
        if y.shape != (x.shape[0], run.model.out_dim):
            raise ValueError(f"y must be [{x.shape[0]}, {run.model.out_dim}], got {y.shape}")
        mean, basis = self._subspace(run, config)
        n_data = x.shape[0]
        k_rows, k_chain = jax.random.split(key)
        if config.max_rows is not None and n_data > config.max_rows:
            rows = jax.random.choice(k_rows, n_data, (config.max_rows,), replace=False)
            x, y = x[rows], y[rows]
        scale = jnp.asarray(likelihood_scale(n_data, x.shape[0], config.temperature), jnp.float32)
        z, n_evals = _subspace_chain(
            mean,
            basis,
            run.model.params,
            x,
            y,
            scale,
            k_chain,
            config=run.model.config,
            n_samples=config.n_samples,
            burn_in=config.burn_in,
            thin=config.thin,
        )
        return SubspacePosterior(
            mean, basis, z, int(n_evals), run.model, config.predictive, config.chunk_size
        )

    def posterior_arrays(self, posterior: SubspacePosterior) -> dict[str, Any]:
        """The chain's retained coordinates ``z [S, k]`` and its likelihood evaluations."""
        return {"z": np.asarray(posterior.z), "n_evals": np.asarray(posterior.n_evals)}

    def restore_posterior(
        self, run: TrainingRun, config: SubspaceConfig, arrays: Mapping[str, Any]
    ) -> SubspacePosterior:
        """The posterior with the stored chain: the subspace is computed again from ``run`` as
        :meth:`build` computes it (an SVD of the deviations), the chain is not run."""
        self._check_config(config)
        mean, basis = self._subspace(run, config)
        z = jnp.asarray(arrays["z"])
        if z.shape != (config.n_samples, basis.shape[0]) or z.dtype != mean.dtype:
            raise ValueError(
                f"stored subspace samples of shape {z.shape} ({z.dtype}) do not fit "
                f"n_samples {config.n_samples} x rank {basis.shape[0]} ({mean.dtype})"
            )
        return SubspacePosterior(
            mean, basis, z, int(arrays["n_evals"]), run.model, config.predictive, config.chunk_size
        )

    def parameter_samples(self, posterior: SubspacePosterior, key: Array) -> tuple[Any, Any]:
        """The parameter samples :meth:`predict` evaluates (same key use), ``[S]``-leading, and
        the reference network (the SWA mean); the samples are the retained coordinates ``z``
        mapped to ``theta_SWA + z B``."""
        unravel = ravel_pytree(posterior.model.params)[1]
        flat = posterior.mean[None, :] + posterior.z @ posterior.basis
        return jax.vmap(unravel)(flat), unravel(posterior.mean)

    def predict(self, posterior: SubspacePosterior, x: Array, *, key: Array) -> Predictive:
        """Forward passes at the sampled coordinates, ``[S, N, D]``.

        ``mixture``: their Gaussians (``key`` unused); ``sample``: one draw from each, from ``key``.
        """
        x = check_inputs(x, posterior.model.in_dim)
        pred = _predict_subspace(
            posterior.model.params,
            posterior.mean,
            posterior.basis,
            posterior.z,
            x,
            model_config=posterior.model.config,
            chunk_size=posterior.chunk_size,
        )
        return apply_predictive_rule(pred, posterior.predictive, key)
