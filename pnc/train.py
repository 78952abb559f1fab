"""Training the Gaussian MLP: standardisation, the jitted Adam loop, and saving without pickle.

The training loop is one ``lax.scan`` over optimisation steps inside one ``jit``; minibatches are
drawn with replacement from a PRNG key, so a run is a pure function of ``(data, config, key)``.
:func:`fit_params` is that pure function on already standardised arrays (``vmap`` it over keys to
train an ensemble); :func:`train` adds standardisation and returns a :class:`TrainedModel`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from pnc.io import load_pytree, read_json, save_pytree, write_json
from pnc.mlp import GaussianMLP, MLPConfig, Params, forward, gaussian_nll, init_params

Array = jax.Array

#: Standard deviations below this are treated as constant columns (scaled by 1).
STD_FLOOR = 1e-8


class Standardizer(NamedTuple):
    """Per-column affine standardisation ``(v - mean) / std``; ``mean``, ``std`` are ``[dim]``.

    A named tuple, hence a pytree whose leaves are ``mean`` and ``std``.
    """

    mean: Array
    std: Array

    @classmethod
    def fit(cls, v: np.ndarray) -> Standardizer:
        """Fit on rows ``v`` of shape ``[N, dim]`` (float64 statistics, stored as float32)."""
        v = np.asarray(v, dtype=np.float64)
        if v.ndim != 2 or v.shape[0] < 2:
            raise ValueError(f"need a 2-D array with at least 2 rows, got shape {v.shape}")
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{int(np.sum(~np.isfinite(v)))} non-finite values in the data")
        mean = v.mean(axis=0)
        std = v.std(axis=0)
        std = np.where(std < STD_FLOOR, 1.0, std)
        return cls(jnp.asarray(mean, jnp.float32), jnp.asarray(std, jnp.float32))

    def transform(self, v: Array) -> Array:
        return (v - self.mean) / self.std

    def inverse(self, v: Array) -> Array:
        return v * self.std + self.mean


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Optimisation recipe (paper, Appendix C: 5,000 Adam steps of batch 64).

    Attributes:
        steps: number of optimiser steps.
        batch_size: minibatch size (rows drawn with replacement each step).
        learning_rate: Adam learning rate.
        weight_decay: decoupled weight decay (AdamW) coefficient; 0 gives plain Adam.
    """

    steps: int = 5000
    batch_size: int = 64
    learning_rate: float = 1e-3
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1 or self.learning_rate <= 0:
            raise ValueError(f"invalid training config {self}")

    def optimizer(self) -> optax.GradientTransformation:
        if self.weight_decay > 0:
            return optax.adamw(self.learning_rate, weight_decay=self.weight_decay)
        return optax.adam(self.learning_rate)


def nll_loss(
    params: Params, model: GaussianMLP, x: Array, y: Array, dropout_key: Array | None = None
) -> Array:
    """Mean Gaussian NLL over a batch ``x [B, in]``, ``y [B, D]`` (dropout active if a key is given)."""
    if dropout_key is None:
        mean, var = model.apply({"params": params}, x, deterministic=True)
    else:
        mean, var = model.apply(
            {"params": params}, x, deterministic=False, rngs={"dropout": dropout_key}
        )
    return jnp.mean(gaussian_nll(mean, var, y))


class TrainState(NamedTuple):
    params: Params
    opt_state: Any


def make_train_step(
    model_config: MLPConfig, train_config: TrainConfig, x: Array, y: Array
) -> Callable[[TrainState, Array], tuple[TrainState, Array]]:
    """Build the pure step ``(state, key) -> (state, loss)`` on data ``x [N, in]``, ``y [N, D]``.

    The key draws the minibatch indices (and, with dropout, the dropout masks). Use it as the body
    of a ``lax.scan`` over per-step keys; baselines that need extra per-step state (SWAG) wrap it.
    """
    model = GaussianMLP(model_config)
    opt = train_config.optimizer()
    n = x.shape[0]
    use_dropout = model_config.dropout_rate > 0.0

    def step(state: TrainState, key: Array) -> tuple[TrainState, Array]:
        k_batch, k_drop = jax.random.split(key)
        idx = jax.random.randint(k_batch, (train_config.batch_size,), 0, n)
        loss, grads = jax.value_and_grad(nll_loss)(
            state.params, model, x[idx], y[idx], k_drop if use_dropout else None
        )
        updates, opt_state = opt.update(grads, state.opt_state, state.params)
        return TrainState(optax.apply_updates(state.params, updates), opt_state), loss

    return step


def init_train_state(
    model_config: MLPConfig, train_config: TrainConfig, in_dim: int, key: Array
) -> TrainState:
    params = init_params(model_config, in_dim, key)
    return TrainState(params, train_config.optimizer().init(params))


def fit_params(
    model_config: MLPConfig, train_config: TrainConfig, x: Array, y: Array, key: Array
) -> tuple[Params, Array]:
    """Train from scratch on standardised data; pure and jittable (``vmap`` over ``key`` for ensembles).

    Args:
        x: standardised inputs ``[N, in_dim]``.
        y: standardised targets ``[N, out_dim]``.
        key: PRNG key; split into an initialisation key and a data-order key.

    Returns:
        ``(params, losses)`` with ``losses`` of shape ``[steps]`` (minibatch NLL per step).
    """
    k_init, k_data = jax.random.split(key)
    state = init_train_state(model_config, train_config, x.shape[-1], k_init)
    step = make_train_step(model_config, train_config, x, y)
    state, losses = jax.lax.scan(step, state, jax.random.split(k_data, train_config.steps))
    return state.params, losses


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=("params", "x_norm", "y_norm"),
    meta_fields=("config",),
)
@dataclasses.dataclass(frozen=True)
class TrainedModel:
    """A trained Gaussian MLP with the standardisation it was trained under.

    A pytree: its leaves are the parameters and the standardisers' ``mean``/``std``; ``config`` is
    static metadata.

    Attributes:
        config: the architecture (static).
        params: parameter pytree (float32).
        x_norm: input standardiser (fitted on the training inputs), ``[in_dim]`` arrays.
        y_norm: target standardiser (fitted on the training targets), ``[D]`` arrays.
    """

    config: MLPConfig
    params: Params
    x_norm: Standardizer
    y_norm: Standardizer

    @property
    def in_dim(self) -> int:
        return int(self.x_norm.mean.shape[0])

    @property
    def out_dim(self) -> int:
        return self.config.out_dim

    def predict(self, x: np.ndarray | Array) -> tuple[Array, Array]:
        """Predict on raw inputs ``[N, in_dim]``; returns standardised ``(mean, var)``, ``[N, D]``."""
        return _predict(
            self.params, self.x_norm.transform(jnp.asarray(x, jnp.float32)), self.config
        )


@functools.partial(jax.jit, static_argnames=("config",))
def _predict(params: Params, x_std: Array, config: MLPConfig) -> tuple[Array, Array]:
    return forward(params, x_std, config)


def train(
    x: np.ndarray,
    y: np.ndarray,
    *,
    key: Array,
    model_config: MLPConfig | None = None,
    train_config: TrainConfig | None = None,
) -> tuple[TrainedModel, np.ndarray]:
    """Standardise ``x [N, in]``, ``y [N, D]`` with their own statistics and train the Gaussian MLP.

    Returns:
        ``(model, losses)``; ``losses`` is the per-step minibatch NLL, ``[steps]``.
    """
    x = np.asarray(x)
    y = np.asarray(y)
    if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must be [N, *] with the same N, got {x.shape} and {y.shape}")
    model_config = model_config or MLPConfig(out_dim=y.shape[1])
    if model_config.out_dim != y.shape[1]:
        raise ValueError(f"model out_dim {model_config.out_dim} != target dim {y.shape[1]}")
    train_config = train_config or TrainConfig()
    x_norm, y_norm = Standardizer.fit(x), Standardizer.fit(y)
    fit = jax.jit(fit_params, static_argnums=(0, 1))
    params, losses = fit(
        model_config,
        train_config,
        x_norm.transform(jnp.asarray(x)),
        y_norm.transform(jnp.asarray(y)),
        key,
    )
    return TrainedModel(model_config, params, x_norm, y_norm), np.asarray(losses)


# ----------------------------------------------------------------------------- persistence


def model_state(model: TrainedModel) -> dict:
    """The arrays of ``model`` as a plain pytree: ``{"params", "x_norm", "y_norm"}``."""
    return {
        "params": model.params,
        "x_norm": {"mean": model.x_norm.mean, "std": model.x_norm.std},
        "y_norm": {"mean": model.y_norm.mean, "std": model.y_norm.std},
    }


def model_from_state(config: MLPConfig, state: dict) -> TrainedModel:
    """Inverse of :func:`model_state` (leaves converted to ``jax.Array``)."""
    state = jax.tree.map(jnp.asarray, state)
    return TrainedModel(
        config,
        state["params"],
        Standardizer(state["x_norm"]["mean"], state["x_norm"]["std"]),
        Standardizer(state["y_norm"]["mean"], state["y_norm"]["std"]),
    )


def save_model(model: TrainedModel, directory: str | Path, extra: dict | None = None) -> None:
    """Write ``params.msgpack`` (flax msgpack: params and standardisers) and ``meta.json``.

    ``extra`` is stored under the ``"extra"`` key of ``meta.json`` (e.g. the training config).
    """
    directory = Path(directory)
    save_pytree(directory / "params.msgpack", model_state(model))
    meta = {
        "in_dim": model.in_dim,
        "out_dim": model.out_dim,
        "model_config": model.config.to_dict(),
        "extra": extra or {},
    }
    write_json(directory / "meta.json", meta)


def load_model(directory: str | Path) -> tuple[TrainedModel, dict]:
    """Inverse of :func:`save_model`; returns ``(model, meta)``."""
    directory = Path(directory)
    meta = read_json(directory / "meta.json")
    state = load_pytree(directory / "params.msgpack", as_jax=False)
    return model_from_state(MLPConfig.from_dict(meta["model_config"]), state), meta
