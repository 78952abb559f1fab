"""Hyperparameter selection and the study's results tables (paper, Appendix C).

For every (env, method) the configuration with the lowest validation NLL, averaged over seeds, is
selected; the shifted splits play no part. Ties and non-finite values: a configuration whose mean
validation NLL is ``nan`` or ``inf`` is never preferred over a finite one; among equal values the
first configuration in grid order wins; if no configuration has a finite value the first one is
selected and flagged (``"finite": false`` in the selection record).

Tables (long format, one row per value):

- ``all_configs``: ``env, method, config, seed, split, metric, value, data_source, selected`` for
  every configuration evaluated, splits ``val``, ``id``, ``near``, (``mid``), ``far``;
- ``results``: the same without ``selected``, for the selected configuration of each (env, method)
  only, splits ``id``, ``near``, (``mid``), ``far``.

Columns, splits and metrics are those of :mod:`pnc.study.results`; every table read here is
checked with :func:`pnc.study.results.validate`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from pnc.io import atomic_path, read_json, write_csv, write_json
from pnc.study.results import (
    RESULT_COLUMNS,
    SELECTED_COLUMN,
    SELECTION_METRIC,
    SELECTION_SPLIT,
    read_csv,
    validate,
)

#: :func:`pnc.study.results.validate` options for the evaluation jobs' metric tables: every
#: column, every configuration, the selection split kept, ``nan``/``inf`` values allowed.
METRIC_TABLE_CHECKS = {
    "all_columns": True,
    "one_config": False,
    "finite": False,
    "drop_selection_split": False,
}


def select(frame: pd.DataFrame, seeds: Iterable[int] | None = None) -> dict:
    """Choose one configuration per (env, method) by mean validation NLL over seeds.

    Args:
        frame: long metric table with :data:`pnc.study.results.RESULT_COLUMNS`.
        seeds: the seeds every configuration must have; default: all seeds in ``frame``.

    Returns:
        ``{env: {method: {"config", "val_nll", "finite", "n_seeds", "candidates": {config: val_nll}}}}``
        (JSON-able; ``val_nll`` values are floats, ``nan``/``inf`` kept as such).

    Raises:
        pnc.study.results.ResultsError: if the table is malformed (see
            :func:`pnc.study.results.validate`).
        ValueError: if a configuration lacks the validation NLL of a seed.
    """
    frame = validate(frame, **METRIC_TABLE_CHECKS)
    seeds = sorted({int(s) for s in (frame["seed"] if seeds is None else seeds)})
    val = frame[(frame["split"] == SELECTION_SPLIT) & (frame["metric"] == SELECTION_METRIC)]
    out: dict = {}
    for (env, method), group in frame.groupby(["env", "method"], sort=False):
        configs = list(dict.fromkeys(group["config"]))  # grid order (first appearance)
        vals = val[(val["env"] == env) & (val["method"] == method)]
        candidates = {}
        for config in configs:
            rows = vals[vals["config"] == config]
            have = sorted(int(s) for s in rows["seed"])
            if have != seeds:
                raise ValueError(
                    f"{env}/{method}/{config}: validation NLL for seeds {have}, expected {seeds}"
                )
            candidates[config] = float(np.mean(rows["value"].to_numpy(np.float64)))
        finite = {c: v for c, v in candidates.items() if math.isfinite(v)}
        if finite:
            best = min(finite, key=lambda c: (finite[c], configs.index(c)))
        else:
            best = configs[0]
        out.setdefault(str(env), {})[str(method)] = {
            "config": best,
            "val_nll": candidates[best],
            "finite": bool(finite),
            "n_seeds": len(seeds),
            "candidates": candidates,
        }
    return out


def apply_selection(frame: pd.DataFrame, selection: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Mark selected rows and extract the results table.

    Returns:
        ``(all_configs, results)`` as described in the module docstring.
    """
    chosen = {(e, m): rec["config"] for e, by_m in selection.items() for m, rec in by_m.items()}
    keys = list(zip(frame["env"], frame["method"], strict=True))
    missing = sorted({k for k in keys if k not in chosen})
    if missing:
        raise ValueError(f"no selection for (env, method) {missing}")
    all_configs = frame.loc[:, list(RESULT_COLUMNS)].copy()
    all_configs[SELECTED_COLUMN] = [
        chosen[k] == c for k, c in zip(keys, frame["config"], strict=True)
    ]
    results = all_configs[all_configs[SELECTED_COLUMN] & (all_configs["split"] != SELECTION_SPLIT)]
    results = results.drop(columns=SELECTED_COLUMN).reset_index(drop=True)
    return all_configs.reset_index(drop=True), results


def read_tables(paths: Iterable[str]) -> pd.DataFrame:
    """Concatenate metric CSVs and validate them (``value`` as float64, ``config`` as string)."""
    frames = [read_csv(p) for p in paths]
    if not frames:
        raise ValueError("no metric tables given")
    return validate(pd.concat(frames, ignore_index=True), **METRIC_TABLE_CHECKS)


def select_and_write(
    tables: Iterable[str],
    *,
    seeds: Iterable[int],
    all_configs_path: str,
    results_path: str,
    selection_path: str,
) -> dict:
    """Read per-job metric tables, select, and write the three outputs atomically.

    Returns:
        The selection record (see :func:`select`).
    """
    frame = read_tables(tables)
    selection = select(frame, seeds=seeds)
    all_configs, results = apply_selection(frame, selection)
    write_csv(all_configs, all_configs_path)
    write_csv(results, results_path)
    with atomic_path(selection_path) as tmp:
        write_json(tmp, selection)
    return selection


def concatenate_outputs(
    all_configs: Iterable[str], results: Iterable[str], selections: Iterable[str], out_dir: str
) -> dict[str, int]:
    """Join per-environment outputs into ``out_dir/{all_configs.csv, results.csv, selection.json}``.

    Raises:
        ValueError: if two inputs cover the same environment.

    Returns:
        Row counts of the two tables and the number of environments.
    """
    out = Path(out_dir)
    merged: dict = {}
    for path in selections:
        for env, rec in read_json(path).items():
            if env in merged:
                raise ValueError(f"environment {env} appears in more than one selection file")
            merged[env] = rec
    frames = {}
    for name, paths in (("all_configs", all_configs), ("results", results)):
        frame = pd.concat([read_csv(p) for p in paths], ignore_index=True)
        if name == "results":
            validate(frame, all_columns=True, finite=False)
        frames[name] = frame
        write_csv(frame, out / f"{name}.csv")
    with atomic_path(out / "selection.json") as tmp:
        write_json(tmp, merged)
    return {
        "all_configs_rows": len(frames["all_configs"]),
        "results_rows": len(frames["results"]),
        "envs": len(merged),
    }
