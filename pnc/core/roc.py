"""The AUROC of a score separating two samples, shared by the MuJoCo study
(:mod:`pnc.studies.mujoco.metrics`: shifted points against ID points) and the CIFAR study
(:mod:`pnc.studies.cifar.ood_metrics`: ID images against OOD images, ID positive).

Computes in float64 and returns a Python ``float``.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["auroc", "midranks"]


def midranks(values: np.ndarray) -> np.ndarray:
    """Ranks ``1..N`` of ``values``, ties given the mean of their ranks, as float64 ``[N]``.

    The ranks of ``scipy.stats.rankdata(values, method="average")``, bit for bit: every midrank
    is ``first + (count - 1) / 2`` for a tie group starting at integer rank ``first``, a multiple
    of 0.5 that float64 holds exactly, so any exact method gives the same numbers. Computed with
    NumPy alone (a stable sort and the tie groups' bounds), so the library needs neither SciPy nor
    pandas for it.

    Args:
        values: a 1-D array ``[N]`` without ``nan`` (ranks of ``nan`` are undefined).

    Returns:
        The ranks ``[N]`` (float64).
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"need a 1-D array, got shape {x.shape}")
    order = np.argsort(x, kind="stable")
    ordered = x[order]
    # a tie group starts where the sorted value changes; its members share one midrank
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    ends = np.append(starts[1:], x.size)  # one past each group's last position
    group_rank = (starts + 1 + ends) / 2.0  # mean of the 1-based ranks starts+1 .. ends
    ranks = np.empty(x.size, dtype=np.float64)
    ranks[order] = np.repeat(group_rank, ends - starts)
    return ranks


def auroc(score_negative: np.ndarray, score_positive: np.ndarray) -> float:
    """AUROC of a score separating positives (shifted data) from negatives (ID data).

    Equals ``P(s_pos > s_neg) + 0.5 P(s_pos = s_neg)`` for independent draws, computed from the
    Mann-Whitney U statistic with midranks: ``(R_pos - n_pos (n_pos + 1) / 2) / (n_pos n_neg)``,
    where ``R_pos`` is the sum of the positives' ranks in the pooled sample.

    Args:
        score_negative: scores of the negatives ``[N_neg]`` (ID evaluation points).
        score_positive: scores of the positives ``[N_pos]`` (shifted points).

    Returns:
        The AUROC in ``[0, 1]`` (``nan`` if any score is ``nan``).

    Raises:
        ValueError: if either sample is empty or not one-dimensional.
    """
    neg = np.asarray(score_negative, dtype=np.float64)
    pos = np.asarray(score_positive, dtype=np.float64)
    if neg.ndim != 1 or pos.ndim != 1 or neg.size == 0 or pos.size == 0:
        raise ValueError(
            f"need two non-empty 1-D score arrays, got shapes {neg.shape}, {pos.shape}"
        )
    pooled = np.concatenate([neg, pos])
    if np.any(np.isnan(pooled)):
        return math.nan
    ranks = midranks(pooled)
    n_pos, n_neg = pos.size, neg.size
    u_pos = float(np.sum(ranks[n_neg:])) - n_pos * (n_pos + 1) / 2.0
    return u_pos / (n_pos * n_neg)
