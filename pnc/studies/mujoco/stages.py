"""The MuJoCo study's per-job stages (paper Section 5.3, Appendix C), as plain functions.

The Snakemake workflow calls each stage through a thin entry point (``python -m pnc.workflow STAGE``):

1. :func:`train_run` -- one training run per (env, seed, run id) on the ``train`` split; the run is
   shared by every configuration whose differing hyperparameters are post-hoc (:mod:`pnc.studies.mujoco.grid`).
2. :func:`evaluate_run` -- for one (env, seed, method, run): post-hoc construction of every
   configuration using that run, prediction on ``val`` and every evaluation split, metric rows
   (:mod:`pnc.studies.mujoco.evaluate`) of the raw predictive and of its post-hoc variance-calibrated
   variant (:mod:`pnc.studies.mujoco.calibration`, fitted on ``val``). Posteriors are never written to disk.
3. selection and the results tables: :mod:`pnc.studies.mujoco.selection`.

Randomness is a pure function of names (:func:`pnc.core.keys.derive_key`): training uses
``derive_key(env, seed, run_id, "train")`` (every base run, P&C's own included, the shared base
run's ``"base"``: :attr:`pnc.methods.regression.runs.TrainingSpec.key_id`); construction and
sampling use ``derive_key(env, seed, key_id, "build")`` and ``derive_key(env, seed, key_id,
"predict")``, where ``key_id`` is the method's ``key_id`` (its id, except that the P&C ablation
without correction uses P&C's, so the two draw identical perturbations). The keys are shared by all
configurations of a method (common random numbers make the validation comparison between
configurations less noisy) and by all splits (every split is scored by the same ensemble).

Output files are written under a temporary name and renamed into place, so a failed job never leaves
a partial file behind.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from pnc.core.keys import derive_key
from pnc.core.mlp import MLPConfig
from pnc.core.training import TrainConfig
from pnc.methods.regression.runs import TrainingRun, TrainingSpec
from pnc.runtime.io import ArtifactError, rebuild_hint
from pnc.studies.mujoco import grid
from pnc.studies.mujoco.calibration import check_calibrations, variant_rows
from pnc.studies.mujoco.evaluate import metric_rows, sample_rows, summarise_split
from pnc.studies.mujoco.results import (
    CALIBRATIONS,
    EVAL_SPLITS,
    OPTIONAL_DEFAULTS,
    RESULT_COLUMNS,
    SAMPLED_SPLITS,
    SCORED_SPLITS,
    SELECTION_SPLIT,
    VCAL,
)

_LOG = logging.getLogger("pnc.workflow")


class NonFiniteMetricError(ValueError):
    """An evaluation produced a non-finite (``NaN``/``inf``) metric value.

    Non-finite values are an error of the evaluation job, never a result: a configuration whose
    predictive diverges (or splits holding non-finite data) fails its job, naming the
    configuration, calibration variant, split and metric(s), so no metric table, selection or
    results table ever holds a non-finite value.
    """


def check_finite(
    rows: Sequence[tuple[str, str, float]],
    *,
    where: str,
    config: str,
    calibration: str,
    split_data: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
    splits_dir: str | Path | None = None,
) -> None:
    """Raise :class:`NonFiniteMetricError` if a ``(split, metric, value)`` row is not finite.

    Args:
        rows: the metric rows of one configuration in one calibration variant.
        where: ``"env seed S method"``, the job, for the message.
        config, calibration: which configuration and variant, for the message.
        split_data: ``(x, y)`` per split; splits holding non-finite data are named as the cause.
        splits_dir: where ``split_data`` came from, for the message.
    """
    bad: dict[str, list[str]] = {}
    for split, metric, value in rows:
        if not np.isfinite(value):
            bad.setdefault(split, []).append(f"{metric}={value}")
    if not bad:
        return
    parts = []
    for split, names in bad.items():
        part = f"split {split!r}: {', '.join(names)}"
        x, y = (split_data or {}).get(split, (None, None))
        for label, arr in (("inputs", x), ("targets", y)):
            if arr is not None and not np.isfinite(np.asarray(arr, np.float64)).all():
                part += f" (the split's {label} hold non-finite values in {splits_dir})"
        parts.append(part)
    raise NonFiniteMetricError(
        f"{where}: configuration {config!r}, calibration {calibration!r}: non-finite metric "
        f"value(s) on {'; '.join(parts)}. The configuration diverged or its data is not finite; "
        "non-finite metrics are never written (remove the configuration from the grid or fix "
        "the data)"
    )


#: The splits every study run needs (``mid`` is optional).
REQUIRED_SPLITS: tuple[str, ...] = ("train", "val", "id", "near", "far")


def load_split_arrays(
    directory: str | Path, required: Sequence[str] = REQUIRED_SPLITS
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict]:
    """``pnc.studies.mujoco.data.load_splits`` with a check that the ``required`` splits are there.

    Raises:
        FileNotFoundError: no splits in ``directory``.
        pnc.runtime.io.ArtifactError: ``splits.npz`` or ``manifest.json`` is unreadable, truncated or does
            not match its recorded hash (the message names the directory and how to rebuild it).
        ValueError: a required split is missing.
    """
    from pnc.studies.mujoco.data import load_splits

    try:
        splits, manifest = load_splits(directory)
    except (FileNotFoundError, ArtifactError):
        raise
    except Exception as err:  # numpy/zipfile/json raise many types on a damaged cache
        raise ArtifactError(
            f"{directory}: cannot read the splits ({type(err).__name__}: {err}); "
            f"{rebuild_hint(directory)}"
        ) from err
    missing = [s for s in required if s not in splits]
    if missing:
        raise ValueError(f"{directory}: missing splits {missing}; found {sorted(splits)}")
    return splits, manifest


def calibration_pool_rows(
    splits: Mapping[str, tuple[np.ndarray, np.ndarray]], pool: str
) -> tuple[np.ndarray, np.ndarray]:
    """The raw ``(x [N, in], y [N, D])`` a method's construction draws its calibration set from.

    Args:
        splits: the loaded splits (``train``, and ``val`` for ``id_pool``).
        pool: ``"train"``: the train split; ``"id_pool"``: the whole ID pool, the train rows then
            the validation rows (the authors' code drew P&C's 4,096 rows from it).

    Raises:
        ValueError: an unknown pool (:data:`pnc.studies.mujoco.grid.CALIBRATION_POOLS`).
    """
    if pool == "train":
        return splits["train"]
    if pool == "id_pool":
        (x_train, y_train), (x_val, y_val) = splits["train"], splits[SELECTION_SPLIT]
        return np.concatenate([x_train, x_val]), np.concatenate([y_train, y_val])
    raise ValueError(
        f"unknown calibration pool {pool!r}; valid: {', '.join(grid.CALIBRATION_POOLS)}"
    )


def spec_from_dict(spec: Mapping[str, Any]) -> TrainingSpec:
    """``{"kind": ..., "options": [[name, value], ...]}`` -> :class:`TrainingSpec`."""
    unknown = sorted(set(spec) - {"kind", "options"})
    if unknown or "kind" not in spec:
        raise ValueError(f"a training spec needs 'kind' and optional 'options', got {dict(spec)}")
    return TrainingSpec(str(spec["kind"]), tuple(tuple(o) for o in spec.get("options", ())))


def train_run(
    *,
    env: str,
    seed: int,
    spec: TrainingSpec,
    splits_dir: str | Path,
    out_dir: str | Path,
    model: Mapping[str, Any],
    train: Mapping[str, Any],
) -> dict:
    """Train run ``spec`` for (env, seed) and save it as ``out_dir/run.msgpack`` + ``run.json``.

    Args:
        env, seed: which splits (and the key ``derive_key(env, seed, spec.key_id, "train")``:
            the run id, ``"base"`` for every base run, :attr:`TrainingSpec.key_id`).
        spec: the training run (``pnc.studies.mujoco.grid`` derives it from a method configuration).
        splits_dir: directory holding ``splits.npz`` + ``manifest.json``.
        out_dir: where the run is written.
        model: ``MLPConfig`` fields except ``out_dim`` (e.g. ``{"hidden": [200, 200, 200, 200]}``).
        train: ``TrainConfig`` fields (steps, batch_size, learning_rate, weight_decay, patience,
            eval_every, standardize, collection); with ``patience`` the ``val`` split early-stops
            the run.

    Returns:
        A JSON-able summary (run id, sizes, seconds).
    """
    from pnc.methods import regression as registry

    splits, _ = load_split_arrays(splits_dir)
    x, y = splits["train"]
    model_config = MLPConfig.from_dict({"out_dim": int(y.shape[1]), **_model_fields(model)})
    train_config = TrainConfig.from_dict(dict(train))
    start = time.perf_counter()
    run = registry.train_spec(
        spec,
        x,
        y,
        model_config=model_config,
        train_config=train_config,
        key=derive_key(env, seed, spec.key_id, "train"),
        validation=splits["val"] if train_config.early_stopping else None,
    )
    jax.block_until_ready(run.model.params)
    seconds = time.perf_counter() - start
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".tmp-") as tmp:
        run.save(tmp)
        for name in ("run.msgpack", "run.json"):  # run.json last: it marks a complete run
            os.replace(Path(tmp) / name, out_dir / name)
    return {
        "env": env,
        "seed": seed,
        "run_id": spec.run_id,
        "n_train": int(x.shape[0]),
        "train_s": seconds,
        "steps_taken": run.meta.get("steps_taken"),
        "best_step": run.meta.get("best_step"),
    }


def _reason(err: BaseException) -> str:
    """What went wrong with one dataset: the error that made its download fail, else the
    message itself."""
    cause = err.__cause__
    return f"{type(cause).__name__}: {cause}" if cause is not None else str(err)


def _connection_failed(err: BaseException) -> bool:
    """Whether a connection to the remote was refused, reset or timed out somewhere in the chain
    of ``err``'s causes (the HTTP client's ConnectError/ConnectTimeout or the OS's error)."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, ConnectionError | TimeoutError) or type(err).__name__ in {
            "ConnectError",
            "ConnectTimeout",
        }:
            return True
        err = err.__cause__ or err.__context__
    return False


def fetch_minari(env: str, *, root: str | Path | None, download: bool) -> dict:
    """Open (downloading if allowed) the Minari datasets of ``env``'s behaviour levels.

    Returns:
        ``{"env", "minari_root", "datasets": {level: {"id", "episodes", "transitions"}}}``.

    Raises:
        pnc.studies.mujoco.data.DatasetMissingError: datasets are absent (and ``download`` is false or the
            download failed or was refused); the message names every missing level and dataset
            id, the remote, how to place them by hand, the offline alternative and each
            dataset's error.
    """
    from pnc.studies.mujoco.data import DatasetMissingError, env_spec
    from pnc.studies.mujoco.data.minari_io import (
        dataset_exists,
        describe_remote,
        load_dataset,
        resolve_root,
    )

    datasets, missing = {}, {}
    unreachable = None
    for level, dataset_id in env_spec(env).minari_ids.items():
        if unreachable is not None and not dataset_exists(dataset_id, root):
            # the remote stopped answering: the other downloads would wait out the same retries
            missing[level] = (dataset_id, unreachable)
            continue
        try:
            ds = load_dataset(dataset_id, root=root, download=download)
        except DatasetMissingError as err:
            missing[level] = (dataset_id, err)
            if download and _connection_failed(err):
                unreachable = DatasetMissingError(
                    f"not tried: the remote did not answer for {dataset_id}"
                )
            continue
        datasets[level] = {
            "id": dataset_id,
            "episodes": int(ds.total_episodes),
            "transitions": int(ds.total_steps),
        }
    if missing:
        listing = ", ".join(f"{level} ({dataset_id})" for level, (dataset_id, _) in missing.items())
        first = next(iter(missing.values()))[1]
        path = resolve_root(root)
        example = path / next(iter(missing.values()))[0]
        raise DatasetMissingError(
            f"{env}: Minari datasets missing under {path}: {listing}. "
            + (
                f"Downloading them from {describe_remote()} failed. "
                if download
                else "Downloading is disabled (data.download). "
            )
            + "To place them by hand, copy each dataset's folder (the one `minari download ID` "
            f"writes under $MINARI_DATASETS_PATH where the remote is reachable) to {path}/ID, "
            f"e.g. {example}; point MINARI_REMOTE / HF_ENDPOINT at a mirror that has them; or set "
            "data.source: offline to use behaviour datasets generated locally (e.g. "
            f"`snakemake --config data='{{source: offline}}'`). Errors: "
            + " | ".join(f"{level}: {_reason(err)}" for level, (_, err) in missing.items())
        ) from first
    return {"env": env, "minari_root": str(resolve_root(root)), "datasets": datasets}


def _model_fields(model: Mapping[str, Any]) -> dict:
    fields = dict(model)
    if "out_dim" in fields:
        raise ValueError("model.out_dim is set from the data; remove it from the config")
    if "hidden" in fields:
        fields["hidden"] = list(fields["hidden"])
    else:
        fields["hidden"] = list(MLPConfig(out_dim=1).hidden)
    return fields


def evaluate_run(
    *,
    env: str,
    seed: int,
    method_id: str,
    run_id: str,
    run_dir: str | Path,
    splits_dir: str | Path,
    points: Sequence[grid.GridPoint],
    calibrations: Sequence[str] = CALIBRATIONS,
    splits: Sequence[str] | None = None,
    configs: Sequence[str] | None = None,
    stored: Mapping[str, Mapping[str, np.ndarray]] | None = None,
    posteriors_out: dict[str, dict[str, np.ndarray]] | None = None,
) -> tuple[pd.DataFrame, list[dict]]:
    """Construct, predict and score every configuration of ``method_id`` that uses run ``run_id``.

    The calibration/construction data are the run's ``train`` split, or for a P&C entry with
    ``calibration_pool: id_pool`` the train and validation rows (:func:`calibration_pool_rows`;
    standardised with the run's statistics); predictions are made for ``val``, ``id``, ``near``, ``mid`` (if present) and
    ``far`` (or for ``splits``); shifted splits only ever enter the metrics. Each configuration is
    predicted once and scored in every variant of ``calibrations``: ``raw`` (the predictive as
    constructed) and ``vcal`` (its variance times the scale fitted on ``val``,
    :mod:`pnc.studies.mujoco.calibration`). Every split is predicted in a call of its own with the same
    keys, so a split's rows do not depend on which other splits are scored: the two phases of the
    two-phase evaluation (:mod:`pnc.studies.mujoco.phases`) score subsets of the splits and configurations
    and get the rows of the full evaluation, bit for bit.

    Args:
        env, seed: which splits, and the keys ``derive_key(env, seed, key_id, "build"|"predict")``.
        method_id: the method; ``key_id`` is its ``key_id`` attribute (default: ``method_id``).
        run_id: the training run the configurations share.
        run_dir: directory of the saved run.
        splits_dir: directory holding ``splits.npz`` + ``manifest.json``.
        points: every configuration of the method that uses the run, in grid order, read from
            the method's grid table by id (:func:`pnc.studies.mujoco.grid.points_by_id`).
        calibrations: the variants to score, a non-empty subset of
            :data:`pnc.studies.mujoco.results.CALIBRATIONS`.
        splits: the splits to score, in :data:`pnc.studies.mujoco.results.SCORED_SPLITS` (the frontier
            sample splits are drawn by :func:`pnc.studies.mujoco.evaluate.sample_rows`); ``val`` must be
            among them; default: every evaluation split the splits directory holds.
        configs: the configuration ids to score (default: every one using the run). A
            configuration built together with others (:meth:`Method.build_groups`) is built with
            its whole group, as when all are scored, so that its posterior is the same bits.
        stored: per configuration id, the :meth:`Method.posterior_arrays` to restore the posterior
            from instead of building it (methods with ``stores_posteriors``).
        posteriors_out: if given, filled with each scored configuration's
            :meth:`Method.posterior_arrays` (methods with ``stores_posteriors``).

    Returns:
        ``(rows, timings)``: a long table with :data:`pnc.studies.mujoco.results.RESULT_COLUMNS` (``value``
        float64; configurations in grid order, then variants in candidate order) and one
        ``{"config", "build_s", "predict_s", "variance_scale", "built_with"}`` dict per
        configuration (``variance_scale`` is ``None`` without ``vcal``; configurations built
        together, :meth:`pnc.methods.regression.contract.MethodBase.build_groups`, e.g. P&C's ridge
        values, share one build whose time is split evenly, ``built_with`` of them; 0 for a restored
        posterior).

    Raises:
        ValueError: on unknown calibrations, splits or configurations, a run other than
            ``run_id``, splits lacking one the study needs (``val`` is named with what needs it),
            or a configuration of a storing method missing from ``stored``.
        NonFiniteMetricError: a metric value is ``NaN`` or ``inf`` (named with its configuration,
            calibration variant, split and metric; the job fails rather than write it).
    """
    from pnc.methods import regression as registry

    calibrations = check_calibrations(calibrations)
    points = list(points)
    if not points:
        raise ValueError(f"{method_id} on run {run_id}: no configuration to evaluate")
    other = sorted({p.config_id for p in points if (p.method, p.run_id) != (method_id, run_id)})
    if other:
        raise ValueError(f"configurations {other} are not {method_id}'s on run {run_id!r}")
    method = registry.get(method_id)
    run = TrainingRun.load(run_dir)
    if run.spec != points[0].spec:
        raise ValueError(f"{run_dir} holds run {run.spec.run_id!r}, expected {run_id!r}")
    wanted = _scored_configs(points, configs, method_id, run_id)
    loaded, manifest = load_split_arrays(
        splits_dir, [s for s in REQUIRED_SPLITS if s != SELECTION_SPLIT]
    )
    if SELECTION_SPLIT not in loaded:
        needs = "the selection compares configurations on it"
        if VCAL in calibrations:
            needs = "variance calibration (vcal) is fitted on it and " + needs
        raise ValueError(
            f"{splits_dir}: missing split {SELECTION_SPLIT!r} ({needs}); found {sorted(loaded)}"
        )
    split_data = _scored_split_data(loaded, splits, env, seed)
    data_source = str(manifest.get("data_source", OPTIONAL_DEFAULTS["data_source"]))
    x_norm = run.model.x_norm
    y_norm = run.model.y_norm
    x_pool, y_pool = calibration_pool_rows(loaded, points[0].calibration_pool)
    x_cal = x_norm.transform(jnp.asarray(x_pool, jnp.float32))
    y_cal = y_norm.transform(jnp.asarray(y_pool, jnp.float32))
    eval_splits = list(split_data)
    x_eval = {s: x_norm.transform(jnp.asarray(split_data[s][0], jnp.float32)) for s in eval_splits}
    targets = {s: split_data[s][1] for s in eval_splits}
    key_id = getattr(method, "key_id", method_id)
    build_key = derive_key(env, seed, key_id, "build")
    predict_key = derive_key(env, seed, key_id, "predict")
    restoring = stored is not None and method.stores_posteriors
    point_rows: dict[int, list[tuple]] = {}
    point_timings: dict[int, dict] = {}
    groups = method.build_groups([p.config for p in points])
    if sorted(i for g in groups for i in g) != list(range(len(points))):
        raise ValueError(f"{method_id}.build_groups is not a partition of the configurations")
    for group in groups:
        scored = [i for i in group if i in wanted]
        if not scored:
            continue
        start = time.perf_counter()
        if restoring:
            posteriors = [restore_point(method, run, points[i], stored) for i in scored]
            built_with = 0
        else:  # the whole group, as when every configuration is scored: the same bits
            built = method.build_many(
                run, [points[i].config for i in group], x_cal, y_cal, key=build_key
            )
            posteriors = [built[group.index(i)] for i in scored]
            built_with = len(group)
        jax.block_until_ready(posteriors)
        build_s = (time.perf_counter() - start) / len(scored if restoring else group)
        for i, posterior in zip(scored, posteriors, strict=True):
            point = points[i]
            if posteriors_out is not None and method.stores_posteriors:
                posteriors_out[point.config_id] = method.posterior_arrays(posterior)
            started = time.perf_counter()
            summaries = {}
            for split in eval_splits:  # one split's [S, N, D] prediction in memory at a time
                pred = method.predict(posterior, x_eval[split], key=predict_key)
                summaries[split] = summarise_split(pred, targets[split], y_norm)
                del pred
            predict_s = time.perf_counter() - started
            variants, scale = variant_rows(list(metric_rows(summaries)), summaries, calibrations)
            point_rows[i] = []
            for calibration, variant in variants.items():
                check_finite(
                    variant,
                    where=f"{env} seed {seed} {method_id}",
                    config=point.config_id,
                    calibration=calibration,
                    split_data=split_data,
                    splits_dir=splits_dir,
                )
                point_rows[i] += [
                    (env, method_id, point.config_id, calibration, seed, *row, data_source)
                    for row in variant
                ]
            point_timings[i] = {
                "config": point.config_id,
                "build_s": build_s,
                "predict_s": predict_s,
                "variance_scale": scale,
                "built_with": built_with,
            }
            _LOG.info(
                "%s %s: configuration %d/%d (%s) %s in %.1f s%s, evaluated on %s in %.1f s%s",
                env,
                method_id,
                len(point_timings),
                len(wanted),
                point.config_id,
                "restored" if restoring else "built",
                build_s,
                "" if built_with <= 1 else f" (share of {built_with} built together)",
                ", ".join(eval_splits),
                predict_s,
                "" if scale is None else f", validation variance scale {scale:.4g}",
            )
            del summaries
        del posteriors
    order = sorted(point_rows)  # grid order, whatever the build order
    rows = [row for i in order for row in point_rows[i]]
    timings = [point_timings[i] for i in order]
    frame = pd.DataFrame(rows, columns=list(RESULT_COLUMNS))
    frame["value"] = frame["value"].astype(np.float64)
    return frame, timings


def _scored_configs(
    points: Sequence[grid.GridPoint], configs: Sequence[str] | None, method_id: str, run_id: str
) -> set[int]:
    """Indices of ``points`` whose configuration id is in ``configs`` (all when ``None``)."""
    if configs is None:
        return set(range(len(points)))
    ids = [p.config_id for p in points]
    unknown = sorted(set(configs) - set(ids))
    if unknown:
        raise ValueError(
            f"{method_id} on run {run_id}: no configuration {unknown}; its configurations: {ids}"
        )
    return {i for i, c in enumerate(ids) if c in set(configs)}


def _scored_split_data(
    loaded: Mapping[str, tuple[np.ndarray, np.ndarray]],
    splits: Sequence[str] | None,
    env: str,
    seed: int,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``(x, y)`` per scored split in table order; a frontier sample split is drawn from its base
    split (:func:`pnc.studies.mujoco.evaluate.sample_rows`). Default: every evaluation split present."""
    if splits is None:
        return {s: loaded[s] for s in EVAL_SPLITS if s in loaded}
    unknown = sorted(set(splits) - set(SCORED_SPLITS))
    if unknown:
        raise ValueError(f"unknown splits {unknown}; valid: {list(SCORED_SPLITS)}")
    if SELECTION_SPLIT not in splits:
        raise ValueError(
            f"splits {list(splits)} lack {SELECTION_SPLIT!r}: variance calibration is fitted on it"
        )
    out = {}
    for split in SCORED_SPLITS:
        base = SAMPLED_SPLITS.get(split, split)
        if split not in splits or base not in loaded:
            continue
        x, y = loaded[base]
        if split in SAMPLED_SPLITS:
            rows = sample_rows(len(x), env, seed, split)
            x, y = x[rows], y[rows]
        out[split] = (x, y)
    return out


def restore_point(method: Any, run: TrainingRun, point: grid.GridPoint, stored: Mapping) -> Any:
    """The posterior of ``point`` from ``stored`` (per configuration id, the
    :meth:`Method.posterior_arrays` the validation phase wrote), not built again.

    Raises:
        ValueError: ``stored`` has no entry for the configuration, or its arrays do not fit it.
    """
    if point.config_id not in stored:
        raise ValueError(
            f"{method.id}: no stored posterior of configuration {point.config_id!r} (stored: "
            f"{sorted(stored)})"
        )
    return method.restore_posterior(run, point.config, stored[point.config_id])
