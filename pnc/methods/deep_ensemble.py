"""Deep Ensembles (Lakshminarayanan et al., 2017): ``M`` networks from independent initialisations
and data orders; each member contributes its own Gaussian ``(mean, var)``, so ``S = M``.

The members are trained together with ``jax.vmap`` over keys of :func:`pnc.train.fit` (one
jitted program); the paper uses ``M = 5`` (Appendix C).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from pnc.methods.base import (
    MethodBase,
    TrainingRun,
    TrainingSpec,
    check_inputs,
    check_positive,
    standardise,
)
from pnc.mlp import MLPConfig, Params, forward
from pnc.predictive import Predictive
from pnc.train import TrainConfig, TrainedModel, fit, fit_summary, standardized_validation

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class DeepEnsembleConfig:
    """Attributes:
    n_members: ``M``, independently trained members (a training field).
    """

    n_members: int = 5

    def __post_init__(self) -> None:
        check_positive(self, "n_members")


@functools.partial(
    jax.tree_util.register_dataclass, data_fields=("members", "model"), meta_fields=()
)
@dataclasses.dataclass(frozen=True)
class DeepEnsemblePosterior:
    """The trained members (a pytree of its arrays).

    Attributes:
        members: stacked member parameters, a leading ``[M]`` axis on every leaf.
        model: the first member with the shared architecture and standardisers.
    """

    members: Params
    model: TrainedModel


def train_ensemble(
    x: np.ndarray,
    y: np.ndarray,
    n_members: int,
    *,
    model_config: MLPConfig,
    train_config: TrainConfig,
    key: Array,
    validation: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[TrainedModel, Params, dict, float]:
    """Train ``n_members`` networks on raw data with ``vmap`` over ``jax.random.split(key, M)``
    (each member early-stopped on its own validation NLL when ``train_config.patience`` is set).

    Returns:
        ``(first member as TrainedModel, stacked params [M, ...], per-member fit summary
        (:func:`pnc.train.fit_summary`), seconds)``.
    """
    x_norm, y_norm = standardise(x, y, model_config.out_dim, train_config)
    run = jax.jit(
        jax.vmap(functools.partial(fit, model_config, train_config), in_axes=(None, None, 0, None))
    )
    t0 = time.perf_counter()
    result = run(
        x_norm.transform(jnp.asarray(x, jnp.float32)),
        y_norm.transform(jnp.asarray(y, jnp.float32)),
        jax.random.split(key, n_members),
        standardized_validation(validation, x_norm, y_norm),
    )
    jax.block_until_ready(result.params)
    seconds = time.perf_counter() - t0
    members = result.params
    first = jax.tree.map(lambda a: a[0], members)
    model = TrainedModel(model_config, first, x_norm, y_norm)
    return model, members, fit_summary(result), seconds


@functools.partial(jax.jit, static_argnames=("model_config",))
def _predict_members(members: Params, x: Array, *, model_config: MLPConfig) -> Predictive:
    means, variances = jax.vmap(forward, in_axes=(0, None, None))(members, x, model_config)
    return Predictive(means, variances)


class DeepEnsemble(MethodBase):
    """Deep Ensemble of ``M`` independently trained Gaussian MLPs."""

    id: ClassVar[str] = "deep_ensemble"
    config_cls: ClassVar[type] = DeepEnsembleConfig
    training_fields: ClassVar[tuple[str, ...]] = ("n_members",)
    posthoc_fields: ClassVar[tuple[str, ...]] = ()
    id_fields: ClassVar[tuple[str, ...]] = ("n_members",)

    def training_spec(self, config: DeepEnsembleConfig) -> TrainingSpec:
        self._check_config(config)
        return TrainingSpec("deep_ensemble", (("n_members", config.n_members),))

    def train(self, spec, x, y, *, model_config, train_config, key, validation=None) -> TrainingRun:
        """Train the members; ``run.extras["members"]`` holds the stacked parameters."""
        self._check_kind(spec, "deep_ensemble")
        options = dict(spec.options)
        if set(options) != {"n_members"}:
            raise ValueError(f"deep_ensemble runs take the option n_members, got {spec.options}")
        model, members, summary, seconds = train_ensemble(
            x,
            y,
            int(options["n_members"]),
            model_config=model_config,
            train_config=train_config,
            key=key,
            validation=validation,
        )
        meta = dict(summary, train_s=seconds, train_config=train_config.to_dict())
        return TrainingRun(spec, model, {"members": members}, meta)

    def build(self, run: TrainingRun, config: DeepEnsembleConfig, x, y, *, key):
        """Nothing to construct post hoc: the members of the run (``x``, ``y``, ``key`` unused)."""
        self._check_config(config)
        if run.spec.kind != "deep_ensemble" or "members" not in run.extras:
            raise ValueError(f"deep_ensemble needs a deep_ensemble run, got {run.spec.run_id}")
        members = jax.tree.map(jnp.asarray, run.extras["members"])
        n = jax.tree.leaves(members)[0].shape[0]
        if n != config.n_members:
            raise ValueError(f"run has {n} members, config asks for {config.n_members}")
        return DeepEnsemblePosterior(members, run.model)

    def predict(self, posterior: DeepEnsemblePosterior, x: Array, *, key: Array) -> Predictive:
        """One Gaussian per member, ``[M, N, D]`` (deterministic; ``key`` is unused)."""
        x = check_inputs(x, posterior.model.in_dim)
        return _predict_members(posterior.members, x, model_config=posterior.model.config)
