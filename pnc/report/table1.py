"""Table 1 cells: per headline metric, each ranked method's mean rank, wins and Wilcoxon-Holm arrow.

The cells are what :mod:`pnc.report.compare` puts side by side (ours and the paper's) and what
:mod:`pnc.report.claims` judges the paper's ranking claims on. Our results give two readings: the
Deep Ensemble's predictive of the authors' runs ("draws", ``deep_ensemble``) and its mixture
reading (``deep_ensemble_mixture``) ranked in its place (:func:`our_readings`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from pnc.report import stats as st
from pnc.runtime.render import ARROW
from pnc.studies.mujoco.results import HEADLINE, READINGS, REFERENCE

#: The Deep Ensemble's second reading, ranked in its place in the "mixture" column (read from
#: the registry: each method's ``reading_of``).
MIXTURE_SUBSTITUTION: Mapping[str, str] = READINGS


@dataclass(frozen=True)
class Cell:
    """One method's Table 1 entry for one metric."""

    mean_rank: float
    rank_std: float
    wins: int
    n_envs: int
    arrow: str | None  # "up", "down" or None
    #: For a baseline, the environments where P&C's seed mean is strictly better than its own
    #: (:func:`cells_from_stats`); ``None`` for P&C and where the per-environment ranks are not
    #: known (the paper's Table 1 as printed).
    better: int | None = None

    def text(self, *, bold: bool) -> str:
        rank = f"{self.mean_rank:.2f} ± {self.rank_std:.2f}"
        rank = f"**{rank}**" if bold else rank
        return f"{rank} ({self.wins}/{self.n_envs}){ARROW[self.arrow] if self.arrow else ''}"


#: ``{"split/metric": {method: Cell}}``: one column of the comparison.
Column = dict[str, dict[str, Cell]]


def pnc_better(per_env: Mapping[str, Mapping[str, float]], method: str) -> int | None:
    """In how many environments P&C ranks strictly better than ``method`` (``per_env``: the
    per-environment ranks of :func:`pnc.report.stats.compute_statistics`, ties sharing a rank);
    ``None`` for P&C itself or when P&C is not ranked."""
    if method == REFERENCE or any(REFERENCE not in ranks for ranks in per_env.values()):
        return None
    return sum(ranks[REFERENCE] < ranks[method] for ranks in per_env.values())


def cells_from_stats(stats: Mapping[str, Any]) -> Column:
    """The Table 1 cells of :func:`pnc.report.stats.compute_statistics`' output."""
    out: Column = {}
    for split, metric in HEADLINE:
        k = st.key(split, metric)
        if k not in stats["ranks"]:
            continue
        r = stats["ranks"][k]
        tests = stats["wilcoxon"].get(k, {}).get("tests", {})
        out[k] = {
            m: Cell(
                mean_rank=float(r["mean_rank"][m]),
                rank_std=float("nan") if r["rank_std"][m] is None else float(r["rank_std"][m]),
                wins=int(r["wins"][m]),
                n_envs=int(r["n_envs"]),
                arrow=tests[m]["arrow"] if m in tests else None,
                better=pnc_better(r["per_env"], m),
            )
            for m in r["mean_rank"]
        }
    return out


def statistics_of(df: pd.DataFrame, substitutions: Mapping[str, str] | None = None) -> Column:
    """The Table 1 cells of a loaded results table, with ``substitutions`` applied first."""
    if substitutions:
        df = st.substitute_methods(df, substitutions)
    return cells_from_stats(st.compute_statistics(df))


def our_readings(ours: pd.DataFrame) -> tuple[Column, Column | None]:
    """Our Table 1 cells: the draws reading, and the mixture reading when the table has it."""
    mixture = None
    if set(MIXTURE_SUBSTITUTION.values()) <= set(ours["method"]):
        mixture = statistics_of(ours, MIXTURE_SUBSTITUTION)
    return statistics_of(ours), mixture
