"""The MuJoCo study's per-job stages (paper Section 5.3, Appendix C), as plain functions.

The Snakemake workflow calls each stage through a thin entry point (``python -m pnc.workflow.<stage>``):

1. :func:`train_run` -- one training run per (env, seed, run id) on the ``train`` split; the run is
   shared by every configuration whose differing hyperparameters are post-hoc (:mod:`pnc.study.grid`).
2. :func:`evaluate_run` -- for one (env, seed, method, run): post-hoc construction of every
   configuration using that run, prediction on ``val`` and every evaluation split, metric rows
   (:mod:`pnc.study.evaluate`). Posteriors are never written to disk.
3. selection and the results tables: :mod:`pnc.study.selection`.

Randomness is a pure function of names (:func:`pnc.keys.derive_key`): training uses
``derive_key(env, seed, run_id, "train")``; construction and sampling use
``derive_key(env, seed, method, "build")`` and ``derive_key(env, seed, method, "predict")``, shared
by all configurations of a method (common random numbers make the validation comparison between
configurations less noisy) and by all splits (every split is scored by the same ensemble).

Output files are written under a temporary name and renamed into place, so a failed job never leaves
a partial file behind.
"""

from __future__ import annotations

import logging
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

from pnc.keys import derive_key
from pnc.methods.base import TrainingRun, TrainingSpec
from pnc.mlp import MLPConfig
from pnc.study import grid
from pnc.study.evaluate import metric_rows, summarise_split
from pnc.study.results import EVAL_SPLITS, OPTIONAL_DEFAULTS, RESULT_COLUMNS
from pnc.train import TrainConfig

_LOG = logging.getLogger("pnc.workflow")


def load_split_arrays(
    directory: str | Path,
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict]:
    """``pnc.data.load_splits`` with a check that the splits the study needs are there."""
    from pnc.data import load_splits

    splits, manifest = load_splits(directory)
    missing = [s for s in ("train", "val", "id", "near", "far") if s not in splits]
    if missing:
        raise ValueError(f"{directory}: missing splits {missing}; found {sorted(splits)}")
    return splits, manifest


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
        env, seed: which splits (and the key ``derive_key(env, seed, spec.run_id, "train")``).
        spec: the training run (``pnc.study.grid`` derives it from a method configuration).
        splits_dir: directory holding ``splits.npz`` + ``manifest.json``.
        out_dir: where the run is written.
        model: ``MLPConfig`` fields except ``out_dim`` (e.g. ``{"hidden": [200, 200, 200, 200]}``).
        train: ``TrainConfig`` fields (steps, batch_size, learning_rate, weight_decay).

    Returns:
        A JSON-able summary (run id, sizes, seconds).
    """
    from pnc import methods as registry

    splits, _ = load_split_arrays(splits_dir)
    x, y = splits["train"]
    model_config = MLPConfig.from_dict({"out_dim": int(y.shape[1]), **_model_fields(model)})
    train_config = TrainConfig(**dict(train))
    start = time.perf_counter()
    run = registry.train_run(
        spec,
        x,
        y,
        model_config=model_config,
        train_config=train_config,
        key=derive_key(env, seed, spec.run_id, "train"),
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
    }


def fetch_minari(env: str, *, root: str | Path | None, download: bool) -> dict:
    """Open (downloading if allowed) the Minari datasets of ``env``'s behaviour levels.

    Returns:
        ``{"env", "minari_root", "datasets": {level: {"id", "episodes", "transitions"}}}``.

    Raises:
        pnc.data.DatasetMissingError: a dataset is absent and ``download`` is false.
    """
    from pnc.data import env_spec
    from pnc.data.minari_io import load_dataset, resolve_root

    datasets = {}
    for level, dataset_id in env_spec(env).minari_ids.items():
        ds = load_dataset(dataset_id, root=root, download=download)
        datasets[level] = {
            "id": dataset_id,
            "episodes": int(ds.total_episodes),
            "transitions": int(ds.total_steps),
        }
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
    method_entry: Mapping[str, Any] | None,
) -> tuple[pd.DataFrame, list[dict]]:
    """Construct, predict and score every configuration of ``method_id`` that uses run ``run_id``.

    The calibration/construction data are the run's ``train`` split (standardised with the run's
    statistics); predictions are made for ``val``, ``id``, ``near``, ``mid`` (if present) and
    ``far``; shifted splits only ever enter the metrics.

    Returns:
        ``(rows, timings)``: a long table with :data:`pnc.study.results.RESULT_COLUMNS` (``value``
        float64) and one
        ``{"config", "build_s", "predict_s"}`` dict per configuration.
    """
    from pnc import methods as registry

    points = grid.points_for_run(method_id, method_entry, run_id)
    method = registry.get(method_id)
    run = TrainingRun.load(run_dir)
    if run.spec != points[0].spec:
        raise ValueError(f"{run_dir} holds run {run.spec.run_id!r}, expected {run_id!r}")
    splits, manifest = load_split_arrays(splits_dir)
    data_source = str(manifest.get("data_source", OPTIONAL_DEFAULTS["data_source"]))
    x_norm = run.model.x_norm
    y_norm = run.model.y_norm
    x_train, y_train = splits["train"]
    x_cal = x_norm.transform(jnp.asarray(x_train, jnp.float32))
    y_cal = y_norm.transform(jnp.asarray(y_train, jnp.float32))
    eval_splits = [s for s in EVAL_SPLITS if s in splits]
    x_eval = {s: x_norm.transform(jnp.asarray(splits[s][0], jnp.float32)) for s in eval_splits}
    targets = {s: splits[s][1] for s in eval_splits}
    build_key = derive_key(env, seed, method_id, "build")
    predict_key = derive_key(env, seed, method_id, "predict")
    rows, timings = [], []
    for point in points:
        start = time.perf_counter()
        posterior = method.build(run, point.config, x_cal, y_cal, key=build_key)
        jax.block_until_ready(posterior)
        built = time.perf_counter()
        summaries = {}
        for split in eval_splits:  # one split's [S, N, D] prediction in memory at a time
            pred = method.predict(posterior, x_eval[split], key=predict_key)
            summaries[split] = summarise_split(pred, targets[split], y_norm)
            del pred
        predicted = time.perf_counter()
        for split, metric, value in metric_rows(summaries):
            rows.append((env, method_id, point.config_id, seed, split, metric, value, data_source))
        timings.append(
            {"config": point.config_id, "build_s": built - start, "predict_s": predicted - built}
        )
        _LOG.info(
            "%s %s: configuration %d/%d (%s) built in %.1f s, evaluated in %.1f s",
            env,
            method_id,
            len(timings),
            len(points),
            point.config_id,
            built - start,
            predicted - built,
        )
        del posterior
    frame = pd.DataFrame(rows, columns=list(RESULT_COLUMNS))
    frame["value"] = frame["value"].astype(np.float64)
    return frame, timings
