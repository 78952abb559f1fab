"""OOD detection metrics with OpenOOD v1.5's conventions: ID is the positive class.

Every method gives a *confidence* per image (larger = more in-distribution): MSP, the energy
``logsumexp(logits)``, minus the Mahalanobis distance, minus the mixture entropy of an ensemble.

- AUROC: the area under the ROC curve of the confidence with ID images as positives and the OOD
  dataset's images as negatives, ``P(c_id > c_ood) + 0.5 P(c_id = c_ood)`` (Mann-Whitney with
  midranks; :func:`pnc.core.roc.auroc`).
- FPR@95%TPR: on the ROC curve of the same problem (thresholds from high to low, an image is
  called ID when ``c >= threshold``), the false positive rate (fraction of OOD images called ID)
  at the first threshold where the true positive rate (fraction of ID images called ID) reaches
  0.95, as OpenOOD v1.5 reads it off ``roc_curve``.

- AUPR-In: the average precision (scikit-learn's ``average_precision_score``: the precision at
  each threshold weighted by the increase in recall) with ID as the positive class and the
  confidence as the score; AUPR-Out: the same with OOD as the positive class and minus the
  confidence as the score (OpenOOD v1.5's two AUPRs).

These are computed per OOD dataset against the ID test set, then averaged over the datasets of a
group (Near, Far), as OpenOOD v1.5 reports them.

Calibration and accuracy on the ID test set, from the predictive probabilities ``p`` ``[N, K]``
after the method's temperature:

- NLL: ``-mean_i log p_i[y_i]`` (natural log; ``p`` floored at the smallest positive float32).
- Brier score: ``mean_i sum_k (p_ik - [k = y_i])^2`` (the multi-class form, in ``[0, 2]``).
- ECE: 15 equal-width bins of the top-class confidence ``max_k p_ik`` on ``[0, 1]`` (the usual
  choice since Guo et al., 2017; ``(lo, hi]`` bins, the first also holding 0),
  ``sum_b |B_b| / N * |acc(B_b) - conf(B_b)|``.
"""

from __future__ import annotations

import numpy as np

from pnc.core.roc import auroc as _auroc


def _scores(conf_id, conf_ood) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(conf_id, np.float64), np.asarray(conf_ood, np.float64)
    if a.ndim != 1 or b.ndim != 1 or not a.size or not b.size:
        raise ValueError(f"need two non-empty 1-D confidence arrays, got {a.shape}, {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("confidences must be finite")
    return a, b


def auroc(conf_id, conf_ood) -> float:
    """AUROC with ID as the positive class."""
    a, b = _scores(conf_id, conf_ood)
    return _auroc(score_negative=b, score_positive=a)


def fpr_at_tpr(conf_id, conf_ood, tpr: float = 0.95) -> float:
    """FPR at the first ROC threshold with TPR ``>= tpr`` (ID positive)."""
    a, b = _scores(conf_id, conf_ood)
    thresholds = np.unique(np.concatenate([a, b]))[::-1]  # distinct values, high to low
    # images with confidence >= each threshold
    tp = a.size - np.searchsorted(np.sort(a), thresholds, side="left")
    fp = b.size - np.searchsorted(np.sort(b), thresholds, side="left")
    first = int(np.argmax(tp / a.size >= tpr))
    return float(fp[first] / b.size)


def aupr_in(conf_id, conf_ood) -> float:
    """Average precision with ID as the positive class (scikit-learn)."""
    from sklearn.metrics import average_precision_score

    a, b = _scores(conf_id, conf_ood)
    y = np.concatenate([np.ones(a.size), np.zeros(b.size)])
    return float(average_precision_score(y, np.concatenate([a, b])))


def aupr_out(conf_id, conf_ood) -> float:
    """Average precision with OOD as the positive class, scored by minus the confidence."""
    from sklearn.metrics import average_precision_score

    a, b = _scores(conf_id, conf_ood)
    y = np.concatenate([np.zeros(a.size), np.ones(b.size)])
    return float(average_precision_score(y, -np.concatenate([a, b])))


def _probs(probs, labels) -> tuple[np.ndarray, np.ndarray]:
    p, y = np.asarray(probs, np.float64), np.asarray(labels)
    if p.ndim != 2 or y.shape != p.shape[:1] or not y.size:
        raise ValueError(f"need probabilities [N, K] and labels [N], got {p.shape}, {y.shape}")
    if not np.isfinite(p).all() or (p < 0).any():
        raise ValueError("probabilities must be finite and non-negative")
    if y.min() < 0 or y.max() >= p.shape[1]:
        raise ValueError(f"labels must be in 0..{p.shape[1] - 1}")
    return p, y.astype(np.int64)


def nll(probs, labels) -> float:
    """``-mean log p[y]`` of probabilities ``[N, K]``."""
    p, y = _probs(probs, labels)
    tiny = float(np.finfo(np.float32).tiny)
    return float(-np.mean(np.log(np.maximum(p[np.arange(y.size), y], tiny))))


def brier(probs, labels) -> float:
    """``mean_i sum_k (p_ik - onehot_ik)^2`` of probabilities ``[N, K]``."""
    p, y = _probs(probs, labels)
    onehot = np.eye(p.shape[1])[y]
    return float(np.mean(np.sum((p - onehot) ** 2, axis=1)))


def ece(probs, labels, n_bins: int = 15) -> float:
    """Expected calibration error over ``n_bins`` equal-width bins of the top-class confidence."""
    p, y = _probs(probs, labels)
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    conf = p.max(axis=1)
    correct = (p.argmax(axis=1) == y).astype(np.float64)
    # bin b holds confidences in (b / n, (b + 1) / n]; a confidence of 0 goes to bin 0
    bins = np.clip(np.ceil(conf * n_bins).astype(np.int64) - 1, 0, n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        mask = bins == b
        if mask.any():
            total += mask.sum() / y.size * abs(correct[mask].mean() - conf[mask].mean())
    return float(total)


def accuracy(pred, labels) -> float:
    pred, labels = np.asarray(pred), np.asarray(labels)
    if pred.shape != labels.shape or not pred.size:
        raise ValueError(f"predictions {pred.shape} and labels {labels.shape} must match")
    return float(np.mean(pred == labels))
