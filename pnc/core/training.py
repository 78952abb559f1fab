"""Training the Gaussian MLP: standardisation, the jitted AdamW loop with early stopping, and
saving without pickle.

The training loop is one ``lax.scan`` over chunks of ``eval_every`` optimiser steps inside one
``jit``; minibatches are drawn with replacement from a PRNG key, so a run is a pure function of
``(data, config, key)``. With ``patience`` set, the validation NLL is computed after every chunk
(and after the last step); training stops once it has not improved for ``patience`` checks, and
the parameters with the best validation NLL are returned (the authors' recipe: AdamW, checks every
100 steps, patience 10, at most 5,000 steps). An optional :class:`Observer` sees every iterate
(SWAG and Subspace Inference collect their moments that way).

:func:`fit` is that pure function on already standardised arrays (``vmap`` it over keys to train an
ensemble); :func:`fit_params` returns only ``(params, losses)``; :func:`train` adds standardisation
and returns a :class:`TrainedModel`.
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

from pnc.core.mlp import GaussianMLP, MLPConfig, Params, forward, gaussian_nll, init_params
from pnc.runtime.io import load_pytree, read_json, save_pytree, write_json

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

    @classmethod
    def identity(cls, dim: int) -> Standardizer:
        """The identity map on ``dim`` columns (``mean = 0``, ``std = 1``): no standardisation."""
        return cls(jnp.zeros((dim,), jnp.float32), jnp.ones((dim,), jnp.float32))

    def transform(self, v: Array) -> Array:
        return (v - self.mean) / self.std

    def inverse(self, v: Array) -> Array:
        return v * self.std + self.mean


@dataclasses.dataclass(frozen=True)
class Collection:
    """Which optimiser iterates an :class:`Observer` collects (SWAG, Subspace Inference).

    The iterate after step ``t`` (0-based, i.e. after ``t + 1`` updates) is collected when
    ``t >= start_step`` and ``(t - start_step) % every == 0`` (the authors' schedule: SWAG from step
    1,000 on every step; Subspace every 50 steps from step 1,000).

    Attributes:
        start_step: first collected step.
        every: collection period in steps.
        rank: ``K``, the number of most recent deviation columns kept.
    """

    start_step: int = 1000
    every: int = 1
    rank: int = 20

    def __post_init__(self) -> None:
        if self.start_step < 0 or self.every < 1 or self.rank < 1:
            raise ValueError(f"collection needs start_step >= 0, every >= 1, rank >= 1; got {self}")

    def n_snapshots(self, steps: int) -> int:
        """Snapshots collected by a run of ``steps`` steps that does not stop early."""
        if steps <= self.start_step:
            return 0
        return (steps - 1 - self.start_step) // self.every + 1

    def collects(self, t: Array) -> Array:
        """Whether the iterate after (0-based) step ``t`` is collected (boolean scalar)."""
        return collects_at(t, self.start_step, self.every)


def collects_at(t: Array, start_step: int | Array, every: int | Array) -> Array:
    """Whether the iterate after (0-based) step ``t`` is collected on the schedule ``start_step``,
    ``every`` (:class:`Collection`; the two may be traced integers)."""
    return (t >= start_step) & (jnp.mod(t - start_step, every) == 0)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Optimisation recipe (paper, Appendix C: at most 5,000 steps of batch 64; the authors' code:
    AdamW with weight decay 1e-4 and early stopping on validation NLL).

    Attributes:
        steps: maximum number of optimiser steps.
        batch_size: minibatch size (rows drawn with replacement each step).
        learning_rate: Adam(W) learning rate.
        weight_decay: decoupled weight decay (AdamW) coefficient; 0 gives plain Adam.
        patience: early stopping: stop after this many validation checks without improvement and
            restore the best parameters; ``None`` trains all ``steps`` and returns the last iterate.
        eval_every: steps between validation checks (a check also follows the last step).
        standardize: train on standardised inputs and targets (statistics of the training rows);
            ``False`` trains on raw units. Predictions are mapped back either way.
        collection: the iterates SWAG / Subspace Inference collect in a base run.
    """

    steps: int = 5000
    batch_size: int = 64
    learning_rate: float = 1e-3
    weight_decay: float = 0.0
    patience: int | None = None
    eval_every: int = 100
    standardize: bool = True
    collection: Collection = Collection()

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1 or self.learning_rate <= 0:
            raise ValueError(f"steps and batch_size must be >= 1 and learning_rate > 0; got {self}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"patience must be >= 1 (or None), got {self.patience}")
        if self.eval_every < 1:
            raise ValueError(f"eval_every must be >= 1, got {self.eval_every}")
        if isinstance(self.collection, dict):
            object.__setattr__(self, "collection", Collection(**self.collection))

    @property
    def early_stopping(self) -> bool:
        return self.patience is not None

    def optimizer(self) -> optax.GradientTransformation:
        if self.weight_decay > 0:
            return optax.adamw(self.learning_rate, weight_decay=self.weight_decay)
        return optax.adam(self.learning_rate)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        d = dict(d)
        if "collection" in d and isinstance(d["collection"], dict):
            d["collection"] = Collection(**d["collection"])
        return cls(**d)


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


class Observer(NamedTuple):
    """A pure side computation over the iterates (optax-style pair of functions).

    Attributes:
        init: ``params -> state``, the empty state.
        update: ``(state, params, t) -> state``, called with the iterate after (0-based) step ``t``
            for every step actually taken (never after an early stop).
    """

    init: Callable[[Params], Any]
    update: Callable[[Any, Params, Array], Any]


class FitResult(NamedTuple):
    """What :func:`fit` returns.

    Attributes:
        params: the best-validation parameters (early stopping) or the last iterate.
        losses: minibatch NLL per step ``[steps]``; ``NaN`` for steps not taken (early stop).
        val_nll: validation NLL per check ``[n_checks]``; ``NaN`` for checks not made (all
            ``NaN`` without early stopping).
        best_step: number of updates behind ``params`` (scalar int).
        steps_taken: number of updates made (scalar int).
        observed: the :class:`Observer`'s final state (``None`` without an observer).
    """

    params: Params
    losses: Array
    val_nll: Array
    best_step: Array
    steps_taken: Array
    observed: Any


def fit(
    model_config: MLPConfig,
    train_config: TrainConfig,
    x: Array,
    y: Array,
    key: Array,
    validation: tuple[Array, Array] | None = None,
    observer: Observer | None = None,
) -> FitResult:
    """Train from scratch on standardised data; pure and jittable (``vmap`` over ``key``).

    Steps run in chunks of ``eval_every`` (the last chunk padded with skipped steps); with
    ``train_config.patience`` set, the validation NLL is checked after every chunk, the best
    parameters kept, and the remaining chunks skipped once ``patience`` checks in a row brought no
    improvement. Without early stopping the result equals plain training for ``steps`` steps.

    Args:
        x: standardised inputs ``[N, in_dim]``.
        y: standardised targets ``[N, out_dim]``.
        key: PRNG key; split into an initialisation key and a data-order key (one key per step).
        validation: standardised ``(x_val [V, in_dim], y_val [V, out_dim])``; required with early
            stopping.
        observer: optional :class:`Observer` of the iterates.

    Returns:
        A :class:`FitResult`.
    """
    tc = train_config
    if tc.early_stopping and validation is None:
        raise ValueError("early stopping (train_config.patience) needs validation data")
    chunk = tc.eval_every if tc.early_stopping else tc.steps
    n_chunks = -(-tc.steps // chunk)
    k_init, k_data = jax.random.split(key)
    state = init_train_state(model_config, tc, x.shape[-1], k_init)
    step = make_train_step(model_config, tc, x, y)
    keys = jax.random.split(k_data, tc.steps)
    pad = n_chunks * chunk - tc.steps
    if pad:
        keys = jnp.concatenate([keys, jnp.repeat(keys[-1:], pad, axis=0)])
    keys = keys.reshape(n_chunks, chunk, *keys.shape[1:])
    ts = jnp.arange(n_chunks * chunk, dtype=jnp.int32).reshape(n_chunks, chunk)
    obs0 = observer.init(state.params) if observer is not None else None
    model = GaussianMLP(model_config)

    def one_step(carry, inp):
        state, obs = carry
        k, t = inp

        def take(_):
            new_state, loss = step(state, k)
            new_obs = obs if observer is None else observer.update(obs, new_state.params, t)
            return (new_state, new_obs), loss

        def skip(_):
            return (state, obs), jnp.full((), jnp.nan, jnp.float32)

        return jax.lax.cond(t < tc.steps, take, skip, None)

    def one_chunk(carry, inp):
        state, obs, best, best_val, best_step, bad, stopped = carry
        k_chunk, t_chunk = inp

        def run(_):
            (s, o), losses = jax.lax.scan(one_step, (state, obs), (k_chunk, t_chunk))
            return s, o, losses

        def frozen(_):
            return state, obs, jnp.full((chunk,), jnp.nan, jnp.float32)

        state, obs, losses = jax.lax.cond(stopped, frozen, run, None)
        if not tc.early_stopping:
            return (state, obs, best, best_val, best_step, bad, stopped), (losses, jnp.nan)
        v = nll_loss(state.params, model, validation[0], validation[1])
        improved = jnp.logical_not(stopped) & (v < best_val)
        best = jax.tree.map(lambda a, b: jnp.where(improved, a, b), state.params, best)
        best_val = jnp.where(improved, v, best_val)
        best_step = jnp.where(improved, jnp.minimum(t_chunk[-1] + 1, tc.steps), best_step)
        bad = jnp.where(stopped, bad, jnp.where(improved, 0, bad + 1))
        v_out = jnp.where(stopped, jnp.nan, v)
        stopped = stopped | (bad >= tc.patience)
        return (state, obs, best, best_val, best_step, bad, stopped), (losses, v_out)

    carry = (
        state,
        obs0,
        state.params,
        jnp.asarray(jnp.inf, jnp.float32),
        jnp.asarray(0, jnp.int32),
        jnp.asarray(0, jnp.int32),
        jnp.asarray(False),
    )
    (state, obs, best, _, best_step, _, _), (losses, val_nll) = jax.lax.scan(
        one_chunk, carry, (keys, ts)
    )
    losses = losses.reshape(-1)[: tc.steps]
    steps_taken = jnp.sum(jnp.isfinite(losses)).astype(jnp.int32)
    if not tc.early_stopping:
        best, best_step = state.params, jnp.asarray(tc.steps, jnp.int32)
    return FitResult(best, losses, jnp.asarray(val_nll, jnp.float32), best_step, steps_taken, obs)


def fit_summary(result: FitResult) -> dict:
    """JSON-ready summary of a :class:`FitResult` (lists for a member-batched result).

    Keys: ``loss_first`` / ``loss_last`` (mean minibatch NLL of the first / last 50 steps taken),
    ``steps_taken``, ``best_step``, ``stopped_early``, ``best_val_nll`` (``None`` without early
    stopping), ``val_nll`` (the checks made).
    """
    losses = np.asarray(result.losses, np.float64)
    val = np.asarray(result.val_nll, np.float64)
    taken = np.asarray(result.steps_taken)
    best = np.asarray(result.best_step)

    def one(lo, va, n, b) -> dict:
        lo = lo[: int(n)]
        va = va[np.isfinite(va)]
        return {
            "loss_first": float(lo[:50].mean()) if len(lo) else None,
            "loss_last": float(lo[-50:].mean()) if len(lo) else None,
            "steps_taken": int(n),
            "best_step": int(b),
            "stopped_early": bool(int(n) < losses.shape[-1]),
            "best_val_nll": float(va.min()) if len(va) else None,
            "val_nll": [float(v) for v in va],
        }

    if losses.ndim == 1:
        return one(losses, val, taken, best)
    rows = [one(*args) for args in zip(losses, val, taken, best, strict=True)]
    return {k: [r[k] for r in rows] for k in rows[0]}


def fit_params(
    model_config: MLPConfig,
    train_config: TrainConfig,
    x: Array,
    y: Array,
    key: Array,
    validation: tuple[Array, Array] | None = None,
) -> tuple[Params, Array]:
    """:func:`fit` returning only ``(params, losses [steps])``."""
    result = fit(model_config, train_config, x, y, key, validation)
    return result.params, result.losses


def standardizers(
    x: np.ndarray, y: np.ndarray, train_config: TrainConfig
) -> tuple[Standardizer, Standardizer]:
    """The input/target standardisers of training rows ``x [N, in]``, ``y [N, D]`` (identities when
    ``train_config.standardize`` is false)."""
    if not train_config.standardize:
        return Standardizer.identity(x.shape[1]), Standardizer.identity(y.shape[1])
    return Standardizer.fit(x), Standardizer.fit(y)


def standardized_validation(
    validation: tuple[np.ndarray, np.ndarray] | None, x_norm: Standardizer, y_norm: Standardizer
) -> tuple[Array, Array] | None:
    """Raw ``(x_val, y_val)`` mapped with the training standardisers (``None`` passes through)."""
    if validation is None:
        return None
    xv, yv = (np.asarray(a) for a in validation)
    if xv.ndim != 2 or yv.ndim != 2 or xv.shape[0] != yv.shape[0]:
        raise ValueError(
            f"validation x and y must be [V, *] with the same V, got {xv.shape}, {yv.shape}"
        )
    if xv.shape[1] != x_norm.mean.shape[0] or yv.shape[1] != y_norm.mean.shape[0]:
        raise ValueError(
            f"validation dims {xv.shape[1]}, {yv.shape[1]} differ from the training dims "
            f"{x_norm.mean.shape[0]}, {y_norm.mean.shape[0]}"
        )
    return (
        x_norm.transform(jnp.asarray(xv, jnp.float32)),
        y_norm.transform(jnp.asarray(yv, jnp.float32)),
    )


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
    validation: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[TrainedModel, np.ndarray]:
    """Standardise ``x [N, in]``, ``y [N, D]`` with their own statistics and train the Gaussian MLP.

    Args:
        validation: raw ``(x_val, y_val)`` for early stopping (required when
            ``train_config.patience`` is set).

    Returns:
        ``(model, losses)``; ``losses`` is the per-step minibatch NLL, ``[steps]`` (``NaN`` after an
        early stop).
    """
    x = np.asarray(x)
    y = np.asarray(y)
    if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must be [N, *] with the same N, got {x.shape} and {y.shape}")
    model_config = model_config or MLPConfig(out_dim=y.shape[1])
    if model_config.out_dim != y.shape[1]:
        raise ValueError(f"model out_dim {model_config.out_dim} != target dim {y.shape[1]}")
    train_config = train_config or TrainConfig()
    x_norm, y_norm = standardizers(x, y, train_config)
    run = jax.jit(fit_params, static_argnums=(0, 1))
    params, losses = run(
        model_config,
        train_config,
        x_norm.transform(jnp.asarray(x)),
        y_norm.transform(jnp.asarray(y)),
        key,
        standardized_validation(validation, x_norm, y_norm),
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
