"""The ranking claims of Section 5.3, judged on the Table 1 cells of each reading of the Deep
Ensemble (:func:`pnc.report.table1.statistics_of`: mean ranks, wins, Wilcoxon-Holm arrows at 0.05).

Each holds when it holds in every reading present (the authors' draws and, when the folder has it,
the mixture); ``measured`` also counts the environments where P&C's seed mean beats each baseline.
The rules, per reading: *competitive on ID RMSE* (no baseline significantly better), *the most ID
RMSE wins* (none has more; ties count), *best mean rank on Far NLL / AUROC / Spearman* (none
lower; ties count), *stronger OOD ranks than Deep Ensembles* (lower mean rank on all three Far
metrics).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from pnc.report import stats as st
from pnc.report.table1 import Cell, Column
from pnc.report.tables import column_label
from pnc.report.verdicts import Claim, better_counts, names, ordinal, reading_verdict
from pnc.runtime.render import ARROW
from pnc.studies.mujoco.results import (
    DEEP_ENSEMBLE,
    METHOD_INFO,
    REFERENCE,
)

#: The Far metrics of the OOD claims, in the order ``measured`` lists them.
FAR_METRICS: tuple[str, ...] = ("nll", "auroc", "spearman")

#: A ranking rule on one reading's Table 1 cells: whether the claim holds, and the numbers.
Judge = Callable[[Column], tuple[bool, str]]


# --------------------------------------------------------------------------------------------
# Ranking claims (Section 5.3)
# --------------------------------------------------------------------------------------------


def cells_of(
    column: Column, split: str, metric: str, *, need: Sequence[str] = ()
) -> dict[str, Cell]:
    """One metric's cells of a reading, checked: P&C, ``need`` and a baseline present, ranks finite.

    Raises:
        ValueError: the metric, P&C, a method of ``need`` or every baseline is missing, or a mean
            rank is not finite.
    """
    label = column_label(split, metric)
    cells = column.get(st.key(split, metric))
    if cells is None:
        raise ValueError(f"the results have no {label} ranks ({st.key(split, metric)} is missing)")
    lacking = [m for m in (REFERENCE, *need) if m not in cells]
    if lacking:
        raise ValueError(f"the results have no {label} rank for {lacking}")
    if len(cells) < 2:
        raise ValueError(f"the results rank no baseline on {label}")
    bad = [m for m, c in cells.items() if not np.isfinite(c.mean_rank)]
    if bad:
        raise ValueError(f"non-finite {label} mean rank for {bad}")
    return dict(cells)


def id_competitive(column: Column) -> tuple[bool, str]:
    """P&C is competitive on ID RMSE: no baseline significantly better (no ↓ arrow)."""
    cells = cells_of(column, "id", "rmse")
    pnc = cells[REFERENCE]
    better = [m for m, c in cells.items() if c.arrow == "down"]
    worse = [m for m, c in cells.items() if c.arrow == "up"]
    place = 1 + sum(c.mean_rank < pnc.mean_rank for c in cells.values())
    text = f"mean rank {pnc.mean_rank:.2f} ({ordinal(place)} of {len(cells)}), "
    text += (
        f"{names(better)} significantly better" if better else "no baseline significantly better"
    )
    if worse:
        text += f" (P&C significantly better than {names(worse)})"
    counts = better_counts(cells, [m for m in cells if m != REFERENCE])
    return not better, text + (f"; {counts}" if counts else "")


def id_most_wins(column: Column) -> tuple[bool, str]:
    """P&C has the most ID RMSE wins (a tie counts)."""
    cells = cells_of(column, "id", "rmse")
    pnc = cells[REFERENCE]
    others = sorted((m for m in cells if m != REFERENCE), key=lambda m: -cells[m].wins)
    more = [m for m in others if cells[m].wins > pnc.wins]
    shown = more or others[:1]
    listed = ", ".join(f"{METHOD_INFO[m].label} {cells[m].wins}" for m in shown)
    text = f"P&C {pnc.wins} of {pnc.n_envs}, {'more: ' if more else 'next: '}{listed}"
    return not more, text


def far_best_rank(metric: str) -> Judge:
    """P&C has the best mean rank on Far ``metric`` (a tie counts); ``measured`` gives its wins
    and against how many baselines it is significant."""

    def judge(column: Column) -> tuple[bool, str]:
        cells = cells_of(column, "far", metric)
        pnc = cells[REFERENCE]
        baselines = [m for m in cells if m != REFERENCE]
        best = min(baselines, key=lambda m: cells[m].mean_rank)
        holds = pnc.mean_rank <= cells[best].mean_rank
        up = [m for m in baselines if cells[m].arrow == "up"]
        down = [m for m in baselines if cells[m].arrow == "down"]
        not_up = [m for m in baselines if m not in up]
        text = (
            f"mean rank {pnc.mean_rank:.2f}, {pnc.wins} of {pnc.n_envs} wins, significant against "
            f"{len(up)} of {len(baselines)} baselines"
        )
        if up and not_up:
            text += f" ({names(up)})" if len(up) <= len(not_up) else f" (not {names(not_up)})"
        if down:
            text += f", significantly worse than {names(down)}"
        if not holds:
            text += f", best: {METHOD_INFO[best].label} {cells[best].mean_rank:.2f}"
        counts = better_counts(cells, baselines)
        return holds, text + (f"; {counts}" if counts else "")

    return judge


def stronger_than_deep_ensemble(column: Column) -> tuple[bool, str]:
    """P&C's mean rank is lower than the Deep Ensemble's on every Far metric of
    :data:`FAR_METRICS`; ``measured`` marks the Deep Ensemble's ranks with their arrows."""
    cells = [cells_of(column, "far", m, need=(DEEP_ENSEMBLE,)) for m in FAR_METRICS]
    pnc = [c[REFERENCE] for c in cells]
    de = [c[DEEP_ENSEMBLE] for c in cells]
    holds = all(p.mean_rank < d.mean_rank for p, d in zip(pnc, de, strict=True))
    ours = " / ".join(f"{p.mean_rank:.2f}" for p in pnc)
    theirs = " / ".join(f"{d.mean_rank:.2f}{ARROW.get(d.arrow or '', '')}" for d in de)
    text = f"{ours} against {theirs}"
    if all(d.better is not None for d in de):
        counts = " / ".join(str(d.better) for d in de)
        text += f"; P&C better than it in {counts} of {pnc[0].n_envs} environments"
    return holds, text


def best_count(split: str, metric: str) -> Callable[[Column], str]:
    """The per-environment count of a ranking claim on ``split``/``metric``: in how many
    environments P&C's seed mean is the best (its wins, a tie counting)."""

    def count(column: Column) -> tuple[str, str]:
        pnc = cells_of(column, split, metric)[REFERENCE]
        return "P&C best in", f"{pnc.wins} of {pnc.n_envs} environments"

    return count


def deep_ensemble_count(column: Column) -> tuple[str, str]:
    """The per-environment count of the Deep Ensemble claim: in how many environments P&C's seed
    mean is better than the Deep Ensemble's, per Far metric of :data:`FAR_METRICS`."""
    cells = [cells_of(column, "far", m, need=(DEEP_ENSEMBLE,)) for m in FAR_METRICS]
    better = [c[DEEP_ENSEMBLE].better for c in cells]
    n = cells[0][REFERENCE].n_envs
    if any(b is None for b in better):
        return "no count per environment", ""
    return (
        "P&C better than the Deep Ensemble in",
        f"{' / '.join(map(str, better))} of {n} environments",
    )


#: The ranking claims in order: the paper's wording (Section 5.3) and the rule.
RANKING_CLAIMS: tuple[tuple[str, Judge], ...] = (
    ("P&C is competitive on ID RMSE", id_competitive),
    ("P&C has the most ID RMSE wins (paper: 5/11)", id_most_wins),
    ("P&C has the best mean rank on Far NLL (paper: 8/11 wins)", far_best_rank("nll")),
    ("P&C has the best mean rank on Far AUROC (paper: 9/11 wins)", far_best_rank("auroc")),
    ("P&C has the best mean rank on Far Spearman (paper: 7/11 wins)", far_best_rank("spearman")),
    (
        "P&C has stronger OOD ranks than Deep Ensembles (Far NLL / AUROC / Spearman)",
        stronger_than_deep_ensemble,
    ),
)

#: Per ranking claim (:data:`RANKING_CLAIMS`, same order): its rule in words, and its count per
#: environment.
RANKING_RULES: tuple[tuple[str, Callable[[Column], tuple[str, str]]], ...] = (
    (
        "no baseline significantly better than P&C over the environments (no ↓)",
        best_count("id", "rmse"),
    ),
    ("no method with more ID RMSE wins than P&C (a tie counts)", best_count("id", "rmse")),
    *(
        (
            f"no method with a lower mean rank over the environments than P&C on Far "
            f"{column_label('far', m).split(' ', 1)[1].rstrip(' ↑↓')} (a tie counts)",
            best_count("far", m),
        )
        for m in FAR_METRICS
    ),
    (
        "P&C's mean rank over the environments below the Deep Ensemble's on all three Far metrics",
        deep_ensemble_count,
    ),
)


def ranking_rule(claim: str, draws: Column, mixture: Column | None) -> str:
    """A ranking claim's rule in one line, in each reading present, with its count per
    environment in each: ``"... in each reading; P&C best in 10 of 11 environments (draws),
    10 of 11 (mixture)"``."""
    index = [c for c, _ in RANKING_CLAIMS].index(claim)
    rule, count = RANKING_RULES[index]
    words, numbers = count(draws)
    text = f"{rule}, in each reading; {words} {numbers} (draws)"
    if mixture is not None:
        text += f", {count(mixture)[1]} (mixture)"
    return text


def ranking_claim(claim: str, judge: Judge, draws: Column, mixture: Column | None) -> Claim:
    """One ranking claim judged in each reading present (:func:`reading_verdict`)."""
    holds_draws, text = judge(draws)
    measured = f"draws: {text}"
    holds_mixture = None
    if mixture is None:
        measured += "; no mixture reading"
    else:
        holds_mixture, text = judge(mixture)
        measured += f"; mixture: {text}"
    rule = ranking_rule(claim, draws, mixture) if claim in dict(RANKING_CLAIMS) else ""
    return Claim(claim, measured, reading_verdict(holds_draws, holds_mixture), rule)
