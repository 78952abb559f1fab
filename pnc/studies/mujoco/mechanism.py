"""The mechanism stages (paper Figures 1 B/C and 3): stored P&C members and per-point diagnostics.

1. :func:`write_pnc_members` -- after selection, the selected P&C configuration's members of one
   (env, seed) are built once (``derive_key(env, seed, "pnc", "build")``, the key the evaluation
   used, on the calibration pool the evaluation used: the train split, or the whole ID pool for
   ``calibration_pool: id_pool``, :mod:`pnc.studies.mujoco.grid`) and stored as full parameter pytrees
   (``members.msgpack``, flax msgpack, a leading ``[M]`` axis) with a JSON record of the
   configuration, the key's names, the calibration rows, the SHA-256 of the base run they were
   built from and of the members file, and the size per member. :func:`load_pnc_members` reads
   them back, verifying both hashes.
2. :func:`mechanism_frame` -- for up to ``points_per_split`` points of ID, Near, Mid (where
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
import os
import tempfile
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
    calibration_indices,
    member_subsets,
    perturbation_bases,
)
from pnc.core.predictive import Predictive, epistemic_variance
from pnc.core.training import Standardizer
from pnc.methods.regression.runs import TrainingRun
from pnc.runtime.io import (
    ArtifactError,
    file_sha256,
    load_pytree,
    read_json,
    rebuild_hint,
    save_pytree,
    write_json,
)
from pnc.studies.mujoco import grid
from pnc.studies.mujoco.evaluate import score_parts
from pnc.studies.mujoco.mechanism_columns import (
    DISTANCE_QUANTITY,
    MECHANISM_COLUMNS,
    MECHANISM_LEVERAGE_PREFIX,
    MECHANISM_METHODS,
    MECHANISM_SPLITS,
)
from pnc.studies.mujoco.stages import calibration_pool_rows, load_split_arrays, restore_point

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


# ----------------------------------------------------------------------------- selection


def selected_point(
    selection: Mapping[str, Any], env: str, method_id: str, table: Mapping[str, Any]
) -> grid.GridPoint:
    """The grid point of ``method_id`` selected for ``env`` (``selection.json``'s record), read
    from the method's grid table by id (:func:`pnc.studies.mujoco.grid.read_table`).

    Raises:
        ValueError: the record lacks ``env``/``method_id``, or its configuration is not in the grid.
    """
    try:
        config_id = selection[env][method_id]["config"]
    except (KeyError, TypeError):
        raise ValueError(f"the selection record has no {env}/{method_id} entry") from None
    if config_id not in table:
        raise ValueError(
            f"{env}/{method_id}: selected configuration {config_id!r} is not in the config's grid "
            f"({sorted(table)}); rerun the selection"
        )
    return grid.point_of(method_id, config_id, table[config_id])


def _standardised_pool(
    run: TrainingRun, splits_dir: str | Path, pool: str = "train"
) -> tuple[jax.Array, jax.Array]:
    """The calibration pool (:func:`pnc.studies.mujoco.stages.calibration_pool_rows`), standardised."""
    splits, _ = load_split_arrays(splits_dir, ["train"] + (["val"] if pool == "id_pool" else []))
    x, y = calibration_pool_rows(splits, pool)
    return (
        run.model.x_norm.transform(jnp.asarray(x, jnp.float32)),
        run.model.y_norm.transform(jnp.asarray(y, jnp.float32)),
    )


# ----------------------------------------------------------------------------- stored members


def write_pnc_members(
    *,
    env: str,
    seed: int,
    run_dir: str | Path,
    splits_dir: str | Path,
    selection: Mapping[str, Any],
    table: Mapping[str, Any],
    out_dir: str | Path,
) -> dict:
    """Build the selected P&C configuration's members of (env, seed) and store them in ``out_dir``.

    Writes ``members.msgpack`` (the member parameter pytree, leading ``[M]`` axis) and
    ``members.json`` (written last: it marks a complete pair) with ``env, seed, method, config_id,
    config, key, calibration_rows (indices into the calibration pool), calibration_pool
    (``train`` or ``id_pool``), n_calibration_pool, base_run_sha256, members_sha256, n_members,
    bytes, bytes_per_member, build_s``.

    Returns:
        The JSON record.
    """
    from pnc.methods import regression as registry

    method = registry.get("pnc")
    point = selected_point(selection, env, "pnc", table)
    run = TrainingRun.load(run_dir)
    if run.spec != point.spec:
        raise ValueError(f"{run_dir} holds run {run.spec.run_id!r}, expected {point.run_id!r}")
    x_cal, y_cal = _standardised_pool(run, splits_dir, point.calibration_pool)
    key = derive_key(env, seed, method.key_id, "build")
    start = time.perf_counter()
    posterior = method.build(run, point.config, x_cal, y_cal, key=key)
    jax.block_until_ready(posterior.members)
    build_s = time.perf_counter() - start
    rows = calibration_indices(key, x_cal.shape[0], point.config)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = dataclasses.asdict(point.config)
    record = {
        "env": env,
        "seed": int(seed),
        "method": "pnc",
        "config_id": point.config_id,
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in config.items()},
        "key": [env, int(seed), method.key_id, "build"],
        "calibration_rows": None if rows is None else np.asarray(rows).tolist(),
        "calibration_pool": point.calibration_pool,
        "n_calibration_pool": int(x_cal.shape[0]),
        "base_run_sha256": file_sha256(Path(run_dir) / "run.msgpack"),
        "n_members": int(point.config.n_members),
        "build_s": build_s,
    }
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".tmp-") as tmp:
        save_pytree(Path(tmp) / "members.msgpack", posterior.members)
        size = (Path(tmp) / "members.msgpack").stat().st_size
        record.update(
            members_sha256=file_sha256(Path(tmp) / "members.msgpack"),
            bytes=size,
            bytes_per_member=size / point.config.n_members,
        )
        write_json(Path(tmp) / "members.json", record)
        for name in ("members.msgpack", "members.json"):  # the JSON last: it marks a complete pair
            os.replace(Path(tmp) / name, out_dir / name)
    return record


def load_pnc_members(
    members_dir: str | Path, run_dir: str | Path
) -> tuple[Params, PnCConfig, dict]:
    """Read members written by :func:`write_pnc_members`, checking them against the base run.

    Raises:
        FileNotFoundError: a file is missing (named).
        pnc.runtime.io.ArtifactError: ``members.msgpack`` does not match its recorded SHA-256, the base run
            is not the one the members were built from, or the files do not form a member set
            (named, with the command that rebuilds them).
    """
    members_dir = Path(members_dir)
    info_path, tree_path = members_dir / "members.json", members_dir / "members.msgpack"
    record = read_json(info_path)
    if not tree_path.is_file():
        raise FileNotFoundError(f"{tree_path} not found; {rebuild_hint(info_path)}")
    if file_sha256(tree_path) != record.get("members_sha256"):
        raise ArtifactError(
            f"{tree_path} does not match the SHA-256 recorded in {info_path} (truncated, corrupt "
            f"or replaced); {rebuild_hint(info_path)}"
        )
    run_sha = file_sha256(Path(run_dir) / "run.msgpack")
    if run_sha != record.get("base_run_sha256"):
        raise ArtifactError(
            f"{members_dir} was built from another base run than {run_dir} (SHA-256 differs); "
            f"{rebuild_hint(info_path)}"
        )
    members = load_pytree(tree_path)
    try:
        fields = dict(record["config"])
        if fields.get("layers") is not None:
            fields["layers"] = tuple(fields["layers"])
        config = PnCConfig(**fields)
        n = {int(a.shape[0]) for a in jax.tree.leaves(members)}
        if n != {config.n_members}:
            raise ValueError(f"member axis {sorted(n)} != n_members {config.n_members}")
    except (KeyError, TypeError, ValueError) as err:
        raise ArtifactError(
            f"{members_dir}: members.json and members.msgpack do not form a member set "
            f"({type(err).__name__}: {err}); {rebuild_hint(info_path)}"
        ) from err
    return members, config, record


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
        members_dir: the stored P&C members (:func:`write_pnc_members`).
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
        x_pool = _standardised_pool(run, splits_dir, record["calibration_pool"])[0]
    rows = record.get("calibration_rows")
    x_cal = x_pool if rows is None else x_pool[jnp.asarray(rows)]
    key = derive_key(env, seed, "pnc", "build")
    bases = perturbation_bases(model.params, mlp_config, config, key=key)
    layers = sorted(bases)
    maha_layer = min(MAHALANOBIS_LAYER, mlp_config.n_hidden - 1)
    h_train = hidden_activations(model.params, x_train, mlp_config)[maha_layer]
    reps_cal = hidden_activations(model.params, x_cal, mlp_config)
    posteriors = _method_posteriors(
        env, seed, run, selection, tables, config, members, x_train, y_train, run_dir,
        validation_dir=validation_dir,
    )  # fmt: skip
    eps = settings.probe_eps * config.sigma
    moment = perturbation_second_moment(config)
    probe_key = derive_key(env, seed, "mechanism", "probes")
    center = config.ridge_center
    subsets = member_subsets(key, x_cal.shape[0], config)
    if subsets is not None and config.sigma > 0:
        subsets = subsets[: settings.bootstrap_members]
    else:  # no bootstrap (every member corrects on D_cal) or nothing perturbed
        subsets = None
    # Every quantity is per point, so the points of all splits are evaluated together: the
    # correction chains on the calibration rows (the sensitivities, the probes, Theorem 3's
    # members) are then traced, compiled and computed once instead of once per split.
    split_names = [s for s in MECHANISM_SPLITS if s in splits]
    point_idx = {
        split: point_rows(
            derive_key(env, seed, "mechanism", split),
            splits[split][0].shape[0],
            settings.points_per_split,
        )
        for split in split_names
    }
    counts = {split: int(idx.size) for split, idx in point_idx.items()}
    x_raw = np.concatenate([splits[s][0][point_idx[s]] for s in split_names])
    x = model.x_norm.transform(jnp.asarray(x_raw, jnp.float32))
    at, boot_at, start, boot_start = {}, {}, 0, 0  # each split's rows of x and of Theorem 3's
    for split in split_names:
        n_boot = min(settings.bootstrap_points, counts[split])
        at[split] = slice(start, start + counts[split])
        boot_at[split] = slice(boot_start, boot_start + n_boot)
        start, boot_start = start + counts[split], boot_start + n_boot
    point_values: dict[tuple[str, str], np.ndarray] = {}
    pred = Predictive(*jax.vmap(lambda p: forward(p, x, mlp_config))(members))
    point_values[("pnc", "disagreement")] = np.asarray(jnp.sum(epistemic_variance(pred), axis=-1))
    # the evaluation's total-variance OOD score, split into its two parts (original units)
    aleatoric, epistemic = score_parts(pred, model.y_norm)
    point_values[("pnc", "score_aleatoric")] = aleatoric
    point_values[("pnc", "score_epistemic")] = epistemic
    # in inputs standardised by the train rows, whatever the network's own input units
    inputs = Standardizer.fit(splits["train"][0])
    point_values[("pnc", "input_distance")] = diagnostics.nearest_distance(
        inputs.transform(jnp.asarray(splits["train"][0], jnp.float32)),
        inputs.transform(jnp.asarray(x_raw, jnp.float32)),
    )
    h = hidden_activations(model.params, x, mlp_config)
    point_values[("pnc", DISTANCE_QUANTITY)] = np.asarray(
        diagnostics.mahalanobis_distance(h_train, h[maha_layer], MAHALANOBIS_RIDGE)
    )
    if config.sigma > 0:
        a = diagnostics.output_sensitivity(
            model.params, mlp_config, bases, x_cal, x, config.ridge, center=center
        )
        a_fro2 = np.asarray(jnp.sum(jnp.square(a), axis=(-2, -1)))
        probe = diagnostics.probe_sketch(
            model.params, mlp_config, bases, x_cal, x, config.ridge, eps,
            n_probes=settings.probes, key=probe_key, center=center,
            perturbation_norm=config.perturbation_norm,
        )  # fmt: skip
        point_values[("pnc", "sketch_probe")] = config.sigma**2 * np.asarray(probe)
    else:
        a_fro2 = np.zeros(x.shape[0])
        point_values[("pnc", "sketch_probe")] = np.zeros(x.shape[0])
    point_values[("pnc", "a_fro2")] = a_fro2
    point_values[("pnc", "sketch_analytic")] = moment * a_fro2
    for layer in layers:
        point_values[("pnc", f"{MECHANISM_LEVERAGE_PREFIX}{layer}")] = _leverage(
            reps_cal[layer], h[layer], config.ridge
        )
    boot = None
    if subsets is not None:  # Theorem 3 on the first points of each split
        boot_rows = np.concatenate(
            [np.arange(at[s].start, at[s].start + boot_at[s].stop - boot_at[s].start)
             for s in split_names]
        )  # fmt: skip
        boot = bootstrap_rank_frame(
            model.params, mlp_config, config, bases, x_cal, x[jnp.asarray(boot_rows)], subsets
        )
    norms = {
        method_id: tuple(
            np.asarray(v) for v in perturbation_norms(samples, reference, x, mlp_config)
        )
        for method_id, (samples, reference, _) in posteriors.items()
    }
    tables = []
    for split in split_names:
        rows, idx = at[split], point_idx[split]
        values = {key: np.asarray(v)[rows] for key, v in point_values.items()}
        member_values = []
        if boot is not None:
            n_boot = boot_at[split].stop - boot_at[split].start
            member_values += [
                pd.DataFrame({"split": split, "point": idx[:n_boot], "method": "pnc",
                              "member": -1, "quantity": name,
                              "value": boot[name][boot_at[split]]})
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
        for (method_id, name), v in values.items():
            tables.append(
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
            )
        tables += member_values
    frame = pd.concat(tables, ignore_index=True)
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
    info = {
        "env": env,
        "seed": int(seed),
        "pnc_config": record["config_id"],
        "sigma": config.sigma,
        "perturbation_norm": config.perturbation_norm,
        "rank": config.rank,
        "perturbed_layers": layers,
        "probe_eps": eps,
        "probes": settings.probes,
        "bootstrap_members": 0 if subsets is None else int(subsets.shape[0]),
        "bootstrap_subset_rows": 0 if subsets is None else int(subsets.shape[1]),
        "mahalanobis_layer": maha_layer,
        "n_calibration": int(x_cal.shape[0]),
        "points": counts,
        "methods": {m: cid for m, (_, _, cid) in posteriors.items()},
        "seconds": time.perf_counter() - started,
    }
    return frame, info


def write_mechanism(frame: pd.DataFrame, path: str | Path) -> None:
    """Write a mechanism table as parquet, atomically."""
    from pnc.runtime.io import atomic_path

    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)
