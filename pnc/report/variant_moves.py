"""Where a variant of the study (the authors' settings) moves each ranking claim's number, against
ours and the paper's: :func:`variant_moves` and its Markdown table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pnc.report.ranking_claims import FAR_METRICS, RANKING_CLAIMS, cells_of, ranking_claim
from pnc.report.table1 import Column
from pnc.runtime.render import markdown_table
from pnc.studies.mujoco.results import (
    DEEP_ENSEMBLE,
    METHOD_INFO,
    REFERENCE,
    SUBSPACE,
)

# --------------------------------------------------------------------------------------------
# A variant's moves (the authors' settings against ours)
# --------------------------------------------------------------------------------------------

#: Toward / away: the variant's number is nearer to / farther from the paper's than ours.
TOWARD, AWAY, UNCHANGED = "toward the paper", "away from the paper", "unchanged"


@dataclass(frozen=True)
class Move:
    """One ranking claim's number in ours, a variant and the paper, and where the variant moves
    it (:data:`TOWARD`, :data:`AWAY`, :data:`UNCHANGED`)."""

    claim: str
    quantity: str
    ours: float
    variant: float
    paper: float
    moves: str
    variant_verdict: str


def _rank(split: str, metric: str, method: str = REFERENCE) -> Callable[[Column], float]:
    return lambda column: float(cells_of(column, split, metric)[method].mean_rank)


def _wins(split: str, metric: str) -> Callable[[Column], float]:
    return lambda column: float(cells_of(column, split, metric)[REFERENCE].wins)


def _gap_to_deep_ensemble(column: Column) -> float:
    """P&C's Far mean rank minus the Deep Ensemble's, averaged over :data:`FAR_METRICS`."""
    gaps = []
    for metric in FAR_METRICS:
        cells = cells_of(column, "far", metric, need=(DEEP_ENSEMBLE,))
        gaps.append(cells[REFERENCE].mean_rank - cells[DEEP_ENSEMBLE].mean_rank)
    return float(np.mean(gaps))


#: Per ranking claim (:data:`RANKING_CLAIMS`, same order), the number that says how far it holds,
#: and the Subspace ID RMSE rank (the other result the authors' settings bear on).
MOVE_QUANTITIES: tuple[tuple[str, Callable[[Column], float]], ...] = (
    ("P&C's ID RMSE mean rank", _rank("id", "rmse")),
    ("P&C's ID RMSE wins", _wins("id", "rmse")),
    ("P&C's Far NLL mean rank", _rank("far", "nll")),
    ("P&C's Far AUROC mean rank", _rank("far", "auroc")),
    ("P&C's Far Spearman mean rank", _rank("far", "spearman")),
    ("P&C's Far mean rank minus the Deep Ensemble's (mean of 3)", _gap_to_deep_ensemble),
)


def _subspace_move() -> tuple[str, str, Callable[[Column], float]]:
    """The Subspace row of :func:`variant_moves` (Subspace's ID RMSE rank does not reproduce):
    claim, quantity and how to read it, named with the method's registered label."""
    label = METHOD_INFO[SUBSPACE].label
    return f"{label}'s ID RMSE rank", f"{label}'s ID RMSE mean rank", _rank("id", "rmse", SUBSPACE)


def direction(ours: float, variant: float, paper: float, tol: float = 1e-9) -> str:
    """:data:`TOWARD` when ``variant`` is nearer to ``paper`` than ``ours`` is, :data:`AWAY` when
    farther, :data:`UNCHANGED` when as near (within ``tol``)."""
    before, after = abs(ours - paper), abs(variant - paper)
    if after < before - tol:
        return TOWARD
    if after > before + tol:
        return AWAY
    return UNCHANGED


def variant_moves(
    ours: tuple[Column, Column | None], variant: tuple[Column, Column | None], paper: Column
) -> list[Move]:
    """Each ranking claim's number (:data:`MOVE_QUANTITIES`, the draws reading, the reading of the
    authors' runs) in ours, the variant and the paper, where the variant moves it, and the
    variant's verdict (both readings, as :func:`ranking_claim`); then Subspace's ID RMSE rank."""
    moves = []
    rows = [
        (claim, label, judge, quantity)
        for (claim, judge), (label, quantity) in zip(RANKING_CLAIMS, MOVE_QUANTITIES, strict=True)
    ]
    for claim, label, judge, quantity in rows:
        a, b, p = quantity(ours[0]), quantity(variant[0]), quantity(paper)
        verdict = ranking_claim(claim, judge, *variant).verdict
        moves.append(Move(claim, label, a, b, p, direction(a, b, p), verdict))
    claim, label, quantity = _subspace_move()
    a, b, p = quantity(ours[0]), quantity(variant[0]), quantity(paper)
    moves.append(Move(claim, label, a, b, p, direction(a, b, p), ""))
    return moves


def moves_markdown(moves: Sequence[Move], variant_label: str) -> str:
    """The moves as a Markdown pipe table."""
    rows = [
        [m.claim, m.quantity, f"{m.ours:.2f}", f"{m.variant:.2f}", f"{m.paper:.2f}", m.moves,
         m.variant_verdict or "-"]
        for m in moves
    ]  # fmt: skip
    header = ["Claim", "Number", "ours", variant_label, "paper", "The variant moves it",
              f"Verdict, {variant_label}"]  # fmt: skip
    return markdown_table(None, header, rows)
