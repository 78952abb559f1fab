"""MC Dropout (Gal & Ghahramani, 2016): train with dropout after every hidden layer, keep it on at
test time and average ``S`` stochastic passes.

The dropout rate is a training field (one run per rate; grid {0.05, 0.1, 0.2, 0.3, 0.5}, paper
Appendix C). Dropout masks are independent per element (:class:`pnc.core.mlp.GaussianMLP`), in training
and at test time: each of the ``S = 100`` passes draws, from its own key, a fresh mask per hidden
layer and per example, as the authors' MC Dropout does (``model(x, deterministic=False)`` on the
whole batch), so within one pass different inputs see different sub-networks.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Mapping
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from pnc.core.mlp import GaussianMLP, MLPConfig, Params
from pnc.core.predictive import Predictive
from pnc.core.training import TrainedModel, fit, fit_summary, standardized_validation
from pnc.methods.configs import check_positive
from pnc.methods.labels import SHARED_LABELS
from pnc.methods.regression.contract import MethodBase
from pnc.methods.regression.runs import TrainingRun, TrainingSpec
from pnc.methods.regression.sampling import check_inputs, sample_predictive, standardise

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class MCDropoutConfig:
    """Attributes:
    rate: dropout probability (a training field).
    n_samples: ``S`` stochastic passes.
    chunk_size: passes evaluated together in :meth:`MCDropout.predict`.
    """

    rate: float = 0.05
    n_samples: int = 100
    chunk_size: int = 25

    def __post_init__(self) -> None:
        if not 0.0 < self.rate < 1.0:
            raise ValueError(f"rate must be in (0, 1), got {self.rate}")
        check_positive(self, "n_samples", "chunk_size")


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=("model",),
    meta_fields=("n_samples", "chunk_size"),
)
@dataclasses.dataclass(frozen=True)
class MCDropoutPosterior:
    """The dropout network (a pytree of its arrays).

    Attributes:
        model: the network trained with dropout (its ``config.dropout_rate`` is the rate).
        n_samples: ``S`` stochastic passes (static).
        chunk_size: passes evaluated together (static).
    """

    model: TrainedModel
    n_samples: int
    chunk_size: int


@functools.partial(jax.jit, static_argnames=("model_config", "n_samples", "chunk_size"))
def _predict_dropout(
    params: Params,
    x: Array,
    key: Array,
    *,
    model_config: MLPConfig,
    n_samples: int,
    chunk_size: int,
) -> Predictive:
    module = GaussianMLP(model_config)

    def one(k: Array) -> tuple[Array, Array]:
        return module.apply({"params": params}, x, deterministic=False, rngs={"dropout": k})

    return sample_predictive(one, jax.random.split(key, n_samples), chunk_size)


class MCDropout(MethodBase):
    """MC Dropout with a training-time dropout rate."""

    id: ClassVar[str] = "mc_dropout"
    run_kind: ClassVar[str] = "mc_dropout"
    label: ClassVar[str] = SHARED_LABELS["mc_dropout"]
    short_label: ClassVar[str] = "MCD"
    table_order: ClassVar[int] = 20
    style: ClassVar[Mapping[str, object]] = {
        "color": "#E69F00",
        "marker": "v",
        "linestyle": "--",
        "hatch": "\\\\",
    }
    hparam_abbreviations: ClassVar[Mapping[str, str]] = {
        "rate": "dr",
    }
    hparam_legend: ClassVar[Mapping[str, str]] = {"dr": "dropout rate"}
    config_cls: ClassVar[type] = MCDropoutConfig
    training_fields: ClassVar[tuple[str, ...]] = ("rate",)
    posthoc_fields: ClassVar[tuple[str, ...]] = ("n_samples", "chunk_size")
    id_fields: ClassVar[tuple[str, ...]] = ("rate",)

    def training_spec(self, config: MCDropoutConfig) -> TrainingSpec:
        self._check_config(config)
        return TrainingSpec("mc_dropout", (("rate", config.rate),))

    def train(self, spec, x, y, *, model_config, train_config, key, validation=None) -> TrainingRun:
        """Train ``model_config`` with the spec's dropout rate (replacing its ``dropout_rate``)."""
        self._check_kind(spec, "mc_dropout")
        options = dict(spec.options)
        if set(options) != {"rate"}:
            raise ValueError(f"mc_dropout runs take the option rate, got {spec.options}")
        config = dataclasses.replace(model_config, dropout_rate=float(options["rate"]))
        t0 = time.perf_counter()
        x_norm, y_norm = standardise(x, y, config.out_dim, train_config)
        result = jax.jit(fit, static_argnums=(0, 1))(
            config,
            train_config,
            x_norm.transform(jnp.asarray(x, jnp.float32)),
            y_norm.transform(jnp.asarray(y, jnp.float32)),
            key,
            standardized_validation(validation, x_norm, y_norm),
        )
        jax.block_until_ready(result.params)
        model = TrainedModel(config, result.params, x_norm, y_norm)
        meta = dict(
            fit_summary(result),
            train_s=time.perf_counter() - t0,
            train_config=train_config.to_dict(),
        )
        return TrainingRun(spec, model, {}, meta)

    def build(self, run: TrainingRun, config: MCDropoutConfig, x, y, *, key):
        """The dropout network of the run (``x``, ``y``, ``key`` unused)."""
        self._check_config(config)
        if run.spec.kind != "mc_dropout":
            raise ValueError(f"mc_dropout needs a mc_dropout run, got {run.spec.run_id}")
        if not np.isclose(run.model.config.dropout_rate, config.rate):
            raise ValueError(
                f"run was trained with rate {run.model.config.dropout_rate}, config has {config.rate}"
            )
        return MCDropoutPosterior(run.model, config.n_samples, config.chunk_size)

    def predict(self, posterior: MCDropoutPosterior, x: Array, *, key: Array) -> Predictive:
        x = check_inputs(x, posterior.model.in_dim)
        return _predict_dropout(
            posterior.model.params,
            x,
            key,
            model_config=posterior.model.config,
            n_samples=posterior.n_samples,
            chunk_size=posterior.chunk_size,
        )
