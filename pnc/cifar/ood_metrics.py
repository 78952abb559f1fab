"""OOD detection metrics with OpenOOD v1.5's conventions: ID is the positive class.

Every method gives a *confidence* per image (larger = more in-distribution): MSP, the energy
``logsumexp(logits)``, minus the Mahalanobis distance, minus the mixture entropy of an ensemble.

- AUROC: the area under the ROC curve of the confidence with ID images as positives and the OOD
  dataset's images as negatives, ``P(c_id > c_ood) + 0.5 P(c_id = c_ood)`` (Mann-Whitney with
  midranks; :func:`pnc.study.metrics.auroc`).
- FPR@95%TPR: on the ROC curve of the same problem (thresholds from high to low, an image is
  called ID when ``c >= threshold``), the false positive rate (fraction of OOD images called ID)
  at the first threshold where the true positive rate (fraction of ID images called ID) reaches
  0.95, as OpenOOD v1.5 reads it off ``roc_curve``.

Both are computed per OOD dataset against the CIFAR-10 test set, then averaged over the datasets
of a group (Near, Far), as OpenOOD v1.5 reports them.
"""

from __future__ import annotations

import numpy as np

from pnc.study.metrics import auroc as _auroc


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


def accuracy(pred, labels) -> float:
    pred, labels = np.asarray(pred), np.asarray(labels)
    if pred.shape != labels.shape or not pred.size:
        raise ValueError(f"predictions {pred.shape} and labels {labels.shape} must match")
    return float(np.mean(pred == labels))
