"""Evaluating predictions on the study's splits: one :class:`pnc.Predictive` per split -> metric rows.

The evaluation protocol of the MuJoCo study (paper Section 5.3, Appendix C), with the metric
functions of :mod:`pnc.studies.mujoco.metrics` and the split and metric names of :mod:`pnc.studies.mujoco.results`:

- every split of :data:`~pnc.studies.mujoco.results.EVAL_SPLITS` (``val``, ``id``, ``near``, ``mid``,
  ``far``) gets :data:`~pnc.studies.mujoco.results.SPLIT_METRICS`: ``rmse`` and ``nll`` in original target
  units (the paper's; the NLL with the authors' variance floor :data:`NLL_VARIANCE_FLOOR`),
  ``rmse_std`` and ``nll_std`` in standardised units, and ``spearman``;
- every shifted split (:data:`~pnc.studies.mujoco.results.SHIFTED_SPLITS`: ``near``, ``mid``, ``far``) also
  gets :data:`~pnc.studies.mujoco.results.SHIFT_METRICS`: ``auroc`` and ``auroc_epistemic`` against the
  ``id`` split (ID = negatives, shifted = positives);
- the frontier sample of the two-phase evaluation (:data:`~pnc.studies.mujoco.results.SAMPLED_SPLITS`,
  rows drawn by :func:`sample_rows`) gets :data:`~pnc.studies.mujoco.results.SPLIT_METRICS` only.

The shifted splits are only ever *evaluated*: nothing here feeds back into training, construction,
post-hoc calibration or hyperparameter selection (calibration and selection use ``val`` alone, see
:mod:`pnc.studies.mujoco.calibration` and :mod:`pnc.studies.mujoco.selection`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator, Mapping

import numpy as np

from pnc.core.predictive import Predictive, epistemic_variance, mixture
from pnc.core.training import Standardizer
from pnc.studies.mujoco import metrics
from pnc.studies.mujoco.results import (
    EVAL_SPLITS,
    SAMPLE_ROWS,
    SCORED_SPLITS,
    SHIFT_METRICS,
    SHIFTED_SPLITS,
    SPLIT_METRICS,
)

#: Added to the predictive variance in the ``nll`` metric (the authors' ``compute_nll``).
NLL_VARIANCE_FLOOR = 1e-6


@dataclasses.dataclass(frozen=True)
class SplitSummary:
    """Per-split quantities of one prediction (all NumPy float64, original target units).

    Attributes:
        metrics: ``rmse``, ``rmse_std``, ``nll``, ``nll_std``, ``spearman`` of this split.
        total_score: per-point total predictive variance averaged over dims, ``[N]``.
        epistemic_score: per-point variance of the sampled means averaged over dims, ``[N]``.
        mean: moment-matched predictive mean ``[N, D]``.
        var: moment-matched predictive variance ``[N, D]``.
        target: the targets ``[N, D]`` (``mean``, ``var`` and ``target`` let the NLL of a
            rescaled predictive be computed without predicting again).
        scale: the training target standard deviations ``[D]`` (standardised = raw / scale, up
            to the shift).
    """

    metrics: dict[str, float]
    total_score: np.ndarray
    epistemic_score: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    target: np.ndarray
    scale: np.ndarray


def nll_metrics(mean: np.ndarray, var: np.ndarray, y: np.ndarray, scale: np.ndarray) -> dict:
    """``nll`` (original units, variance + :data:`NLL_VARIANCE_FLOOR`) and ``nll_std``
    (standardised by ``scale [D]``) of a Gaussian predictive ``mean``/``var``/``y [N, D]``."""
    return {
        "nll": metrics.mean_gaussian_nll(mean, var + NLL_VARIANCE_FLOOR, y),
        "nll_std": metrics.mean_gaussian_nll(mean / scale, var / np.square(scale), y / scale),
    }


def score_parts(pred: Predictive, y_norm: Standardizer) -> tuple[np.ndarray, np.ndarray]:
    """The two parts of the total-variance OOD score of :func:`summarise_split`.

    The moment-matched predictive variance is the mean of the samples' variances (aleatoric)
    plus the variance of their means (epistemic, the members' disagreement); in original target
    units and averaged over dimensions, as the score is, the two parts add up to
    ``SplitSummary.total_score`` and the second is ``SplitSummary.epistemic_score``. A common
    variance rescaling (the ``vcal`` calibration) scales both parts alike, so which part drives
    the AUROC does not depend on it.

    Args:
        pred: ``S`` predictive samples, means/variances ``[S, N, D]`` in the units of ``y_norm``.
        y_norm: the training target standardiser the prediction is expressed in.

    Returns:
        ``(aleatoric, epistemic)``, each ``[N]`` (NumPy float64).
    """
    scale = np.square(np.asarray(y_norm.std, np.float64))
    aleatoric = np.asarray(pred.variances, np.float64).mean(axis=0) * scale
    epistemic = np.asarray(epistemic_variance(pred), np.float64) * scale
    return aleatoric.mean(axis=-1), epistemic.mean(axis=-1)


def summarise_split(pred: Predictive, y_raw: np.ndarray, y_norm: Standardizer) -> SplitSummary:
    """Metrics and OOD scores of one split's prediction.

    Args:
        pred: ``S`` predictive samples on the split, means/variances ``[S, N, D]``, in the units
            of ``y_norm`` (standardised by it).
        y_raw: the split's targets in original units, ``[N, D]``.
        y_norm: the training target standardiser the prediction is expressed in.

    Returns:
        The split's :class:`SplitSummary`.
    """
    y_raw = np.asarray(y_raw, np.float64)
    if pred.means.ndim != 3 or pred.means.shape[1:] != y_raw.shape:
        raise ValueError(
            f"prediction of shape {tuple(pred.means.shape)} does not match targets {y_raw.shape}"
        )
    mean, var = (np.asarray(a, np.float64) for a in mixture(pred))
    std = np.asarray(y_norm.std, np.float64)
    mean = mean * std + np.asarray(y_norm.mean, np.float64)
    var = var * np.square(std)
    epistemic = np.asarray(epistemic_variance(pred), np.float64) * np.square(std)
    total = np.mean(var, axis=-1)
    sq_err = np.mean(np.square(mean - y_raw), axis=-1)
    values = {
        "rmse": metrics.rmse(mean, y_raw),
        "rmse_std": metrics.rmse(mean / std, y_raw / std),
        **nll_metrics(mean, var, y_raw, std),
        "spearman": metrics.spearman(total, sq_err),
    }
    return SplitSummary(values, total, np.mean(epistemic, axis=-1), mean, var, y_raw, std)


def sample_rows(n_rows: int, *key_parts: object, size: int = SAMPLE_ROWS) -> np.ndarray:
    """The rows of a split's frontier sample: ``min(size, n_rows)`` row indices in ascending order,
    drawn without replacement by a NumPy generator seeded from the name ``key_parts`` (e.g.
    ``(env, seed, "far_sample")``), so the sample is the same in every job and on every machine."""
    text = "/".join(str(p) for p in key_parts).encode()
    seed = int.from_bytes(hashlib.sha256(text).digest()[:8], "little")
    if n_rows <= size:
        return np.arange(n_rows)
    return np.sort(np.random.default_rng(seed).choice(n_rows, size, replace=False))


def metric_rows(summaries: Mapping[str, SplitSummary]) -> Iterator[tuple[str, str, float]]:
    """All metric rows of one configuration from its per-split summaries.

    Args:
        summaries: :class:`SplitSummary` per split name (a subset of :data:`SCORED_SPLITS`; must
            contain ``id`` when any shifted split is present).

    Yields:
        ``(split, metric, value)`` in split order, then metric order.
    """
    unknown = set(summaries) - set(SCORED_SPLITS)
    if unknown:
        raise ValueError(f"unknown splits {sorted(unknown)}; valid: {list(SCORED_SPLITS)}")
    if "id" not in summaries and any(s in summaries for s in SHIFTED_SPLITS):
        raise ValueError("shifted splits are scored against 'id', which is missing")
    for split in SCORED_SPLITS:
        if split not in summaries:
            continue
        summary = summaries[split]
        for name in SPLIT_METRICS:
            yield split, name, summary.metrics[name]
        if split in SHIFTED_SPLITS:
            ref = summaries["id"]
            shift_values = {
                "auroc": metrics.auroc(ref.total_score, summary.total_score),
                "auroc_epistemic": metrics.auroc(ref.epistemic_score, summary.epistemic_score),
            }
            for name in SHIFT_METRICS:
                yield split, name, shift_values[name]


def evaluate_splits(
    preds: Mapping[str, Predictive],
    targets: Mapping[str, np.ndarray],
    y_norm: Standardizer,
) -> Iterator[tuple[str, str, float]]:
    """All metric rows of one configuration from its predictions (see :func:`metric_rows`).

    Args:
        preds: prediction per split name.
        targets: raw targets ``[N, D]`` per split name (same keys as ``preds``).
        y_norm: the training target standardiser.
    """
    if set(preds) != set(targets):
        raise ValueError(f"predictions for {sorted(preds)} but targets for {sorted(targets)}")
    unknown = set(preds) - set(EVAL_SPLITS)
    if unknown:
        raise ValueError(f"unknown splits {sorted(unknown)}; valid: {list(EVAL_SPLITS)}")
    summaries = {s: summarise_split(preds[s], targets[s], y_norm) for s in preds}
    yield from metric_rows(summaries)
