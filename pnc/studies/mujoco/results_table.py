"""Reading a results table of the MuJoCo study and checking it against the vocabulary of
:mod:`pnc.studies.mujoco.results`: :func:`validate`, :func:`read_csv`, :func:`load`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from pnc.studies.mujoco.results import (
    CALIBRATIONS,
    DATA_SOURCES,
    MEASUREMENT_KEY,
    METRICS,
    OPTIONAL_DEFAULTS,
    REPORTED_SPLITS,
    REQUIRED_COLUMNS,
    RESULT_COLUMNS,
    SCORED_SPLITS,
    SELECTED_COLUMN,
    SELECTION_SPLIT,
    method_ids,
)


class ResultsError(ValueError):
    """The results table is malformed; the message names the offending column, value or rows."""


def _describe_rows(frame: pd.DataFrame, limit: int = 5) -> str:
    cols = [c for c in MEASUREMENT_KEY if c in frame]
    rows = [
        ", ".join(f"{c}={r[c]}" for c in cols) for r in frame[cols].head(limit).to_dict("records")
    ]
    more = f" (and {len(frame) - limit} more)" if len(frame) > limit else ""
    return "; ".join(rows) + more


def validate(
    frame: pd.DataFrame,
    *,
    require_selected: bool = False,
    one_config: bool | None = None,
    all_columns: bool = False,
    finite: bool = True,
    drop_selection_split: bool = True,
) -> pd.DataFrame:
    """Check a long-format results table against the vocabulary and return a clean copy.

    The defaults suit ``results.csv`` (one selected (config, calibration) pair per (env, method));
    with
    ``require_selected`` ``all_configs.csv``; the metric tables of the evaluation jobs, the input of
    selection, need ``all_columns=True, one_config=False, finite=False,
    drop_selection_split=False``.

    Args:
        frame: one row per measured value; the columns :data:`REQUIRED_COLUMNS`, optionally
            ``config``, ``calibration`` and ``data_source`` (:data:`OPTIONAL_DEFAULTS` where
            absent) and, with ``require_selected``, a boolean :data:`SELECTED_COLUMN`.
        require_selected: the table lists every configuration with a boolean ``selected`` column.
        one_config: the table holds one (config, calibration) pair per (env, method); default:
            not ``require_selected``.
        all_columns: every column of :data:`RESULT_COLUMNS` must be present (no defaults).
        finite: every value must be finite; otherwise ``nan`` and ``inf`` are accepted (but
            non-numeric entries are not).
        drop_selection_split: remove the :data:`SELECTION_SPLIT` rows from the copy; the rest of
            the table must then not be empty.

    Returns:
        A copy with string ``env``/``method``/``config``/``calibration``/``split``/``metric``/
        ``data_source`` (surrounding blanks removed, an empty ``config`` read as ``"default"``)
        and float ``value``; boolean ``selected`` with ``require_selected``.

    Raises:
        ResultsError: on missing columns, unknown methods/calibrations/splits/metrics/data
            sources, empty identifying cells, missing, non-numeric or (with ``finite``)
            non-finite values, duplicated measurements, several (config, calibration) pairs of one
            (env, method) with ``one_config``, a non-boolean ``selected`` column or an env with
            more than one data source.
    """
    if one_config is None:
        one_config = not require_selected
    needed = RESULT_COLUMNS if all_columns else REQUIRED_COLUMNS
    missing = [c for c in needed if c not in frame.columns]
    if require_selected and SELECTED_COLUMN not in frame.columns:
        missing.append(SELECTED_COLUMN)
    if missing:
        raise ResultsError(
            f"results table lacks required column(s) {missing}; it has {list(frame.columns)}"
        )
    df = frame.copy()
    for column, default in OPTIONAL_DEFAULTS.items():
        if column not in df.columns:
            df[column] = default
    df["config"] = df["config"].fillna("").astype(str).replace("", OPTIONAL_DEFAULTS["config"])
    for column in ("env", "method", "calibration", "split", "metric", "data_source"):
        if df[column].isna().any():
            raise ResultsError(
                f"column {column!r} is empty in rows: {_describe_rows(df[df[column].isna()])}"
            )
        df[column] = df[column].astype(str).str.strip()
    if df["seed"].isna().any():
        raise ResultsError(f"column 'seed' is empty in rows: {_describe_rows(df[df.seed.isna()])}")

    for column, allowed in (
        ("method", method_ids()),
        ("calibration", CALIBRATIONS),
        ("split", SCORED_SPLITS),
        ("metric", METRICS),
        ("data_source", DATA_SOURCES),
    ):
        unknown = sorted(set(df[column]) - set(allowed))
        if unknown:
            raise ResultsError(f"unknown {column} value(s) {unknown}; expected one of {allowed}")

    if drop_selection_split:
        df = df[df["split"] != SELECTION_SPLIT].reset_index(drop=True)
        if df.empty:
            raise ResultsError(
                f"results table holds no rows on the {'/'.join(REPORTED_SPLITS)} splits"
            )

    values = pd.to_numeric(df["value"], errors="coerce")
    if finite:
        bad = ~np.isfinite(values.to_numpy(dtype=float))
        problem = "missing, non-numeric or non-finite (NaN/inf)"
    else:
        bad = (values.isna() & df["value"].notna()).to_numpy()
        problem = "non-numeric"
    if bad.any():
        raise ResultsError(f"{int(bad.sum())} value(s) are {problem}: {_describe_rows(df[bad])}")
    df["value"] = values.astype(float)

    if require_selected:
        selected = df[SELECTED_COLUMN]
        if selected.dtype != bool:
            mapped = (
                selected.astype(str)
                .str.strip()
                .str.lower()
                .map({"true": True, "false": False, "1": True, "0": False})
            )
            if mapped.isna().any():
                raise ResultsError(
                    f"column {SELECTED_COLUMN!r} must be boolean; got "
                    f"{sorted(set(selected[mapped.isna()].astype(str)))}"
                )
            df[SELECTED_COLUMN] = mapped.astype(bool)

    dup = df.duplicated(list(MEASUREMENT_KEY), keep=False)
    if dup.any():
        raise ResultsError(f"duplicated measurements: {_describe_rows(df[dup])}")

    if one_config:
        pairs = df[["env", "method", "config", "calibration"]].drop_duplicates()
        n_pairs = pairs.groupby(["env", "method"]).size()
        several = n_pairs[n_pairs > 1]
        if len(several):
            raise ResultsError(
                "a selected-results table holds one configuration per (env, method), in one "
                "calibration variant; several (config, calibration) pairs in "
                f"{[f'{e}/{m}' for e, m in several.index]}"
            )
    sources = df.groupby("env")["data_source"].nunique()
    mixed = sources[sources > 1]
    if len(mixed):
        raise ResultsError(f"env(s) {list(mixed.index)} list more than one data_source")
    return df


def read_csv(path: str | Path) -> pd.DataFrame:
    """Read a results CSV as written (identifying columns as strings), without validating it.

    Raises:
        FileNotFoundError: if ``path`` is not a file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"results table not found: {path}")
    return pd.read_csv(
        path,
        dtype={"env": str, "method": str, "config": str, "calibration": str, "split": str},
    )


def load(path: str | Path, **options: bool | None) -> pd.DataFrame:
    """Read and validate a results CSV (``options`` as for :func:`validate`)."""
    return validate(read_csv(path), **options)
