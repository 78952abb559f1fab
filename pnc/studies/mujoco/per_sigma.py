"""P&C and its ablation compared at equal sigma (Figure 3A's frontier, the mechanism table, the
test phase's per-sigma configurations): every configuration's seed-mean validation NLL, ID RMSE
and Far NLL (:func:`sigma_points`), and the one chosen at each sigma (:func:`per_sigma_choices`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from pnc.methods.selection_rule import select_candidate
from pnc.studies.mujoco.results import SELECTION_METRIC, SELECTION_SPLIT

#: The methods whose configurations Figure 3A and the mechanism table compare at equal sigma.
PER_SIGMA_METHODS: tuple[str, ...] = ("pnc", "pnc_nocorr")


#: The seed-mean columns of :func:`sigma_points`: (split, metric) -> column.
SIGMA_POINT_COLUMNS: dict[tuple[str, str], str] = {
    (SELECTION_SPLIT, SELECTION_METRIC): "val_nll",
    ("id", "rmse"): "id_rmse",
    ("far", "nll"): "far_nll",
}


def sigma_points(
    frame: pd.DataFrame, env: str, sigmas: Mapping[tuple[str, str], float]
) -> pd.DataFrame:
    """Every P&C and P&C-without-correction configuration of ``env`` in each calibration variant:
    seed-mean validation NLL, ID RMSE and Far NLL (``NaN`` where ``frame`` lacks the configuration's
    test rows, as after the validation phase). Columns ``method, config, calibration, val_nll,
    id_rmse, far_nll, sigma``.

    Args:
        frame: a results table.
        env: the environment.
        sigmas: ``{(method, config id): sigma}``, the typed ``sigma`` of each configuration read
            from the grid tables (:func:`pnc.studies.mujoco.grid.config_field`).

    Raises:
        ValueError: ``frame`` holds no P&C validation NLL of ``env``, or a configuration that
            ``sigmas`` lacks (named).
    """
    rows = frame[(frame.env == env) & frame.method.isin(list(PER_SIGMA_METHODS))]
    wanted = SIGMA_POINT_COLUMNS
    keep = rows[[(s, m) in wanted for s, m in zip(rows.split, rows.metric, strict=True)]].copy()
    keep["column"] = [wanted[(s, m)] for s, m in zip(keep.split, keep.metric, strict=True)]
    means = keep.groupby(["method", "config", "calibration", "column"], sort=False)["value"].mean()
    out = means.unstack("column").reset_index() if len(means) else pd.DataFrame()
    if out.empty or "val_nll" not in out.columns:
        raise ValueError(f"{env}: the table lacks P&C rows or their validation NLL")
    for column in wanted.values():
        if column not in out.columns:
            out[column] = np.nan
    out = out[["method", "config", "calibration", *wanted.values()]]
    lacking = sorted(
        {(m, c) for m, c in zip(out["method"], out["config"], strict=True)} - set(sigmas)
    )
    if lacking:
        raise ValueError(
            f"{env}: no sigma for {lacking} in the grid tables (a table of another config?)"
        )
    out["sigma"] = [
        float(sigmas[(m, c)]) for m, c in zip(out["method"], out["config"], strict=True)
    ]
    return out


def per_sigma_choices(points: pd.DataFrame) -> pd.DataFrame:
    """Per method and sigma of :func:`sigma_points`, the (config, calibration) candidate with the
    lowest seed-mean validation NLL among those at that sigma
    (:func:`pnc.methods.selection_rule.select_candidate`, ties to the first in table order): the rows of
    ``points`` chosen, with their index, sigma ascending within each method."""
    chosen = []
    for method in PER_SIGMA_METHODS:
        of_method = points[points.method == method]
        for sigma in sorted(of_method["sigma"].unique()):
            cands = of_method[of_method.sigma == sigma]
            values = {i: float(v) for i, v in zip(cands.index, cands.val_nll, strict=True)}
            chosen.append(select_candidate(values))
    return points.loc[chosen]
