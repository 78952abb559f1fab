"""The one rule that picks a configuration by its validation score, for both studies.

The lowest finite value wins; among equal values the first (in the order given) wins; a
non-finite value (``nan``, ``inf``, ``-inf``: a diverged configuration's NLL) never beats a finite
one, wherever it stands; when no value is finite nothing is selected: the rule refuses
(:class:`NoFiniteCandidateError`, naming every candidate), so a method whose every configuration
diverged never reaches the tables. The MuJoCo study's choice of
a configuration and calibration (:func:`select_candidate`) and the
CIFAR study's choice in a sweep and along coordinate descent
(:func:`pnc.methods.ood.posthoc.lowest_nll`, :func:`pnc.methods.ood.posthoc.coordinate_descent`)
all call :func:`lowest`, so the rule is safe on its own, whatever the caller did before. Their
selection records, strict JSON, write a non-finite score as ``null`` (:func:`finite_or_none`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

__all__ = ["NoFiniteCandidateError", "finite_or_none", "lowest", "select_candidate"]

K = TypeVar("K", bound=Hashable)


class NoFiniteCandidateError(ValueError):
    """No candidate has a finite score: every configuration diverged, and none is selected."""


def lowest(values: Sequence[float], names: Sequence[str] | None = None) -> int:
    """The index of the lowest finite value of ``values``, the first on ties.

    Args:
        values: scores ``[K]`` (lower is better), in preference order.
        names: the candidates' names, for the message when none is finite (default: positions).

    Raises:
        ValueError: if ``values`` is empty.
        NoFiniteCandidateError: if no value is finite (the message lists every candidate).
    """
    scores = [float(v) for v in values]
    if not scores:
        raise ValueError("no values to select from")
    finite = [i for i, v in enumerate(scores) if math.isfinite(v)]
    if not finite:
        labels = (
            [str(n) for n in names] if names is not None else [str(i) for i in range(len(scores))]
        )
        listed = ", ".join(f"{n}: {v}" for n, v in zip(labels, scores, strict=True))
        raise NoFiniteCandidateError(
            f"no candidate has a finite score (every one diverged), none is selected: {listed}"
        )
    return min(finite, key=scores.__getitem__)  # min keeps the first of equal values


def finite_or_none(obj: Any) -> Any:
    """``obj`` with every non-finite float (a diverged configuration's NLL) as ``None`` (JSON
    ``null``), inside dicts, lists and tuples (tuples become lists); every other value as it is."""
    if isinstance(obj, dict):
        return {k: finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite_or_none(v) for v in obj]
    if isinstance(obj, float | np.floating) and not math.isfinite(obj):
        return None
    return obj


def select_candidate(candidates: Mapping[K, float]) -> K:
    """The candidate with the lowest value (:func:`lowest` on a mapping): ``nan`` and ``inf`` never
    beat a finite value; among equal values the first candidate (in the mapping's order) wins.

    Args:
        candidates: value (e.g. seed-mean validation NLL) per candidate, in preference order.

    Raises:
        ValueError: if ``candidates`` is empty.
        NoFiniteCandidateError: if no value is finite (every candidate named).
    """
    order = list(candidates)
    if not order:
        raise ValueError("no candidates to select from")
    return order[lowest([candidates[c] for c in order], order)]
