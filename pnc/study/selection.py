"""Hyperparameter selection and the study's results tables (paper, Appendix C).

Every configuration is evaluated in each post-hoc calibration variant (``raw`` and ``vcal``, see
:mod:`pnc.study.calibration`); the candidates of an (env, method) are its (config, calibration)
pairs, and the pair with the lowest validation NLL, averaged over seeds, is selected; the shifted
splits play no part. Candidate order is grid order of the configurations, then
:data:`pnc.study.results.CALIBRATIONS` (``raw`` before ``vcal``). Ties and non-finite values
(:func:`pnc.study.results.select_candidate`): a candidate whose mean validation NLL is ``nan`` or
``inf`` is never preferred over a finite one; among equal values the first candidate wins; if no
candidate has a finite value the first one is selected and flagged (``"finite": false``).

The selection record (``selection.json``) is
``{env: {method: {"config", "calibration", "val_nll", "finite", "n_seeds", "candidates"}}}`` with
``candidates`` mapping ``"config|calibration"`` (:func:`candidate_key`, e.g.
``"scale=1.0|vcal"``) to the seed-mean validation NLL, in candidate order.

Tables (long format, one row per value):

- ``all_configs``: ``env, method, config, calibration, seed, split, metric, value, data_source,
  selected`` for every configuration and variant evaluated, splits ``val``, ``id``, ``near``,
  (``mid``), ``far``; ``selected`` marks the rows of the selected (config, calibration) pair;
- ``results``: the same without ``selected``, for the selected pair of each (env, method) only,
  splits ``id``, ``near``, (``mid``), ``far``.

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
    CALIBRATIONS,
    RESULT_COLUMNS,
    SELECTED_COLUMN,
    SELECTION_METRIC,
    SELECTION_SPLIT,
    read_csv,
    select_candidate,
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


#: Separates config and calibration in the candidate keys of the selection record.
CANDIDATE_SEPARATOR = "|"


def candidate_key(config: str, calibration: str) -> str:
    """``"config|calibration"``, the key of a candidate in the selection record."""
    return f"{config}{CANDIDATE_SEPARATOR}{calibration}"


def candidate_order(group: pd.DataFrame) -> list[tuple[str, str]]:
    """The (config, calibration) pairs of one (env, method), in candidate order.

    Configurations in grid order (first appearance in the table), then each configuration's
    variants in :data:`pnc.study.results.CALIBRATIONS` order.
    """
    configs = list(dict.fromkeys(group["config"]))
    present = set(zip(group["config"], group["calibration"], strict=True))
    return [(c, k) for c in configs for k in CALIBRATIONS if (c, k) in present]


def select(frame: pd.DataFrame, seeds: Iterable[int] | None = None) -> dict:
    """Choose one (config, calibration) pair per (env, method) by mean validation NLL over seeds.

    Args:
        frame: long metric table with :data:`pnc.study.results.RESULT_COLUMNS`.
        seeds: the seeds every candidate must have; default: all seeds in ``frame``.

    Returns:
        ``{env: {method: {"config", "calibration", "val_nll", "finite", "n_seeds",
        "candidates": {"config|calibration": val_nll}}}}`` (JSON-able; ``val_nll`` values are
        floats, ``nan``/``inf`` kept as such).

    Raises:
        pnc.study.results.ResultsError: if the table is malformed (see
            :func:`pnc.study.results.validate`).
        ValueError: if a candidate lacks the validation NLL of a seed.
    """
    frame = validate(frame, **METRIC_TABLE_CHECKS)
    seeds = sorted({int(s) for s in (frame["seed"] if seeds is None else seeds)})
    val = frame[(frame["split"] == SELECTION_SPLIT) & (frame["metric"] == SELECTION_METRIC)]
    out: dict = {}
    for (env, method), group in frame.groupby(["env", "method"], sort=False):
        vals = val[(val["env"] == env) & (val["method"] == method)]
        candidates: dict[tuple[str, str], float] = {}
        for config, calibration in candidate_order(group):
            rows = vals[(vals["config"] == config) & (vals["calibration"] == calibration)]
            have = sorted(int(s) for s in rows["seed"])
            if have != seeds:
                raise ValueError(
                    f"{env}/{method}/{config} ({calibration}): validation NLL for seeds {have}, "
                    f"expected {seeds}"
                )
            candidates[(config, calibration)] = float(np.mean(rows["value"].to_numpy(np.float64)))
        best = select_candidate(candidates)
        out.setdefault(str(env), {})[str(method)] = {
            "config": best[0],
            "calibration": best[1],
            "val_nll": candidates[best],
            "finite": any(math.isfinite(v) for v in candidates.values()),
            "n_seeds": len(seeds),
            "candidates": {candidate_key(*c): v for c, v in candidates.items()},
        }
    return out


def apply_selection(frame: pd.DataFrame, selection: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Mark selected rows and extract the results table.

    Args:
        frame: validated metric table (every column of :data:`pnc.study.results.RESULT_COLUMNS`).
        selection: the record of :func:`select`.

    Returns:
        ``(all_configs, results)`` as described in the module docstring.
    """
    chosen = {
        (e, m): (rec["config"], rec["calibration"])
        for e, by_m in selection.items()
        for m, rec in by_m.items()
    }
    keys = list(zip(frame["env"], frame["method"], strict=True))
    missing = sorted({k for k in keys if k not in chosen})
    if missing:
        raise ValueError(f"no selection for (env, method) {missing}")
    all_configs = frame.loc[:, list(RESULT_COLUMNS)].copy()
    pairs = zip(frame["config"], frame["calibration"], strict=True)
    all_configs[SELECTED_COLUMN] = [chosen[k] == p for k, p in zip(keys, pairs, strict=True)]
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
