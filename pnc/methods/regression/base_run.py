"""The shared ``base`` training run, and the SWAG moments collected during it.

The base run is standard training (:func:`pnc.core.training.fit`: AdamW, early stopping on validation NLL
with the best parameters restored) whose returned parameters are the base model of P&C, Laplace
and SWAG. On the schedule ``train_config.collection`` (the authors': every step from step 1,000) it
also keeps running first and second moments of the flattened iterates and the last ``K`` deviation
columns ``theta_i - mean_i`` (Maddox et al., 2019); collecting them does not change the trajectory.
SWAG (:mod:`pnc.methods.regression.swag`) samples from these moments; Subspace Inference
(:mod:`pnc.methods.regression.subspace`) trains its own shorter run with another schedule through
the same function and takes its PCA subspace from the deviations.
"""

from __future__ import annotations

import dataclasses
import time
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from pnc.core.mlp import MLPConfig, Params
from pnc.core.training import (
    Collection,
    FitResult,
    Observer,
    TrainConfig,
    TrainedModel,
    collects_at,
    fit,
    fit_summary,
    standardized_validation,
    standardizers,
)
from pnc.methods.regression.runs import TrainingRun, TrainingSpec

Array = jax.Array


# ----------------------------------------------------------------------------- collection


def base_spec() -> TrainingSpec:
    """The spec of the shared base run (``run_id == "base"``); its SWAG collection schedule is the
    training recipe's ``collection`` (:class:`pnc.core.training.Collection`)."""
    return TrainingSpec("base", ())


class OnBaseRun:
    """Mixin for methods built post hoc on the shared ``base`` run (SWAG, Laplace, P&C): their
    :meth:`training_spec` is :func:`base_spec` and :meth:`train` is :func:`train_base`. Put it
    before :class:`pnc.methods.regression.contract.MethodBase` in the bases, which provides
    ``_check_config`` and ``_check_kind``.

    A base run whose spec has a ``steps`` option (P&C's own base run, ``base-steps{N}``,
    :mod:`pnc.studies.mujoco.grid`) trains with ``train_config.steps`` replaced by it; the only option a
    base run accepts."""

    run_kind: ClassVar[str] = "base"

    def training_spec(self, config) -> TrainingSpec:
        self._check_config(config)
        return base_spec()

    def train(self, spec, x, y, *, model_config, train_config, key, validation=None) -> TrainingRun:
        self._check_kind(spec, "base")
        options = dict(spec.options)
        unknown = sorted(set(options) - {"steps"})
        if unknown:
            raise ValueError(f"a base run accepts the option 'steps' only; got {unknown}")
        if "steps" in options:
            train_config = dataclasses.replace(train_config, steps=int(options["steps"]))
        return train_base(
            spec,
            x,
            y,
            model_config=model_config,
            train_config=train_config,
            key=key,
            validation=validation,
        )


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


def moments_observer(
    collection: Collection, schedule: tuple[Array, Array] | None = None
) -> Observer:
    """The :class:`pnc.core.training.Observer` that adds the collected iterates to :class:`SWAGMoments`.

    ``schedule``: ``(start_step, every)`` as traced integers, used instead of ``collection``'s
    (whose ``rank`` alone is then read), so that runs differing only in their schedule share one
    compiled program.
    """
    start_step, every = (collection.start_step, collection.every) if schedule is None else schedule

    def init(params: Params) -> SWAGMoments:
        return init_moments(ravel_pytree(params)[0].shape[0], collection.rank)

    def update(moments: SWAGMoments, params: Params, t: Array) -> SWAGMoments:
        return jax.lax.cond(
            collects_at(t, start_step, every),
            lambda m: update_moments(m, ravel_pytree(params)[0]),
            lambda m: m,
            moments,
        )

    return Observer(init, update)


def fit_swag(
    model_config: MLPConfig,
    train_config: TrainConfig,
    x: Array,
    y: Array,
    key: Array,
    validation: tuple[Array, Array] | None = None,
    schedule: tuple[Array, Array] | None = None,
) -> FitResult:
    """:func:`pnc.core.training.fit` that also collects SWAG moments (``result.observed``) on the
    schedule ``train_config.collection``; pure and jittable. Collecting does not change the
    trajectory, so the parameters equal those of :func:`pnc.core.training.fit` with the same key.

    ``schedule``: ``(start_step, every)``, traced integers that replace the collection's (its
    ``rank`` is still read): under ``jit`` with ``train_config`` static, runs that differ only in
    when they collect then share one compiled program.

    ``observed.deviations`` holds ``min(K, n)`` valid columns (ring buffer, collection order modulo
    ``K``), ``n = observed.n`` the snapshots taken (fewer than scheduled after an early stop).
    """
    observer = moments_observer(train_config.collection, schedule)
    return fit(model_config, train_config, x, y, key, validation, observer)


# ----------------------------------------------------------------------------- the base run


def train_base(
    spec: TrainingSpec,
    x: np.ndarray,
    y: np.ndarray,
    *,
    model_config: MLPConfig,
    train_config: TrainConfig,
    key: Array,
    validation: tuple[np.ndarray, np.ndarray] | None = None,
) -> TrainingRun:
    """Train a base-like run on raw ``x [N, in]``, ``y [N, D]`` (``validation``: raw, for early
    stopping), collecting SWAG moments on ``train_config.collection``.

    ``run.extras["swag"]`` holds ``mean``, ``sq_mean``, ``var`` (each ``[P]``, flattened in
    ``jax.flatten_util.ravel_pytree`` order of the params), ``deviations [K, P]`` and
    ``n_snapshots``. Used by the shared ``base`` run and by Subspace Inference's own run.
    """
    if model_config.dropout_rate != 0.0:
        raise ValueError("the base run trains without dropout; got dropout_rate > 0")
    x_norm, y_norm = standardizers(x, y, train_config)
    run = jax.jit(fit_swag, static_argnums=(0, 1))
    # the schedule is traced: the base run and a Subspace run of the same length and rank (its
    # own schedule) run one compiled program
    collection = train_config.collection
    schedule = (jnp.int32(collection.start_step), jnp.int32(collection.every))
    generic = dataclasses.replace(train_config, collection=Collection(0, 1, collection.rank))
    t0 = time.perf_counter()
    result = run(
        model_config,
        generic,
        x_norm.transform(jnp.asarray(x, jnp.float32)),
        y_norm.transform(jnp.asarray(y, jnp.float32)),
        key,
        standardized_validation(validation, x_norm, y_norm),
        schedule,
    )
    jax.block_until_ready(result)
    train_s = time.perf_counter() - t0
    moments = result.observed
    n = jnp.maximum(moments.n, 1.0)
    extras = {
        "swag": {
            "mean": moments.mean,
            "sq_mean": moments.sq_mean,
            "var": moments.m2 / n,
            "deviations": moments.deviations,
            "n_snapshots": moments.n,
        }
    }
    meta = dict(fit_summary(result), train_s=train_s, train_config=train_config.to_dict())
    return TrainingRun(
        spec, TrainedModel(model_config, result.params, x_norm, y_norm), extras, meta
    )


def swag_statistics(run: TrainingRun) -> dict[str, Array]:
    """The SWAG arrays of a base-like run, checked against the model's parameter count.

    ``deviations`` is returned most recent first (the ring buffer unrolled), so that
    ``deviations[:k]`` are the last ``k`` deviation columns; ``n_valid`` (a Python int) counts the
    valid ones, ``min(K, n_snapshots)``. A run that stopped before its first snapshot gives the
    authors' fallback: ``mean`` = the run's parameters, zero variance, no deviation column.
    """
    if run.spec.kind not in {"base", "subspace"} or "swag" not in run.extras:
        raise ValueError(f"SWAG statistics live in a base run; got a {run.spec.kind!r} run")
    stats = {k: jnp.asarray(v) for k, v in run.extras["swag"].items()}
    flat = ravel_pytree(run.model.params)[0]
    n_params = flat.shape[0]
    if stats["mean"].shape != (n_params,) or stats["deviations"].shape[1] != n_params:
        raise ValueError("SWAG statistics do not match the model's parameters")
    rank = stats["deviations"].shape[0]
    n_snap = int(stats["n_snapshots"])
    if n_snap == 0:
        stats["mean"], stats["sq_mean"] = flat, jnp.square(flat)
        stats["var"] = jnp.zeros_like(flat)
    last = n_snap - 1
    stats["deviations"] = stats["deviations"][(last - np.arange(rank)) % rank]
    stats["n_valid"] = min(rank, n_snap)
    return stats


def snapshot_problems(
    method_id: str, collection, run_steps: int, where: str, rank: int | None
) -> tuple[list[str], list[str]]:
    """A run's collected iterates (:class:`pnc.core.training.Collection` over ``run_steps``) checked for
    a snapshot method (SWAG, Subspace): it needs >= 2 when the run goes to its step cap, and a
    ``rank`` above the kept columns is cut (a warning).

    Returns:
        ``(errors, warnings)`` (see
        :meth:`pnc.methods.regression.contract.MethodBase.study_problems`).
    """
    n_snap = collection.n_snapshots(run_steps)
    if n_snap < 2:
        return [
            f"{where} = {run_steps} steps collect {n_snap} iterate(s) (from step "
            f"{collection.start_step}, every {collection.every}) for methods.{method_id}; it "
            "needs >= 2"
        ], []
    kept = min(collection.rank, n_snap)
    if rank is not None and rank > kept:
        return [], [
            f"methods.{method_id}.rank = {rank} is above the {kept} deviation columns its run "
            f"keeps; {kept} are used"
        ]
    return [], []
