"""The mechanism stage (paper Figures 1 B/C and 3): per-point diagnostics of the stored P&C members
(:mod:`pnc.studies.mujoco.pnc_members`) and of the other methods' samples.

:func:`mechanism_frame`: for up to ``points_per_split`` points of ID, Near, Mid (where
   present) and Far, the tidy long table of :data:`pnc.studies.mujoco.mechanism_columns.MECHANISM_COLUMNS`: the P&C
   ensemble's disagreement, the two parts of its total-variance OOD score (the members' mean
   variance and their disagreement, in the evaluation's units), the distance to the nearest
   training input, the Mahalanobis distance in the base network's second hidden layer,
   the probe and analytic sketches of the corrected sensitivity (:mod:`pnc.core.diagnostics`), the ridge
   leverage of each corrected layer, and ``||dh||``/``||dy||`` of every member or sample of P&C,
   P&C without correction, SWAG, Laplace and Subspace.

Randomness is a pure function of names: the points of a split come from
``derive_key(env, seed, "mechanism", split)``, the probes from
``derive_key(env, seed, "mechanism", "probes")``; the methods' members and samples use the keys
of the evaluation (:mod:`pnc.studies.mujoco.stages`), so they are the ensembles that were scored.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from pnc.core import diagnostics
from pnc.core.keys import derive_key
from pnc.core.mlp import Params, forward, hidden_activations
from pnc.core.perturb_correct import (
    PnCConfig,
    member_subsets,
    perturbation_bases,
)
from pnc.core.predictive import Predictive, epistemic_variance
from pnc.core.training import Standardizer
from pnc.methods.regression.runs import TrainingRun
from pnc.runtime.io import (
    ArtifactError,
    rebuild_hint,
)
from pnc.studies.mujoco.evaluate import score_parts
from pnc.studies.mujoco.mechanism_columns import (
    DISTANCE_QUANTITY,
    MECHANISM_COLUMNS,
    MECHANISM_LEVERAGE_PREFIX,
    MECHANISM_METHODS,
    MECHANISM_SPLITS,
)
from pnc.studies.mujoco.pnc_members import load_pnc_members, selected_point, standardised_pool
from pnc.studies.mujoco.stages import load_split_arrays, restore_point

_LOG = logging.getLogger("pnc.workflow")

#: The Mahalanobis covariance ridge, relative to the mean of the covariance diagonal.
MAHALANOBIS_RIDGE = 1e-4
#: The hidden layer (0-based) whose activations the Mahalanobis distance uses: the second.
MAHALANOBIS_LAYER = 1


@dataclasses.dataclass(frozen=True)
class MechanismSettings:
    """The ``mechanism:`` section of the workflow config (defaults: the paper's Figure 3).

    Attributes:
        points_per_split: at most this many points of each split (drawn without replacement).
        probes: ``J``, random probes of the finite-difference sketch.
        probe_eps: probe radius relative to the selected ``sigma`` (``eps = probe_eps * sigma``).
        bootstrap_points: Theorem 3's quantities (:func:`bootstrap_rank_frame`) at the first this
            many points of each split.
        bootstrap_members: ... over the correction subsets of the first this many members.
    """

    points_per_split: int = 1000
    probes: int = 16
    probe_eps: float = 0.01
    bootstrap_points: int = 100
    bootstrap_members: int = 16

    def __post_init__(self) -> None:
        if int(self.bootstrap_points) < 1 or int(self.bootstrap_members) < 2:
            raise ValueError(
                f"bootstrap_points must be >= 1 and bootstrap_members >= 2, got "
                f"{self.bootstrap_points}, {self.bootstrap_members}"
            )
        if int(self.points_per_split) < 1 or int(self.probes) < 1:
            raise ValueError(
                f"points_per_split and probes must be >= 1, got {self.points_per_split}, "
                f"{self.probes}"
            )
        if not (math.isfinite(self.probe_eps) and self.probe_eps > 0):
            raise ValueError(f"probe_eps must be finite and > 0, got {self.probe_eps}")


# ----------------------------------------------------------------------------- samples


def parameter_samples(method_id: str, posterior: Any, key: jax.Array) -> tuple[Params, Params]:
    """The parameter samples a method's ``predict`` evaluates, and its reference network.

    Each method's ``parameter_samples`` reproduces its sampling with the same key use as its
    ``predict``: P&C (with or without correction): the members; SWAG: ``swag_sample`` for each of
    ``jax.random.split(key, n_samples)``; Laplace: ``sample_params`` likewise; Subspace: the
    retained coordinates ``z`` mapped to ``theta_SWA + z B``. The reference network is the
    trained network for P&C and Laplace (its MAP), the SWA mean for SWAG and Subspace.

    Returns:
        ``(samples, reference)``: a parameter pytree with a leading ``[S]`` axis, and one without.
    """
    from pnc.methods import regression as registry

    if method_id not in MECHANISM_METHODS:
        raise ValueError(
            f"no parameter samples for method {method_id!r}; known: {MECHANISM_METHODS}"
        )
    return registry.get(method_id).parameter_samples(posterior, key)


def perturbation_norms(samples: Params, reference: Params, x: jax.Array, mlp_config) -> tuple:
    """Per sample and point: ``||dh||`` at the first hidden layer, ``||dy||`` of the mean, ``[S, N]``.

    ``dh = h_1^{(s)}(x) - h_1^{ref}(x)`` (post-activations, :func:`pnc.core.mlp.hidden_activations`) and
    ``dy = mu^{(s)}(x) - mu^{ref}(x)`` (:func:`pnc.core.mlp.forward`, standardised units).
    """
    return _norms(samples, reference, x, mlp_config=mlp_config)


@functools.partial(jax.jit, static_argnames=("mlp_config",))
def _norms(samples, reference, x, *, mlp_config):
    def stats(p):
        return hidden_activations(p, x, mlp_config)[0], forward(p, x, mlp_config)[0]

    h0, y0 = stats(reference)
    hs, ys = jax.lax.map(stats, samples)
    return jnp.linalg.norm(hs - h0[None], axis=-1), jnp.linalg.norm(ys - y0[None], axis=-1)


# ----------------------------------------------------------------------------- points


def point_rows(key: jax.Array, n_rows: int, limit: int) -> np.ndarray:
    """``min(limit, n_rows)`` distinct rows of a split, drawn without replacement, sorted."""
    if n_rows < 1:
        raise ValueError("the split is empty")
    take = min(int(limit), n_rows)
    return np.sort(np.asarray(jax.random.permutation(key, n_rows)[:take]))


def perturbation_second_moment(config: PnCConfig) -> float:
    """``s^2`` with ``E[v v^T] = s^2 I_K`` for one layer's P&C coefficients ``v``.

    ``sigma^2`` for ``perturbation_norm="gaussian"`` (``v = sigma z``), ``sigma^2 / K`` for
    ``"radius"`` (``v = sigma z / ||z||``, uniform on the sphere of radius ``sigma``).
    """
    if config.perturbation_norm == "radius":
        return config.sigma**2 / config.rank
    return config.sigma**2


def _leverage(y_cal: jax.Array, y: jax.Array, ridge: float) -> np.ndarray:
    """:func:`pnc.core.diagnostics.ridge_leverage` in float64 (the Gram is ill-conditioned in float32)."""
    with jax.enable_x64(True):
        out = diagnostics.ridge_leverage(
            jnp.asarray(np.asarray(y_cal), jnp.float64),
            jnp.asarray(np.asarray(y), jnp.float64),
            float(ridge),
        )
        return np.asarray(out)


def _method_posteriors(
    env: str,
    seed: int,
    run: TrainingRun,
    selection: Mapping[str, Any],
    tables: Mapping[str, Mapping[str, Any]],
    pnc_config: PnCConfig,
    pnc_members: Params,
    x_cal: jax.Array,
    y_cal: jax.Array,
    run_dir: str | Path,
    *,
    validation_dir: str | Path | None = None,
) -> dict[str, tuple[Params, Params, str]]:
    """``{method: (samples, reference, config_id)}`` for the mechanism methods in the config;
    a method trained on its own run (Subspace) reads it from ``run_dir``'s sibling directory.
    With ``validation_dir``, a method that stores its posteriors is restored from the validation
    phase's ``{method}/{run_id}.npz`` (:func:`pnc.studies.mujoco.phases.read_posteriors`), not built."""
    from pnc.methods import regression as registry
    from pnc.studies.mujoco.phases import read_posteriors

    out = {"pnc": (pnc_members, run.model.params, "")}
    for method_id in MECHANISM_METHODS[1:]:
        if method_id not in tables:
            continue
        method = registry.get(method_id)
        if method_id == "pnc_nocorr":
            # the P&C perturbations themselves (same key, same sigma), without the refit
            keys = set(method.config_keys)
            fields = {k: v for k, v in dataclasses.asdict(pnc_config).items() if k in keys}
            config = method.make_config(fields)
            config_id = method.config_id(config)
        else:
            point = selected_point(selection, env, method_id, tables[method_id])
            config, config_id = point.config, point.config_id
        method_run = run
        if method_id != "pnc_nocorr" and point.spec != run.spec:
            # a method with its own training run (Subspace's trajectory), next to the base run
            method_run = TrainingRun.load(Path(run_dir).parent / point.run_id)
            _check_same_standardisation(run, method_run)
        build_key = derive_key(env, seed, method.key_id, "build")
        predict_key = derive_key(env, seed, method.key_id, "predict")
        if validation_dir is not None and method.stores_posteriors and method_id != "pnc_nocorr":
            stored_path = Path(validation_dir) / method_id / f"{point.run_id}.npz"
            try:
                posterior = restore_point(method, method_run, point, read_posteriors(stored_path))
            except ValueError as err:
                raise ArtifactError(f"{stored_path}: {err}; {rebuild_hint(stored_path)}") from err
            _LOG.info("%s %s: posterior restored from %s", method_id, config_id, stored_path)
        else:
            posterior = method.build(method_run, config, x_cal, y_cal, key=build_key)
        samples, reference = parameter_samples(method_id, posterior, predict_key)
        out[method_id] = (samples, reference, config_id)
    return out


def _check_same_standardisation(base: TrainingRun, other: TrainingRun) -> None:
    """Both runs must map data identically (they standardise with the same train rows)."""
    for name in ("x_norm", "y_norm"):
        a, b = getattr(base.model, name), getattr(other.model, name)
        if not (np.allclose(a.mean, b.mean) and np.allclose(a.std, b.std)):
            raise ValueError(
                f"run {other.spec.run_id!r} standardises differently from {base.spec.run_id!r} "
                f"({name}); they must be trained on the same train split"
            )


#: Theorem 3's per-point quantities in the mechanism table (``method`` ``pnc``): quantity -> key
#: of :func:`pnc.core.diagnostics.bootstrap_rank_terms` (``rank_shared``: the first member's subset
#: shared by all; ``rank_single_mean``: the mean over members of one subset's rank).
BOOTSTRAP_QUANTITIES: tuple[str, ...] = (
    "rank_mixture",
    "rank_shared",
    "rank_single_mean",
    "alignment",
    "rank_predicted",
    "trace_cv",
    "norm_cv",
)


def bootstrap_rank_frame(
    params: Params,
    mlp_config,
    config: PnCConfig,
    bases: dict[int, jax.Array],
    x_cal: jax.Array,
    x: jax.Array,
    subsets: jax.Array,
) -> dict[str, np.ndarray]:
    """Theorem 3 measured at points ``x [N, in_dim]`` for members corrected on ``subsets``.

    Each member's output-level corrected sensitivity ``A_{S_m}(x)`` (:func:`pnc.core.diagnostics.
    output_sensitivity`, ``[N, D, T]``, corrected on the rows ``subsets[m]`` of ``x_cal``) gives
    ``C_m = A_m A_m^T``, the member's first-order output covariance per unit perturbation; their
    mixture is bootstrapped P&C's, one of them alone that of P&C with one subset shared by all
    members (:func:`pnc.core.diagnostics.bootstrap_rank_terms`).

    Returns:
        ``{quantity: [N]}`` for :data:`BOOTSTRAP_QUANTITIES`.
    """
    sens = jax.vmap(
        lambda rows: diagnostics.output_sensitivity(
            params, mlp_config, bases, x_cal[rows], x, config.ridge, center=config.ridge_center
        )
    )(subsets)  # [M, N, D, T]
    terms = diagnostics.bootstrap_rank_terms(np.swapaxes(np.asarray(sens), 0, 1))
    single = terms.pop("rank_single")
    return {"rank_shared": single[:, 0], "rank_single_mean": single.mean(axis=1), **terms}


def mechanism_frame(
    *,
    env: str,
    seed: int,
    run_dir: str | Path,
    splits_dir: str | Path,
    members_dir: str | Path,
    selection: Mapping[str, Any],
    tables: Mapping[str, Mapping[str, Any]],
    settings: MechanismSettings = MechanismSettings(),
    validation_dir: str | Path | None = None,
) -> tuple[pd.DataFrame, dict]:
    """The per-point mechanism diagnostics of one (env, seed) as a tidy long table.

    Args:
        env, seed: which splits, keys and stored members.
        run_dir: the ``base`` training run.
        splits_dir: directory with ``splits.npz`` + ``manifest.json``.
        members_dir: the stored P&C members (:func:`pnc.studies.mujoco.pnc_members.write_pnc_members`).
        selection: ``selection.json`` (the selected configurations of SWAG, Laplace, Subspace).
        tables: ``{method id: grid table}`` of the methods that run (:func:`pnc.studies.mujoco.grid.
            read_tables`; mechanism methods absent from it are skipped).
        settings: points per split, probes and probe radius.
        validation_dir: the two-phase validation phase's directory of this (env, seed)
            (``results/validation/{env}/seed{seed}``). A method that stores its posteriors
            (:attr:`pnc.methods.regression.contract.MethodBase.stores_posteriors`: Subspace's
            chains) is then restored from ``{validation_dir}/{method}/{run_id}.npz`` instead of
            built again: the same samples, without running the chain a second time. ``None``: every
            posterior is built (the ``full`` evaluation stores none).

    Returns:
        ``(frame, info)``: the table (:data:`pnc.studies.mujoco.mechanism_columns.MECHANISM_COLUMNS`) and a JSON-able
        record of what was measured (configurations, sigma, eps, layers, sizes, seconds).
    """
    started = time.perf_counter()
    run = TrainingRun.load(run_dir)
    members, config, record = load_pnc_members(members_dir, run_dir)
    if record.get("env") != env or int(record.get("seed", -1)) != int(seed):
        raise ValueError(f"{members_dir} holds the members of {record.get('env')} seed "
                         f"{record.get('seed')}, not {env} seed {seed}")  # fmt: skip
    splits, _ = load_split_arrays(splits_dir, ["train", "id", "far"])
    model = run.model
    mlp_config = model.config
    x_train = model.x_norm.transform(jnp.asarray(splits["train"][0], jnp.float32))
    y_train = model.y_norm.transform(jnp.asarray(splits["train"][1], jnp.float32))
    x_pool = x_train
    if record.get("calibration_pool", "train") != "train":  # the rows index the members' pool
        x_pool = standardised_pool(run, splits_dir, record["calibration_pool"])[0]
    rows = record.get("calibration_rows")
    x_cal = x_pool if rows is None else x_pool[jnp.asarray(rows)]
    key = derive_key(env, seed, "pnc", "build")
    bases = perturbation_bases(model.params, mlp_config, config, key=key)
    posteriors = _method_posteriors(
        env, seed, run, selection, tables, config, members, x_train, y_train, run_dir,
        validation_dir=validation_dir,
    )  # fmt: skip
    subsets = member_subsets(key, x_cal.shape[0], config)
    if subsets is not None and config.sigma > 0:
        subsets = subsets[: settings.bootstrap_members]
    else:  # no bootstrap (every member corrects on D_cal) or nothing perturbed
        subsets = None
    # Every quantity is per point, so the points of all splits are evaluated together: the
    # correction chains on the calibration rows (the sensitivities, the probes, Theorem 3's
    # members) are then traced, compiled and computed once instead of once per split.
    points = _MechanismPoints.draw(env, seed, splits, settings)
    x = model.x_norm.transform(jnp.asarray(points.x_raw, jnp.float32))
    maha_layer = min(MAHALANOBIS_LAYER, mlp_config.n_hidden - 1)
    eps = settings.probe_eps * config.sigma
    point_values = _pnc_point_values(
        env, seed, run, members, config, bases, splits["train"][0], x_train, x_cal, points.x_raw,
        x, maha_layer=maha_layer, eps=eps, settings=settings,
    )  # fmt: skip
    boot = None
    if subsets is not None:  # Theorem 3 on the first points of each split
        boot = bootstrap_rank_frame(
            model.params,
            mlp_config,
            config,
            bases,
            x_cal,
            x[jnp.asarray(points.boot_rows)],
            subsets,
        )
    norms = {
        method_id: tuple(
            np.asarray(v) for v in perturbation_norms(samples, reference, x, mlp_config)
        )
        for method_id, (samples, reference, _) in posteriors.items()
    }
    frames = [
        frame
        for split in points.splits
        for frame in _split_frames(split, points, point_values, boot, norms)
    ]
    frame = _checked_frame(frames, env, seed)
    info = {
        "env": env,
        "seed": int(seed),
        "pnc_config": record["config_id"],
        "sigma": config.sigma,
        "perturbation_norm": config.perturbation_norm,
        "rank": config.rank,
        "perturbed_layers": sorted(bases),
        "probe_eps": eps,
        "probes": settings.probes,
        "bootstrap_members": 0 if subsets is None else int(subsets.shape[0]),
        "bootstrap_subset_rows": 0 if subsets is None else int(subsets.shape[1]),
        "mahalanobis_layer": maha_layer,
        "n_calibration": int(x_cal.shape[0]),
        "points": points.counts,
        "methods": {m: cid for m, (_, _, cid) in posteriors.items()},
        "seconds": time.perf_counter() - started,
    }
    return frame, info


@dataclasses.dataclass(frozen=True)
class _MechanismPoints:
    """The points the mechanism stage measures, all splits together: ``x_raw`` (raw inputs, the
    splits one after the other), each split's rows of it (``at``) and of Theorem 3's points
    (``boot_at``, the first ``bootstrap_points`` of each split), the rows of the split the points
    are (``idx``)."""

    splits: list[str]
    idx: dict[str, np.ndarray]
    counts: dict[str, int]
    x_raw: np.ndarray
    at: dict[str, slice]
    boot_at: dict[str, slice]

    @classmethod
    def draw(cls, env, seed, splits, settings: MechanismSettings) -> _MechanismPoints:
        names = [s for s in MECHANISM_SPLITS if s in splits]
        idx = {
            split: point_rows(
                derive_key(env, seed, "mechanism", split),
                splits[split][0].shape[0],
                settings.points_per_split,
            )
            for split in names
        }
        counts = {split: int(rows.size) for split, rows in idx.items()}
        x_raw = np.concatenate([splits[s][0][idx[s]] for s in names])
        at, boot_at, start, boot_start = {}, {}, 0, 0
        for split in names:
            n_boot = min(settings.bootstrap_points, counts[split])
            at[split] = slice(start, start + counts[split])
            boot_at[split] = slice(boot_start, boot_start + n_boot)
            start, boot_start = start + counts[split], boot_start + n_boot
        return cls(names, idx, counts, x_raw, at, boot_at)

    @property
    def boot_rows(self) -> np.ndarray:
        """The rows of ``x_raw`` that Theorem 3 measures."""
        return np.concatenate(
            [np.arange(self.at[s].start, self.at[s].start + self.boot_at[s].stop - self.boot_at[s].start)
             for s in self.splits]
        )  # fmt: skip


def _pnc_point_values(
    env, seed, run, members, config, bases, x_train_raw, x_train, x_cal, x_raw, x, *, maha_layer,
    eps, settings: MechanismSettings,
) -> dict[tuple[str, str], np.ndarray]:  # fmt: skip
    """``{("pnc", quantity): value per point}`` of the selected P&C ensemble on the points ``x``
    (standardised by the network; ``x_raw`` as stored; the training inputs both ways, ``x_train``
    and ``x_train_raw``), in the table's order of quantities."""
    model = run.model
    mlp_config = model.config
    values: dict[tuple[str, str], np.ndarray] = {}
    pred = Predictive(*jax.vmap(lambda p: forward(p, x, mlp_config))(members))
    values[("pnc", "disagreement")] = np.asarray(jnp.sum(epistemic_variance(pred), axis=-1))
    # the evaluation's total-variance OOD score, split into its two parts (original units)
    aleatoric, epistemic = score_parts(pred, model.y_norm)
    values[("pnc", "score_aleatoric")] = aleatoric
    values[("pnc", "score_epistemic")] = epistemic
    # in inputs standardised by the train rows, whatever the network's own input units
    inputs = Standardizer.fit(x_train_raw)
    values[("pnc", "input_distance")] = diagnostics.nearest_distance(
        inputs.transform(jnp.asarray(x_train_raw, jnp.float32)),
        inputs.transform(jnp.asarray(x_raw, jnp.float32)),
    )
    h_train = hidden_activations(model.params, x_train, mlp_config)[maha_layer]
    h = hidden_activations(model.params, x, mlp_config)
    values[("pnc", DISTANCE_QUANTITY)] = np.asarray(
        diagnostics.mahalanobis_distance(h_train, h[maha_layer], MAHALANOBIS_RIDGE)
    )
    center = config.ridge_center
    if config.sigma > 0:
        a = diagnostics.output_sensitivity(
            model.params, mlp_config, bases, x_cal, x, config.ridge, center=center
        )
        a_fro2 = np.asarray(jnp.sum(jnp.square(a), axis=(-2, -1)))
        probe = diagnostics.probe_sketch(
            model.params, mlp_config, bases, x_cal, x, config.ridge, eps,
            n_probes=settings.probes, key=derive_key(env, seed, "mechanism", "probes"),
            center=center, perturbation_norm=config.perturbation_norm,
        )  # fmt: skip
        values[("pnc", "sketch_probe")] = config.sigma**2 * np.asarray(probe)
    else:
        a_fro2 = np.zeros(x.shape[0])
        values[("pnc", "sketch_probe")] = np.zeros(x.shape[0])
    values[("pnc", "a_fro2")] = a_fro2
    values[("pnc", "sketch_analytic")] = perturbation_second_moment(config) * a_fro2
    reps_cal = hidden_activations(model.params, x_cal, mlp_config)
    for layer in sorted(bases):
        values[("pnc", f"{MECHANISM_LEVERAGE_PREFIX}{layer}")] = _leverage(
            reps_cal[layer], h[layer], config.ridge
        )
    return values


def _split_frames(split, points: _MechanismPoints, point_values, boot, norms) -> list[pd.DataFrame]:
    """The rows of one split: every per-point value (P&C's, then each method's mean ``dh``/``dy``
    over its members), then Theorem 3's per-point ranks and each method's per-member ``dh``/``dy``
    (averaged over the split's points)."""
    rows, idx = points.at[split], points.idx[split]
    values = {key: np.asarray(v)[rows] for key, v in point_values.items()}
    member_values = []
    if boot is not None:
        n_boot = points.boot_at[split].stop - points.boot_at[split].start
        member_values += [
            pd.DataFrame({"split": split, "point": idx[:n_boot], "method": "pnc",
                          "member": -1, "quantity": name,
                          "value": boot[name][points.boot_at[split]]})
            for name in BOOTSTRAP_QUANTITIES
        ]  # fmt: skip
    for method_id, (dh_all, dy_all) in norms.items():
        dh, dy = dh_all[:, rows], dy_all[:, rows]
        values[(method_id, "dh")] = dh.mean(axis=0)
        values[(method_id, "dy")] = dy.mean(axis=0)
        for name, arr in (("dh", dh), ("dy", dy)):
            member_values.append(
                pd.DataFrame(
                    {
                        "split": split,
                        "point": -1,
                        "method": method_id,
                        "member": np.arange(arr.shape[0]),
                        "quantity": name,
                        "value": arr.mean(axis=1),
                    }
                )
            )
    frames = [
        pd.DataFrame(
            {
                "split": split,
                "point": idx,
                "method": method_id,
                "member": -1,
                "quantity": name,
                "value": np.asarray(v, np.float64),
            }
        )
        for (method_id, name), v in values.items()
    ]
    return frames + member_values


def _checked_frame(frames: list[pd.DataFrame], env: str, seed: int) -> pd.DataFrame:
    """The rows as one table of :data:`MECHANISM_COLUMNS`; a non-finite value raises
    :class:`ValueError` naming its (method, quantity)."""
    frame = pd.concat(frames, ignore_index=True)
    frame.insert(0, "seed", int(seed))
    frame.insert(0, "env", env)
    frame = frame[list(MECHANISM_COLUMNS)]
    frame["value"] = frame["value"].astype(np.float64)
    bad = frame[~np.isfinite(frame["value"].to_numpy())]
    if len(bad):
        raise ValueError(
            f"{env} seed {seed}: non-finite mechanism values "
            f"{sorted(set(zip(bad['method'], bad['quantity'], strict=True)))}"
        )
    return frame


def write_mechanism(frame: pd.DataFrame, path: str | Path) -> None:
    """Write a mechanism table as parquet, atomically."""
    from pnc.runtime.io import atomic_path

    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)
