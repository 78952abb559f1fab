"""The MuJoCo study's metrics (paper Section 5.3, Appendix C), on plain arrays.

Every function takes NumPy or JAX arrays, computes in float64 and returns a Python ``float``.
Shapes: predictive ``mean``/``var`` and targets ``y`` are ``[N, D]`` (``N`` points, ``D`` target
dimensions); per-point scores are ``[N]``.

The results tables name these metrics ``rmse``, ``rmse_std``, ``nll``, ``auroc``,
``auroc_epistemic`` and ``spearman``; their definitions are :data:`pnc.studies.mujoco.results.METRIC_INFO`,
and :mod:`pnc.studies.mujoco.evaluate` computes them from a prediction with the functions here. The AUROC
is :func:`pnc.core.roc.auroc` (shared with the CIFAR study), re-exported here.
"""

from __future__ import annotations

import math

import numpy as np

from pnc.core.roc import auroc, midranks

__all__ = [
    "auroc",
    "mean_gaussian_nll",
    "rmse",
    "spearman",
]


def _as_float64(a: object) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def _check_same_shape(**arrays: np.ndarray) -> None:
    shapes = {k: v.shape for k, v in arrays.items()}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"shape mismatch: {shapes}")
    if next(iter(shapes.values()))[0] == 0:
        raise ValueError("need at least one point, got an empty array")


def rmse(mean: np.ndarray, y: np.ndarray) -> float:
    """Root mean squared error over all entries, ``sqrt(mean((mean - y)^2))``.

    Args:
        mean: predictive means ``[N, D]`` (or ``[N]``).
        y: targets of the same shape, in the same units.

    Returns:
        The RMSE (``nan`` if any entry is non-finite).
    """
    mean, y = _as_float64(mean), _as_float64(y)
    _check_same_shape(mean=mean, y=y)
    return float(np.sqrt(np.mean(np.square(mean - y))))


def mean_gaussian_nll(mean: np.ndarray, var: np.ndarray, y: np.ndarray) -> float:
    """Mean Gaussian NLL ``0.5 (log 2 pi + log var + (y - mean)^2 / var)`` over all entries.

    The mean, in float64, of the elementwise NLL that :func:`pnc.core.mlp.gaussian_nll` computes (in
    JAX, for training).

    Args:
        mean: predictive means ``[N, D]``.
        var: predictive variances ``[N, D]`` (positive).
        y: targets ``[N, D]``.

    Returns:
        The mean NLL per point and dimension; ``nan`` if a variance is zero (``log 0 = -inf`` meets
        ``r^2 / 0 = inf``, or ``0 / 0``) or an input is ``nan``.

    Raises:
        ValueError: on shape mismatch or a negative variance.
    """
    mean, var, y = _as_float64(mean), _as_float64(var), _as_float64(y)
    _check_same_shape(mean=mean, var=var, y=y)
    if np.any(var < 0):
        raise ValueError(f"{int(np.sum(var < 0))} negative predictive variances")
    with np.errstate(divide="ignore", invalid="ignore"):
        nll = 0.5 * (math.log(2.0 * math.pi) + np.log(var) + np.square(y - mean) / var)
    return float(np.mean(nll))


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rank correlation of two per-point quantities.

    The statistic of ``scipy.stats.spearmanr(a, b)``, bit for bit: the Pearson correlation
    (``np.corrcoef``) of the two samples' midranks (:func:`pnc.core.roc.midranks`), laid out as
    ``spearmanr`` lays them out, without importing ``scipy.stats``.

    Args:
        a: e.g. per-point total predictive variance summed over dimensions, ``[N]``.
        b: e.g. per-point squared error summed over dimensions, ``[N]``.

    Returns:
        The correlation, or ``nan`` when it is undefined (fewer than 2 points, a constant input or a
        ``nan`` entry).
    """
    a, b = _as_float64(a), _as_float64(b)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"need two 1-D arrays of equal length, got shapes {a.shape}, {b.shape}")
    if a.size < 2 or np.any(np.isnan(a)) or np.any(np.isnan(b)):
        return math.nan
    if np.all(a == a[0]) or np.all(b == b[0]):
        return math.nan
    # two C-ordered rows [2, N], the layout spearmanr hands np.corrcoef, so that its sums run in
    # the same order
    return float(np.corrcoef(np.vstack([midranks(a), midranks(b)]))[1, 0])
