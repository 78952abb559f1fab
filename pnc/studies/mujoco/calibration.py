"""Post-hoc variance calibration (``vcal``) of a configuration's predictive.

The paper selects "all hyperparameters and post-hoc calibration choices ... using in-distribution
(ID) validation data only" (Section 5.1). The calibration the authors' MuJoCo code applies to every
method (``util.py`` of their code release) is one scalar per (configuration, seed):

::

    s = clip(mean over points n and dimensions d of (y[n, d] - mu[n, d])^2 / (var[n, d] + 1e-6),
             1e-6, 1e6)

fitted on the validation split with the moment-matched predictive (mixture mean ``mu``,
mixture variance ``var``, in original target units as the study's NLL). The calibrated
predictive keeps the mean and multiplies the variance by ``s`` on every split, the validation
split included. The raw and the calibrated variant of a configuration then compete in the
validation-NLL selection (:mod:`pnc.studies.mujoco.selection`).

Multiplying every variance by one positive constant changes no ranking and no mean, so RMSE,
AUROC and Spearman of the calibrated predictive equal those of the raw one; only the NLLs change.
:func:`calibrated_rows` therefore derives the calibrated metric rows from the raw rows and the
per-split summaries (:class:`pnc.studies.mujoco.evaluate.SplitSummary`) of one prediction. Only the
``val`` summary enters the fit: the shifted splits never influence the scale.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np

from pnc.studies.mujoco.evaluate import SplitSummary, nll_metrics
from pnc.studies.mujoco.results import CALIBRATIONS, RAW, SELECTION_SPLIT, VCAL

#: Added to the predictive variance in the fit (not in the calibrated predictive).
VARIANCE_FLOOR = 1e-6
#: The fitted scale is clipped to this range.
SCALE_BOUNDS: tuple[float, float] = (1e-6, 1e6)
#: The split the scale is fitted on (the selection split).
FIT_SPLIT = SELECTION_SPLIT

Row = tuple[str, str, float]

#: The metrics a variance scale changes.
NLL_METRICS: tuple[str, ...] = ("nll", "nll_std")


def fit_variance_scale(mean: np.ndarray, var: np.ndarray, y: np.ndarray) -> float:
    """The variance scale ``s = clip(mean((y - mean)^2 / (var + 1e-6)), 1e-6, 1e6)``.

    Args:
        mean: moment-matched predictive mean ``[N, D]`` on the validation split.
        var: moment-matched predictive variance ``[N, D]``.
        y: validation targets ``[N, D]`` (all three in the same units).

    Returns:
        The scale (``nan`` if an input is ``nan``).

    Raises:
        ValueError: on mismatched shapes or empty arrays.
    """
    mean, var, y = (np.asarray(a, np.float64) for a in (mean, var, y))
    if not (mean.shape == var.shape == y.shape) or mean.size == 0:
        raise ValueError(
            f"need equal non-empty shapes, got mean {mean.shape}, var {var.shape}, y {y.shape}"
        )
    ratio = float(np.mean(np.square(y - mean) / (var + VARIANCE_FLOOR)))
    if math.isnan(ratio):
        return math.nan
    return float(np.clip(ratio, *SCALE_BOUNDS))


def variance_scale(summaries: Mapping[str, SplitSummary]) -> float:
    """:func:`fit_variance_scale` on the :data:`FIT_SPLIT` summary (the other splits are unused).

    Raises:
        ValueError: if there is no :data:`FIT_SPLIT` summary.
    """
    if FIT_SPLIT not in summaries:
        raise ValueError(
            f"variance calibration is fitted on the {FIT_SPLIT!r} split, which is missing; "
            f"splits: {sorted(summaries)}"
        )
    fit = summaries[FIT_SPLIT]
    return fit_variance_scale(fit.mean, fit.var, fit.target)


def calibrated_rows(
    rows: Iterable[Row], summaries: Mapping[str, SplitSummary], scale: float
) -> Iterator[Row]:
    """The metric rows of the predictive whose variance is multiplied by ``scale``.

    Args:
        rows: ``(split, metric, value)`` rows of the raw predictive
            (:func:`pnc.studies.mujoco.evaluate.metric_rows` of ``summaries``).
        summaries: the per-split summaries the rows came from.
        scale: the variance scale.

    Yields:
        The rows in the same order: ``nll`` and ``nll_std`` recomputed with the scaled variance,
        every other metric unchanged (invariant under a positive variance scale).
    """
    recomputed: dict[str, dict[str, float]] = {}
    for split, metric, value in rows:
        if metric in NLL_METRICS:
            if split not in recomputed:
                s = summaries[split]
                recomputed[split] = nll_metrics(s.mean, scale * s.var, s.target, s.scale)
            value = recomputed[split][metric]
        yield split, metric, value


def check_calibrations(calibrations: Sequence[str]) -> tuple[str, ...]:
    """The requested variants in candidate order (:data:`pnc.studies.mujoco.results.CALIBRATIONS`).

    Raises:
        ValueError: if none is requested or one is unknown.
    """
    if isinstance(calibrations, str):
        calibrations = (calibrations,)
    unknown = sorted(set(calibrations) - set(CALIBRATIONS))
    if unknown or not calibrations:
        raise ValueError(
            f"calibrations must be a non-empty subset of {list(CALIBRATIONS)}, got "
            f"{list(calibrations)}"
        )
    return tuple(c for c in CALIBRATIONS if c in calibrations)


def variant_rows(
    rows: Sequence[Row], summaries: Mapping[str, SplitSummary], calibrations: Sequence[str]
) -> tuple[dict[str, list[Row]], float | None]:
    """The metric rows of every requested variant of one prediction.

    Args:
        rows: the raw predictive's rows (:func:`pnc.studies.mujoco.evaluate.metric_rows`).
        summaries: the per-split summaries the rows came from.
        calibrations: the variants (:func:`check_calibrations`).

    Returns:
        ``({calibration: rows}, scale)``; ``scale`` is ``None`` unless ``vcal`` is requested.

    Raises:
        ValueError: on an unknown variant, or ``vcal`` without a ``val`` summary.
    """
    out: dict[str, list[Row]] = {}
    scale = None
    for calibration in check_calibrations(calibrations):
        if calibration == RAW:
            out[RAW] = list(rows)
        elif calibration == VCAL:
            scale = variance_scale(summaries)
            out[VCAL] = list(calibrated_rows(rows, summaries, scale))
    return out, scale
