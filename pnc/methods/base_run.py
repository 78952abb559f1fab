"""The shared ``base`` training run, and the SWAG moments collected during it.

The base run is standard training (the scan of :func:`pnc.train.make_train_step`) whose final
iterate is the base model of P&C, Laplace, SWAG and Subspace Inference. Over the final part of
training it also keeps running first and second moments of the flattened parameters and the last
``K`` deviation columns ``theta_i - mean_i`` (Maddox et al., 2019); collecting them does not change
the trajectory. SWAG (:mod:`pnc.methods.swag`) samples from these moments and Subspace Inference
(:mod:`pnc.methods.subspace`) takes its PCA subspace from the deviations.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from pnc.methods.base import TrainingRun, TrainingSpec, standardise
from pnc.mlp import MLPConfig, Params
from pnc.train import TrainConfig, TrainedModel, TrainState, init_train_state, make_train_step

Array = jax.Array


# ----------------------------------------------------------------------------- collection


@dataclasses.dataclass(frozen=True)
class SWAGCollection:
    """When the base run collects SWAG statistics.

    Attributes:
        start_frac: collection covers the steps after ``floor(start_frac * steps)`` (default: the
            second half of training).
        every: collect one snapshot every ``every`` optimiser steps; snapshots are aligned so that
            the final iterate is the last one.
        rank: ``K``, the number of most recent deviation columns kept (fewer if fewer snapshots).
    """

    start_frac: float = 0.5
    every: int = 50
    rank: int = 20

    def __post_init__(self) -> None:
        if not 0.0 <= self.start_frac < 1.0:
            raise ValueError(f"start_frac must be in [0, 1), got {self.start_frac}")
        if self.every < 1 or self.rank < 1:
            raise ValueError(f"every and rank must be >= 1, got {self.every}, {self.rank}")

    def n_snapshots(self, steps: int) -> int:
        """Number of snapshots collected in a run of ``steps`` optimiser steps."""
        return (steps - int(self.start_frac * steps)) // self.every

    def options(self) -> tuple[tuple[str, Any], ...]:
        """``TrainingSpec`` options: only the settings that differ from the defaults."""
        default = SWAGCollection()
        return tuple(
            (f"swag_{f.name}", getattr(self, f.name))
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != getattr(default, f.name)
        )

    @classmethod
    def from_options(cls, options: tuple[tuple[str, Any], ...]) -> SWAGCollection:
        kwargs = {}
        for name, value in options:
            if not name.startswith("swag_") or name[5:] not in {"start_frac", "every", "rank"}:
                raise ValueError(f"unknown base-run option {name!r}")
            kwargs[name[5:]] = value
        return cls(**kwargs)


def base_spec(collection: SWAGCollection | None = None) -> TrainingSpec:
    """The spec of the shared base run (``run_id == "base"`` with the default collection)."""
    return TrainingSpec("base", (collection or SWAGCollection()).options())


class SWAGMoments(NamedTuple):
    """Running SWAG statistics of the flattened parameters (``P`` entries).

    Attributes:
        n: number of snapshots collected so far (float scalar).
        mean: running first moment ``[P]``.
        sq_mean: running second moment ``[P]``.
        m2: running sum of squared deviations from the mean ``[P]`` (Welford), so that the diagonal
            variance ``m2 / n`` does not suffer the float32 cancellation of ``sq_mean - mean^2``.
        deviations: ring buffer of the last ``K`` deviations ``theta_i - mean_i``, ``[K, P]``.
    """

    n: Array
    mean: Array
    sq_mean: Array
    m2: Array
    deviations: Array


def init_moments(n_params: int, rank: int) -> SWAGMoments:
    """Empty moments of ``n_params`` parameters with a ``[rank, n_params]`` deviation buffer."""
    z = jnp.zeros((n_params,), jnp.float32)
    return SWAGMoments(jnp.zeros((), jnp.float32), z, z, z, jnp.zeros((rank, n_params)))


def update_moments(moments: SWAGMoments, theta: Array) -> SWAGMoments:
    """Add one snapshot ``theta [P]`` to the running moments (column ``n mod K`` of the buffer)."""
    n = moments.n + 1.0
    delta = theta - moments.mean
    mean = moments.mean + delta / n
    sq_mean = moments.sq_mean + (jnp.square(theta) - moments.sq_mean) / n
    m2 = moments.m2 + delta * (theta - mean)
    slot = jnp.mod(moments.n.astype(jnp.int32), moments.deviations.shape[0])
    deviations = moments.deviations.at[slot].set(theta - mean)
    return SWAGMoments(n, mean, sq_mean, m2, deviations)


def fit_params_swag(
    model_config: MLPConfig,
    train_config: TrainConfig,
    collection: SWAGCollection,
    x: Array,
    y: Array,
    key: Array,
) -> tuple[Params, Array, SWAGMoments]:
    """Standard training on standardised data that also collects SWAG moments; pure and jittable.

    The key is used exactly as in :func:`pnc.train.fit_params`, so the final iterate equals the one
    of plain training with the same key.

    Returns:
        ``(params, losses [steps], moments)``; ``moments.deviations`` holds
        ``min(K, n_snapshots)`` valid columns (all of them in collection order modulo ``K``).
    """
    steps = train_config.steps
    n_snap = collection.n_snapshots(steps)
    if n_snap < 2:
        raise ValueError(
            f"SWAG collection needs >= 2 snapshots, got {n_snap} "
            f"(steps={steps}, start_frac={collection.start_frac}, every={collection.every})"
        )
    rank = min(collection.rank, n_snap)
    pre = steps - n_snap * collection.every
    k_init, k_data = jax.random.split(key)
    state = init_train_state(model_config, train_config, x.shape[-1], k_init)
    step = make_train_step(model_config, train_config, x, y)
    step_keys = jax.random.split(k_data, steps)
    state, pre_losses = jax.lax.scan(step, state, step_keys[:pre])
    flat, _ = ravel_pytree(state.params)

    def collect(carry: tuple[TrainState, SWAGMoments], keys: Array):
        state, moments = carry
        state, losses = jax.lax.scan(step, state, keys)
        moments = update_moments(moments, ravel_pytree(state.params)[0])
        return (state, moments), losses

    keys = step_keys[pre:].reshape(n_snap, collection.every, *step_keys.shape[1:])
    (state, moments), losses = jax.lax.scan(
        collect, (state, init_moments(flat.shape[0], rank)), keys
    )
    return state.params, jnp.concatenate([pre_losses, losses.reshape(-1)]), moments


# ----------------------------------------------------------------------------- the base run


def train_base(
    spec: TrainingSpec,
    x: np.ndarray,
    y: np.ndarray,
    *,
    model_config: MLPConfig,
    train_config: TrainConfig,
    key: Array,
) -> TrainingRun:
    """Train the shared ``base`` run on raw ``x [N, in]``, ``y [N, D]``.

    ``run.extras["swag"]`` holds ``mean``, ``sq_mean``, ``var`` (each ``[P]``, flattened in
    ``jax.flatten_util.ravel_pytree`` order of the params), ``deviations [K, P]`` and
    ``n_snapshots``.
    """
    if spec.kind != "base":
        raise ValueError(f"expected a base run spec, got {spec.kind!r}")
    if model_config.dropout_rate != 0.0:
        raise ValueError("the base run trains without dropout; got dropout_rate > 0")
    collection = SWAGCollection.from_options(spec.options)
    x_norm, y_norm = standardise(x, y, model_config.out_dim)
    fit = jax.jit(fit_params_swag, static_argnums=(0, 1, 2))
    t0 = time.perf_counter()
    params, losses, moments = fit(
        model_config,
        train_config,
        collection,
        x_norm.transform(jnp.asarray(x, jnp.float32)),
        y_norm.transform(jnp.asarray(y, jnp.float32)),
        key,
    )
    jax.block_until_ready(moments)
    train_s = time.perf_counter() - t0
    extras = {
        "swag": {
            "mean": moments.mean,
            "sq_mean": moments.sq_mean,
            "var": moments.m2 / moments.n,
            "deviations": moments.deviations,
            "n_snapshots": moments.n,
        }
    }
    losses = np.asarray(losses)
    meta = {
        "train_s": train_s,
        "loss_first": float(losses[:50].mean()),
        "loss_last": float(losses[-50:].mean()),
        "train_config": dataclasses.asdict(train_config),
        "swag_collection": dataclasses.asdict(collection),
    }
    return TrainingRun(spec, TrainedModel(model_config, params, x_norm, y_norm), extras, meta)


def swag_statistics(run: TrainingRun) -> dict[str, Array]:
    """The SWAG arrays of a base run, checked against the model's parameter count.

    ``deviations`` is returned most recent first (the ring buffer unrolled), so that
    ``deviations[:k]`` are the last ``k`` deviation columns.
    """
    if run.spec.kind != "base" or "swag" not in run.extras:
        raise ValueError(f"SWAG statistics live in a base run; got a {run.spec.kind!r} run")
    stats = {k: jnp.asarray(v) for k, v in run.extras["swag"].items()}
    n_params = ravel_pytree(run.model.params)[0].shape[0]
    if stats["mean"].shape != (n_params,) or stats["deviations"].shape[1] != n_params:
        raise ValueError("SWAG statistics do not match the model's parameters")
    rank = stats["deviations"].shape[0]
    last = int(stats["n_snapshots"]) - 1
    stats["deviations"] = stats["deviations"][(last - np.arange(rank)) % rank]
    return stats
