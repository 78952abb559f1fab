"""Deep Ensembles (Lakshminarayanan et al., 2017): ``M`` networks from independent initialisations
and data orders; each member contributes one predictive sample, so ``S = M``.

The members are trained together with ``jax.vmap`` over keys of :func:`pnc.core.training.fit` (one
jitted program); the paper uses ``M = 5`` (Appendix C). ``predictive`` says how the members'
Gaussians ``N(mu_m(x), var_m(x))`` are combined
(:data:`pnc.methods.regression.sampling.PREDICTIVE_RULES`):

- ``mixture`` (the paper: Lakshminarayanan et al.'s rule): the ``M`` Gaussians themselves, whose
  moment-matched mixture has mean ``mean_m mu_m`` and variance ``mean_m var_m + var_m mu_m``;
- ``sample`` (the authors' code, ``StandardEnsemble``): one draw ``y_m = mu_m + sqrt(var_m) eps_m``
  per member, ``eps ~ N(0, I)`` from the predict key, held as point masses, so the predictive mean
  and variance are the mean and the population variance of the ``M`` draws.
"""

from __future__ import annotations

import dataclasses
import functools
import time
import types
from collections.abc import Mapping
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from pnc.core.mlp import MLPConfig, Params, forward
from pnc.core.predictive import Predictive
from pnc.core.training import TrainConfig, TrainedModel, fit, fit_summary, standardized_validation
from pnc.methods.configs import check_choice, check_positive
from pnc.methods.labels import SHARED_LABELS
from pnc.methods.regression.contract import MethodBase
from pnc.methods.regression.runs import TrainingRun, TrainingSpec
from pnc.methods.regression.sampling import (
    PREDICTIVE_RULES,
    apply_predictive_rule,
    check_inputs,
    standardise,
)

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class DeepEnsembleConfig:
    """Attributes:
    n_members: ``M``, independently trained members (a training field).
    predictive: ``mixture`` (the paper) or ``sample`` (the authors' code); post hoc.
    """

    n_members: int = 5
    predictive: str = "mixture"

    def __post_init__(self) -> None:
        check_positive(self, "n_members")
        check_choice(self, "predictive", PREDICTIVE_RULES)


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=("members", "model"),
    meta_fields=("predictive",),
)
@dataclasses.dataclass(frozen=True)
class DeepEnsemblePosterior:
    """The trained members (a pytree of its arrays).

    Attributes:
        members: stacked member parameters, a leading ``[M]`` axis on every leaf.
        model: the first member with the shared architecture and standardisers.
        predictive: ``mixture`` or ``sample`` (static).
    """

    members: Params
    model: TrainedModel
    predictive: str = "mixture"


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
        (:func:`pnc.core.training.fit_summary`), seconds)``.
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
    run_kind: ClassVar[str] = "deep_ensemble"
    label: ClassVar[str] = SHARED_LABELS["deep_ensemble"]
    short_label: ClassVar[str] = "DE"
    table_order: ClassVar[int] = 10
    style: ClassVar[Mapping[str, object]] = {
        "color": "#0072B2",
        "marker": "s",
        "linestyle": "-",
        "hatch": "//",
    }
    hparam_abbreviations: ClassVar[Mapping[str, str]] = {
        "n_members": "n",
    }
    hparam_legend: ClassVar[Mapping[str, str]] = {"n": "ensemble members"}
    config_cls: ClassVar[type] = DeepEnsembleConfig
    training_fields: ClassVar[tuple[str, ...]] = ("n_members",)
    posthoc_fields: ClassVar[tuple[str, ...]] = ("predictive",)
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
        return DeepEnsemblePosterior(members, run.model, config.predictive)

    def predict(self, posterior: DeepEnsemblePosterior, x: Array, *, key: Array) -> Predictive:
        """One sample per member, ``[M, N, D]``.

        ``mixture``: each member's Gaussian (``key`` unused); ``sample``: one draw from each
        member's Gaussian, from ``key`` (variances zero; module docstring).
        """
        x = check_inputs(x, posterior.model.in_dim)
        pred = _predict_members(posterior.members, x, model_config=posterior.model.config)
        return apply_predictive_rule(pred, posterior.predictive, key)


class DeepEnsembleMixture(DeepEnsemble):
    """The Deep Ensemble read as the mixture of its members' Gaussians, beside the ranked
    :class:`DeepEnsemble` that the study configures with the authors' one draw per member.

    The same training run and keys as ``deep_ensemble`` (one run serves both readings); the
    predictive is pinned to ``mixture``. Reported in the tables but not ranked, like the P&C
    ablation, so that the six ranked methods stay those of the paper.
    """

    id: ClassVar[str] = "deep_ensemble_mixture"
    label: ClassVar[str] = "Deep Ensemble (mixture)"
    short_label: ClassVar[str] = "DE-mix"
    ranked: ClassVar[bool] = False
    table_order: ClassVar[int] = 75
    style: ClassVar[Mapping[str, object]] = {
        "color": "#000000",
        "marker": "d",
        "linestyle": (0, (3, 1, 1, 1)),
        "hatch": "--",
    }
    posthoc_fields: ClassVar[tuple[str, ...]] = ()
    fixed: ClassVar[Mapping[str, Any]] = types.MappingProxyType({"predictive": "mixture"})
    shares_keys_with: ClassVar[str | None] = DeepEnsemble.id
    reading_of: ClassVar[str | None] = DeepEnsemble.id
