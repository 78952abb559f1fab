"""The paper's claims (Sections 5.2 and 5.3), each measured on a reference folder with a verdict.

One :class:`Claim` per claim of the paper: ``claim`` (the paper's wording, shortened), ``measured``
(the numbers behind the verdict), ``verdict``, from a fixed vocabulary, and ``rule``: the rule the
verdict follows, in one line, with its count per environment. Each verdict follows its own rule
(below); what "every" ranges over differs: a ranking claim is judged on statistics over the
environments (mean ranks, wins, the Wilcoxon-Holm test) in every reading, so it can hold while P&C
is not best in every environment (``rule`` counts those where it is); a mechanism claim is judged
per environment, on every seed:

- :data:`HOLDS`: the rule holds everywhere it is judged; :data:`DOES_NOT_HOLD`: nowhere;
- ``"partly: k of n (...)"`` (:func:`environment_verdict`) for a per-environment claim whose rule
  holds in some environments but not all, naming the shorter list: the environments where it
  holds, or (``not ...``) those where it fails;
- :data:`DRAWS_ONLY` / :data:`MIXTURE_ONLY` (``"partly: with the draws, not the mixture"`` and the
  reverse) for a ranking claim whose rule holds in one reading of the Deep Ensemble but not in
  the other (:func:`reading_verdict`);
- :data:`CANNOT_BE_COMPARED` when an optional input is missing: the mechanism table
  (``tables/mechanism.csv``) for the mechanism claims.

**Ranking claims** (Section 5.3) are read from the Table 1 cells of
:func:`pnc.report.table1.statistics_of`: mean ranks over environments, wins (every tied best
wins) and the Wilcoxon-Holm arrows at 0.05 (↑: P&C significantly better than the baseline, ↓: the
reverse). Each is judged in the "draws" reading (the Deep Ensemble's predictive of the authors'
runs) and, when the folder has it, in the "mixture" reading (``deep_ensemble_mixture`` ranked in the
Deep Ensemble's place, :data:`pnc.report.table1.MIXTURE_SUBSTITUTION`); the verdict is
:data:`HOLDS` when the claim holds in every reading present. Beside the test, ``measured`` counts
the environments where P&C's seed mean is better than each baseline's
(:attr:`pnc.report.table1.Cell.better`), since the Wilcoxon test over environments can miss a
difference that most environments share (and it does not see the spread over seeds). The rules,
per reading:

- *competitive on ID RMSE*: no baseline is significantly better than P&C (no ↓ arrow);
- *the most ID RMSE wins*: no method has more ID RMSE wins than P&C (a tie counts);
- *best mean rank on Far NLL / AUROC / Spearman* (one claim each): no method has a lower mean rank
  than P&C (a tie counts, as the comparison bolds every tied best);
- *stronger OOD ranks than Deep Ensembles*: P&C's mean rank is lower than the Deep Ensemble's on
  all three Far metrics.

**Mechanism claims** (Section 5.2 and the theory it validates) are read from the rows of
``tables/mechanism.csv`` (:func:`pnc.report.mechanism_table.mechanism_stats`) and judged per
environment; the verdict is :data:`HOLDS` when the rule holds in every environment of the table,
:data:`DOES_NOT_HOLD` when in none, else ``"partly: k of n (...)"``. A table with a ``seed`` column
holds one row per seed of an evidence (or of an evidence and sigma): the rule then holds in an
environment only when it holds on every seed, and ``measured`` counts the seeds too. The table's
3A rows are seed means; :func:`mechanism_of_folder` adds 3A's rows per seed from the folder's
pieces (:func:`seed_3a_rows`), so that 3A too is judged on every seed, its reading on the seed
means beside it, labelled. A composite claim is judged as its parts, one row each (3C). A range in
``measured`` says what it ranges over: the (environment, seed) pairs or the environments. The
rules, per environment:

- *3A, the correction lowers Far NLL at equal sigma*: P&C's Far NLL minus that of P&C without
  correction is negative at every sigma, on every seed, each method at the configuration chosen
  per sigma on the seed means (the paper shows Ant, :data:`PAPER_ENV`, whose values, means over the
  seeds, are named in ``measured``);
- *3B, disagreement grows with Mahalanobis distance*: slope > 0 with t > :data:`MIN_T`;
- *3C, random-probe sensitivity ranks the disagreement*: the Spearman correlation of the probe
  sketch with the disagreement is > 0;
- *3C, the log-log slope of the disagreement on the probe sketch is near 1* (the theory's
  prediction): it lies inside :data:`SLOPE_BAND`;
- *1B/C, the output change re-emerges under shift*: P&C's Far/ID ratio of ``||dy|| / ||dh||`` is
  > 1 (``measured`` gives the ratio without correction beside it, over the environments' seed
  means and over the (environment, seed) pairs);
- *Theorem 3, per-member bootstrap subsets raise the effective rank*: the median ratio of the
  effective ranks (per-member over shared subset) is > 1.

Nothing is dropped silently: a results table without a headline metric, a method the rule needs,
or a finite mean rank, and a mechanism table without an evidence row, an environment that another
evidence has, or a finite value, raise :class:`ValueError` naming what is missing.

Numbers in ``measured``: mean ranks with 2 decimals (as in :mod:`pnc.report.compare`), every other
number with 3 significant digits. :func:`pnc.report.compare.comparison_text` renders the claims of a
reference folder at the end of its ``comparison.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pnc.report import stats as st
from pnc.report.mechanism_table import (
    EVIDENCE_1BC,
    EVIDENCE_3A,
    EVIDENCE_3B,
    EVIDENCE_3C,
    EVIDENCE_THM3,
)
from pnc.report.table1 import Cell, Column, our_readings
from pnc.report.tables import column_label
from pnc.runtime.render import ARROW, decimals_for, fmt, markdown_table
from pnc.studies.mujoco.grid import config_field, read_tables
from pnc.studies.mujoco.per_sigma import PER_SIGMA_METHODS, per_sigma_choices, sigma_points
from pnc.studies.mujoco.results import DEEP_ENSEMBLE, METHOD_INFO, REFERENCE, SUBSPACE, load

#: The verdicts (module docstring; ``"partly: k of n (...)"``: :func:`environment_verdict`).
HOLDS = "holds"
DOES_NOT_HOLD = "does not hold"
#: The prefix of every verdict that holds in some environments or readings but not all.
PARTLY = "partly"
DRAWS_ONLY = f"{PARTLY}: with the draws, not the mixture"
MIXTURE_ONLY = f"{PARTLY}: with the mixture, not the draws"
CANNOT_BE_COMPARED = "cannot be compared"

#: The mechanism table inside a reference folder.
MECHANISM_FILE = Path("tables") / "mechanism.csv"
#: Columns of the mechanism table the claims read.
MECHANISM_COLUMNS: tuple[str, ...] = (
    "env", "evidence", "method", "sigma", "estimate", "t", "spearman",
)  # fmt: skip
#: 3C is judged on the random-probe sketch (the analytic sketch's rows are not read).
EVIDENCE_3C_PROBE = EVIDENCE_3C["sketch_probe"]
#: The environment of the paper's mechanism figures (Figures 1 and 3).
PAPER_ENV = "Ant"
#: 3B: the t statistic a slope must exceed.
MIN_T = 2.0
#: 3C: the band around the theory's log-log slope of 1 inside which the slope counts as near 1.
SLOPE_BAND = (0.8, 1.2)
#: The Far metrics of the OOD claims, in the order ``measured`` lists them.
FAR_METRICS: tuple[str, ...] = ("nll", "auroc", "spearman")
#: How the verdicts are decided (printed above the table).
RULE = (
    'Each verdict follows the rule stated beside it (column "Rule, per environment", from '
    "`pnc/report/claims.py`), with the count of environments where the rule's per-environment "
    "reading holds. A ranking claim is judged on the mean ranks, the wins or the Wilcoxon-Holm "
    "test over the environments' seed means, in each reading of the Deep Ensemble present "
    "(draws, mixture), so it can hold while P&C is not best in every environment: the count says "
    "in how many it is. A mechanism claim (`tables/mechanism.csv`) is judged per environment, and "
    "an environment holds it only when every seed does (3A too: on each seed's Far NLL at the "
    "configurations chosen per sigma on the seed means; its reading on the seed means stands "
    'beside it, labelled); a composite claim is judged in its parts. A verdict is "holds" '
    'when its rule holds in every reading (ranking) or every environment (mechanism), "does not '
    'hold" when in none, else "partly" with the readings or the environments named (the '
    'shorter list: where it holds, or "not" where it fails); "cannot be compared" marks a '
    "missing input."
)

#: A ranking rule on one reading's Table 1 cells: whether the claim holds, and the numbers.
Judge = Callable[[Column], tuple[bool, str]]
#: A mechanism rule on the mechanism table: ``measured``, ``verdict`` and the rule line.
MechanismJudge = Callable[[pd.DataFrame], tuple[str, str, str]]


@dataclass(frozen=True)
class Claim:
    """One of the paper's claims, what this folder measures, and the verdict."""

    claim: str
    measured: str
    verdict: str
    #: The rule the verdict follows, in one line, with its count per environment.
    rule: str = ""


# --------------------------------------------------------------------------------------------
# Verdicts and numbers
# --------------------------------------------------------------------------------------------


def reading_verdict(draws: bool, mixture: bool | None) -> str:
    """The verdict of a ranking claim from its result in each reading (``None``: no mixture)."""
    if mixture is None or draws == mixture:
        return HOLDS if draws else DOES_NOT_HOLD
    return DRAWS_ONLY if draws else MIXTURE_ONLY


def environment_verdict(passing: Sequence[str], failing: Sequence[str]) -> str:
    """The verdict of a per-environment claim whose rule holds in the ``passing`` environments and
    fails in the ``failing`` ones: :data:`HOLDS`, :data:`DOES_NOT_HOLD` or ``"partly: k of n"``
    with the shorter list named (``"partly: 9 of 11 (not Ant, HumanoidStandup)"``).

    Raises:
        ValueError: no environment, or one in both lists.
    """
    if not passing and not failing:
        raise ValueError("cannot judge a claim on no environment")
    both = sorted(set(passing) & set(failing))
    if both:
        raise ValueError(f"cannot judge: env(s) {both} both pass and fail")
    if not failing:
        return HOLDS
    if not passing:
        return DOES_NOT_HOLD
    n = len(passing) + len(failing)
    return f"{PARTLY}: {len(passing)} of {n}{_which(passing, failing)}"


def number(value: float, *, signed: bool = False) -> str:
    """``value`` with 3 significant digits (a leading ``+`` when ``signed`` and positive)."""
    text = fmt(value, decimals_for(value, 3, lo=0, hi=6))
    return f"+{text}" if signed and value > 0 else text


def span(values: Sequence[float]) -> str:
    """``"lo to hi"`` of ``values`` (3 significant digits)."""
    return f"{number(min(values))} to {number(max(values))}"


def names(methods: Sequence[str]) -> str:
    """Method labels joined: ``"MC Dropout, SWAG and Subspace"``."""
    labels = [METHOD_INFO[m].label for m in methods]
    if not labels:
        return "none"
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


def _which(passing: Sequence[str], failing: Sequence[str]) -> str:
    """The shorter of the two environment lists, in parentheses (empty when all or none pass)."""
    if not failing or not passing:
        return ""
    if len(passing) <= len(failing):
        return f" ({', '.join(passing)})"
    return f" (not {', '.join(failing)})"


def better_counts(cells: dict[str, Cell], baselines: Sequence[str]) -> str:
    """Per environment, how often P&C's seed mean is better than each baseline's
    (:attr:`Cell.better`): ``"P&C better than Deep Ensemble in 2 of 11 environments, SWAG 11"``;
    empty when no count is known."""
    counted = [m for m in baselines if cells[m].better is not None]
    if not counted:
        return ""
    n = cells[REFERENCE].n_envs
    first, *rest = counted
    text = (
        f"P&C better than {METHOD_INFO[first].label} in {cells[first].better} of {n} environments"
    )
    return text + "".join(f", {METHOD_INFO[m].label} {cells[m].better}" for m in rest)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


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
    text = f"mean rank {pnc.mean_rank:.2f} ({_ordinal(place)} of {len(cells)}), "
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


# --------------------------------------------------------------------------------------------
# Mechanism claims (Section 5.2)
# --------------------------------------------------------------------------------------------


def read_mechanism_table(folder: str | Path) -> pd.DataFrame | None:
    """A reference folder's ``tables/mechanism.csv``, or ``None`` when it has none.

    Raises:
        ValueError: a column of :data:`MECHANISM_COLUMNS` is missing.
    """
    path = Path(folder) / MECHANISM_FILE
    if not path.is_file():
        return None
    frame = pd.read_csv(path)
    missing = [c for c in MECHANISM_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}")
    return frame


#: Where a reference folder keeps its pieces' metric tables (:mod:`pnc.report.pieces`): every
#: configuration and calibration of every (environment, seed), from which 3A is judged per seed.
PIECE_METRICS = Path("pieces") / "results" / "metrics"
#: A reference folder's grid tables (one per method, ``results/grid/{method}.json`` of the run that
#: made it: each configuration's typed fields by id), which give each configuration's sigma.
GRID_TABLES = Path("grid")


def read_piece_metrics(
    folder: str | Path, methods: Sequence[str] = PER_SIGMA_METHODS
) -> pd.DataFrame | None:
    """The metric tables of ``methods`` in a folder's pieces (:data:`PIECE_METRICS`), or ``None``
    when it holds none."""
    root = Path(folder) / PIECE_METRICS
    paths = sorted(p for m in methods for p in root.glob(f"*/seed*/{m}/*.csv"))
    if not paths:
        return None
    return pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)


def seed_3a_rows(
    metrics: pd.DataFrame, envs: Sequence[str], sigmas: Mapping[tuple[str, str], float]
) -> pd.DataFrame:
    """3A per seed: per environment and sigma, P&C's Far NLL minus that of P&C w/o Corr on each
    seed, each at the (configuration, calibration) that the mechanism table's 3A rows compare (the
    lowest seed-mean validation NLL at that sigma, :func:`pnc.studies.mujoco.per_sigma.per_sigma_choices`).
    Rows in the mechanism table's columns, with ``seed``. ``sigmas``: each configuration's sigma,
    ``{(method, config id): sigma}`` from the grid tables
    (:func:`pnc.studies.mujoco.grid.config_field`).

    Raises:
        ValueError: a chosen configuration lacks a seed's Far NLL, or the two methods' seeds differ.
    """
    rows = []
    far = metrics[(metrics["split"] == "far") & (metrics["metric"] == "nll")]
    far = far.set_index(["env", "method", "config", "calibration", "seed"])["value"].sort_index()
    for env in envs:
        chosen = per_sigma_choices(sigma_points(metrics, env, sigmas))
        for sigma in sorted(chosen.loc[chosen["method"] == REFERENCE, "sigma"].unique()):
            at = chosen[chosen["sigma"] == sigma].set_index("method")
            if "pnc_nocorr" not in at.index:
                continue
            values = []
            for method in (REFERENCE, "pnc_nocorr"):
                key = (env, method, at.loc[method, "config"], at.loc[method, "calibration"])
                try:
                    values.append(far.loc[key])
                except KeyError:
                    raise ValueError(
                        f"{env}: no Far NLL of {method} {key[2:]} in the pieces"
                    ) from None
            pnc, nocorr = values
            if sorted(pnc.index) != sorted(nocorr.index):
                raise ValueError(
                    f"{env} sigma {sigma:g}: P&C has seeds {sorted(pnc.index)}, P&C w/o Corr "
                    f"{sorted(nocorr.index)}"
                )
            for seed in sorted(pnc.index):
                rows.append({"env": env, "evidence": EVIDENCE_3A, "method": REFERENCE,
                             "sigma": float(sigma), "estimate": pnc[seed] - nocorr[seed],
                             "seed": int(seed)})  # fmt: skip
    return pd.DataFrame(rows)


def mechanism_of_folder(folder: str | Path) -> pd.DataFrame | None:
    """A reference folder's mechanism table (:func:`read_mechanism_table`) with 3A's rows per seed
    (:func:`seed_3a_rows`) added from the folder's pieces, where the table holds rows per seed and
    the folder the pieces and its grid tables (:data:`GRID_TABLES`, each configuration's sigma): 3A
    is then judged on every seed; ``None`` without a table.

    Raises:
        ValueError: the per-seed rows' means are not the table's 3A rows (pieces and table from
            different runs).
    """
    table = read_mechanism_table(folder)
    if table is None or not per_seed(table):
        return table
    table_3a = table[table["evidence"] == EVIDENCE_3A]
    if table_3a.empty or table_3a["seed"].notna().any():
        return table
    metrics = read_piece_metrics(folder)
    grids = sorted((Path(folder) / GRID_TABLES).glob("*.json"))
    if metrics is None or not grids:
        return table
    sigmas = config_field(read_tables(grids), "sigma")
    seeded = seed_3a_rows(metrics, list(dict.fromkeys(table_3a["env"])), sigmas)
    means = _seed_means(seeded).set_index(["env", "sigma"])["estimate"]
    stated = table_3a.set_index(["env", "sigma"])["estimate"]
    if set(means.index) != set(stated.index) or not np.allclose(
        means.loc[stated.index].to_numpy(), stated.to_numpy(), rtol=1e-9, atol=1e-9
    ):
        raise ValueError(
            f"{Path(folder) / MECHANISM_FILE}: its 3A rows are not the seed means of the pieces' "
            f"Far NLL ({Path(folder) / PIECE_METRICS}): rebuild the table from the pieces"
        )
    return pd.concat([table, seeded], ignore_index=True)


def per_seed(mechanism: pd.DataFrame) -> bool:
    """Whether the table holds rows per seed (a ``seed`` column with a value,
    :func:`pnc.report.mechanism_table.mechanism_stats` on several seeds): then an evidence with
    rows per seed is judged on those, and its rows over the seeds are left to the reader."""
    return "seed" in mechanism.columns and bool(mechanism["seed"].notna().any())


def evidence_rows(
    mechanism: pd.DataFrame, evidence: str, values: Sequence[str], method: str = REFERENCE
) -> pd.DataFrame:
    """The rows of one evidence and method, checked: every environment of the table present and
    every column of ``values`` finite. Where the evidence has rows per seed (:func:`per_seed`), only
    those, and every environment must have the same seeds (3A, computed on the seed means, has
    none: its rows are judged).

    Raises:
        ValueError: no such rows, an environment of the table without one, an environment
            lacking a seed another has, or a non-finite value.
    """
    rows = mechanism[(mechanism["evidence"] == evidence) & (mechanism["method"] == method)]
    seeded = per_seed(rows)
    if seeded:
        rows = rows[rows["seed"].notna()]
    what = f"mechanism table: {evidence!r} ({method})"
    if rows.empty:
        raise ValueError(f"{what} has no rows")
    lacking = [e for e in dict.fromkeys(mechanism["env"]) if e not in set(rows["env"])]
    if lacking:
        raise ValueError(f"{what} is missing for env(s) {lacking}")
    numbers = rows[list(values)].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    bad = sorted(set(rows["env"][~np.isfinite(numbers).all(axis=1)]))
    if bad:
        raise ValueError(f"{what} has a non-finite {'/'.join(values)} in env(s) {bad}")
    if seeded:
        seed = rows["seed"].astype(int)
        seeds = seed.groupby(rows["env"], sort=False).agg(lambda s: tuple(sorted(set(s))))
        every = tuple(sorted(set(seed)))
        short = [e for e in seeds.index if seeds[e] != every]
        if short:
            raise ValueError(f"{what} lacks some of the seeds {list(every)} in env(s) {short}")
    return rows


def _per_env(rows: pd.DataFrame, passes: pd.Series) -> tuple[list[str], list[str]]:
    """Environments (table order) where every row passes (every seed, every sigma), and the
    others."""
    ok = passes.groupby(rows["env"], sort=False).all()
    return [e for e in ok.index if ok[e]], [e for e in ok.index if not ok[e]]


def _several_seeds(rows: pd.DataFrame) -> bool:
    """Whether ``rows`` hold more than one seed (a ``seed`` column with two values or more)."""
    return "seed" in rows.columns and rows["seed"].notna().any() and rows["seed"].nunique() >= 2


def _seeds(rows: pd.DataFrame, passes: pd.Series) -> str:
    """For rows per seed: ``", on 95 of 110 (environment, seed) pairs"``; else empty."""
    if not _several_seeds(rows):
        return ""
    ok = passes.groupby([rows["env"], rows["seed"]], sort=False).all()
    return f", on {int(ok.sum())} of {len(ok)} (environment, seed) pairs"


def _env_means(rows: pd.DataFrame, column: str) -> pd.Series:
    """``column`` per environment (table order), averaged over the rows (seeds) of each."""
    return rows.groupby("env", sort=False)[column].mean()


def _over(rows: pd.DataFrame) -> str:
    """What a range of ``rows``' values ranges over: the (environment, seed) pairs, or the
    environments (one row each)."""
    return "per (environment, seed) pair" if _several_seeds(rows) else "per environment"


def _judged(rows: pd.DataFrame, passes: pd.Series, rule: str) -> tuple[str, str, str]:
    """``measured``'s opening (the rule, ``k of n``, the environments named, the seeds counted),
    the verdict and the rule line (the rule per environment and its count)."""
    good, bad = _per_env(rows, passes)
    n, which = len(good) + len(bad), _which(good, bad)
    text = f"{rule} in {len(good)} of {n}{which}{_seeds(rows, passes)}"
    every = " on every seed" if _several_seeds(rows) else ""
    line = f"an environment holds when {rule}{every}; {len(good)} of {n} environments{which}"
    return text, environment_verdict(good, bad), line


def _seed_means(rows: pd.DataFrame) -> pd.DataFrame:
    """3A's rows averaged over the seeds, one per (environment, sigma), in table order."""
    return rows.groupby(["env", "sigma"], sort=False, as_index=False)["estimate"].mean()


def correction_lowers_far_nll(mechanism: pd.DataFrame) -> tuple[str, str, str]:
    """3A: P&C's Far NLL minus that of P&C w/o Corr is negative at every sigma; on every seed
    where the table has 3A rows per seed (:func:`seed_3a_rows`), its reading on the seed means
    beside it, labelled. ``measured`` also names the environments where it is positive at every
    sigma (on the seed means)."""
    rows = evidence_rows(mechanism, EVIDENCE_3A, ("sigma", "estimate"))
    rule = "negative at every σ"
    text, verdict, line = _judged(rows, rows["estimate"] < 0, rule)
    means = rows
    if _several_seeds(rows):
        ok = (rows["estimate"] < 0).groupby([rows["env"], rows["seed"]], sort=False).all()
        some = ok.groupby(level=0, sort=False).agg(["sum", "size"])
        partial = some[(some["sum"] > 0) & (some["sum"] < some["size"])]
        if len(partial):
            text += (
                " (seeds passing: "
                + ", ".join(
                    f"{e} {int(r['sum'])} of {int(r['size'])}" for e, r in partial.iterrows()
                )
                + ")"
            )
        means = _seed_means(rows)
        good, bad = _per_env(means, means["estimate"] < 0)
        reading = f"{len(good)} of {len(good) + len(bad)}{_which(good, bad)}"
        text += f"; on the seed means (the mechanism table's reading): {rule} in {reading}"
        line += f"; on the seed means {reading}"
    positive, _ = _per_env(means, means["estimate"] > 0)
    if positive:
        text += f", positive at every σ in {', '.join(positive)}"
    paper = means[means["env"] == PAPER_ENV].groupby("sigma")["estimate"].mean()
    if paper.empty:
        text += f"; no {PAPER_ENV} row"
    else:
        diffs = " / ".join(number(v, signed=True) for v in paper)
        sigmas = " / ".join(f"{s:g}" for s in paper.index)
        label = " (means over the seeds)" if per_seed(mechanism) else ""
        text += f"; {PAPER_ENV} (the paper's): {diffs} at σ = {sigmas}{label}"
    return text, verdict, line


def disagreement_grows_with_distance(mechanism: pd.DataFrame) -> tuple[str, str, str]:
    """3B: the slope of D on log10 Mahalanobis distance is positive with t > :data:`MIN_T`."""
    rows = evidence_rows(mechanism, EVIDENCE_3B, ("estimate", "t", "spearman"))
    passes = (rows["estimate"] > 0) & (rows["t"] > MIN_T)
    text, verdict, line = _judged(rows, passes, f"slope > 0 with t > {MIN_T:g}")
    ranges = f"t {span(rows['t'])}, Spearman {span(rows['spearman'])} {_over(rows)}"
    return f"{text}; {ranges}", verdict, line


def sketch_ranks_disagreement(mechanism: pd.DataFrame) -> tuple[str, str, str]:
    """3C, rank agreement: the probe sketch's Spearman correlation with D is positive."""
    rows = evidence_rows(mechanism, EVIDENCE_3C_PROBE, ("spearman",))
    text, verdict, line = _judged(rows, rows["spearman"] > 0, "Spearman > 0")
    return f"{text} ({span(rows['spearman'])} {_over(rows)})", verdict, line


def sketch_slope_near_one(mechanism: pd.DataFrame) -> tuple[str, str, str]:
    """3C, the theory's slope: the log-log slope of D on the probe sketch lies in
    :data:`SLOPE_BAND`; ``measured`` names the environments outside it with their slopes."""
    rows = evidence_rows(mechanism, EVIDENCE_3C_PROBE, ("estimate",))
    lo, hi = SLOPE_BAND
    inside = (rows["estimate"] >= lo) & (rows["estimate"] <= hi)
    text, verdict, line = _judged(rows, inside, f"inside [{lo:g}, {hi:g}]")
    _, outside = _per_env(rows, inside)
    slopes = _env_means(rows, "estimate")
    text += f"; slope {span(rows['estimate'])} {_over(rows)}"
    if outside and _several_seeds(rows):
        # an environment fails when one of its seeds does, though its mean may lie in the band
        kept, count = inside.groupby(rows["env"]).sum(), rows.groupby("env").size()
        text += ", outside on some seed in " + ", ".join(
            f"{e} (mean {number(slopes[e])}, {int(kept[e])} of {int(count[e])} seeds inside)"
            for e in outside
        )
    elif outside:
        text += ", outside in " + ", ".join(f"{e} ({number(slopes[e])})" for e in outside)
    return text, verdict, line


def output_change_reemerges(mechanism: pd.DataFrame) -> tuple[str, str, str]:
    """1B/C: P&C's Far/ID ratio of ``||dy|| / ||dh||`` is above 1; P&C w/o Corr's beside it. Each
    range is labelled by what it ranges over: the environments' seed means and, with rows per
    seed, the (environment, seed) pairs."""
    rows = evidence_rows(mechanism, EVIDENCE_1BC, ("estimate",))
    nocorr = evidence_rows(mechanism, EVIDENCE_1BC, ("estimate",), method="pnc_nocorr")
    text, verdict, line = _judged(rows, rows["estimate"] > 1, "P&C above 1")
    means = _env_means(rows, "estimate")
    lo, hi = means.idxmin(), means.idxmax()
    seeded = _several_seeds(rows)
    over = "environment means " if seeded else ""
    text += f" ({over}{number(means[lo])} {lo} to {number(means[hi])} {hi}"
    if seeded:
        text += f", per (environment, seed) pair {span(rows['estimate'])}"
    text += f"); w/o correction {over}{span(_env_means(nocorr, 'estimate'))}"
    if _several_seeds(nocorr):
        above = int((nocorr["estimate"] > 1).sum())
        text += (
            f", per (environment, seed) pair {span(nocorr['estimate'])}, above 1 in {above} of "
            f"{len(nocorr)} pairs"
        )
    return text, verdict, line


def bootstrap_raises_rank(mechanism: pd.DataFrame) -> tuple[str, str, str]:
    """Theorem 3: the effective rank per-member over shared subset is above 1."""
    rows = evidence_rows(mechanism, EVIDENCE_THM3, ("estimate",))
    text, verdict, line = _judged(rows, rows["estimate"] > 1, "above 1")
    return f"{text} ({span(rows['estimate'])} {_over(rows)})", verdict, line


#: The mechanism claims in order: the claim (Section 5.2, Figures 1 and 3, Theorem 3) and the rule.
MECHANISM_CLAIMS: tuple[tuple[str, MechanismJudge], ...] = (
    ("3A: the correction lowers Far NLL at equal sigma (paper: Ant)", correction_lowers_far_nll),
    ("3B: disagreement grows with Mahalanobis distance", disagreement_grows_with_distance),
    (
        "3C: random-probe sensitivity ranks the disagreement (Spearman above 0)",
        sketch_ranks_disagreement,
    ),
    (
        "3C: the log-log slope of disagreement on random-probe sensitivity is near the theory's 1",
        sketch_slope_near_one,
    ),
    (
        "1B/C: the output change re-emerges under shift (Far/ID of ‖dy‖ / ‖dh‖ above 1)",
        output_change_reemerges,
    ),
    (
        "Theorem 3: per-member bootstrap subsets raise the effective rank over one shared subset",
        bootstrap_raises_rank,
    ),
)


def mechanism_claim(claim: str, judge: MechanismJudge, mechanism: pd.DataFrame | None) -> Claim:
    """One mechanism claim, or :data:`CANNOT_BE_COMPARED` without a mechanism table."""
    if mechanism is None:
        return Claim(claim, f"no mechanism table ({MECHANISM_FILE})", CANNOT_BE_COMPARED)
    measured, verdict, rule = judge(mechanism)
    return Claim(claim, measured, verdict, rule)


# --------------------------------------------------------------------------------------------
# All claims
# --------------------------------------------------------------------------------------------


def claims_of(
    draws: Column, mixture: Column | None = None, mechanism: pd.DataFrame | None = None
) -> list[Claim]:
    """Every claim: the ranking claims on the Table 1 cells of the draws and mixture readings
    (:func:`pnc.report.table1.our_readings`), the mechanism claims on the mechanism table."""
    return [ranking_claim(c, judge, draws, mixture) for c, judge in RANKING_CLAIMS] + [
        mechanism_claim(c, judge, mechanism) for c, judge in MECHANISM_CLAIMS
    ]


def claims_of_folder(folder: str | Path) -> list[Claim]:
    """Every claim measured on a reference folder (``results.csv``, ``tables/mechanism.csv``)."""
    draws, mixture = our_readings(load(Path(folder) / "results.csv"))
    return claims_of(draws, mixture, mechanism_of_folder(folder))


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


def claims_markdown(claims: Sequence[Claim]) -> str:
    """The claims as a Markdown pipe table (:func:`pnc.runtime.render.markdown_table`)."""
    rows = [[c.claim, c.measured, c.rule or "-", c.verdict] for c in claims]
    return markdown_table(None, ["Claim", "Measured", "Rule, per environment", "Verdict"], rows)
