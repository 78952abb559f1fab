"""Cross-environment statistics of the MuJoCo study (paper Table 1 and Appendix C, Tables 3-5).

Input is the long-format results table the workflow writes (``results/results.csv``): one row per
measured value with columns ``env, method, config, calibration, seed, split, metric, value,
data_source``, holding only the selected (config, calibration) pair of each (env, method); a table
without ``calibration`` reads as ``raw`` throughout. From it this module computes

1. per (env, method, split, metric): the mean and sample standard deviation (``ddof=1``) over seeds;
2. per (env, split, metric): ranks of the six ranked methods on the seed means (1 = best; lower is
   better for RMSE and NLL, higher for AUROC and Spearman; ties share the average rank,
   ``scipy.stats.rankdata``), and across environments the mean rank, its sample standard deviation
   and the number of wins (environments where the method has the best rank; **every tied best
   method wins**, so wins can sum to more than the number of environments);
3. per (split, metric): two-sided Wilcoxon signed-rank tests of P&C against each baseline over
   environments on the per-environment seed means, Holm-corrected across the baselines at
   ``alpha = 0.05``.

The P&C ablation without correction (``pnc_nocorr``) is carried through the summary but never ranked
or tested. Methods, splits, metrics and their directions are those of :mod:`pnc.studies.mujoco.results`;
the input is validated there (:func:`pnc.studies.mujoco.results_table.validate`). This module only computes:
``python -m pnc.report tables RESULTS.csv --out DIR`` writes the tables (:mod:`pnc.report.tables`)
and ``DIR/stats.json``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pnc.studies.mujoco.results import (
    HEADLINE,
    METHODS,
    METRIC_INFO,
    METRICS,
    RANKED_METHODS,
    REFERENCE,
    REPORTED_SPLITS,
)
from pnc.studies.mujoco.results_table import ResultsError

ALPHA = 0.05
TIE_RULE = "every method tied for the best rank counts a win"


def key(split: str, metric: str) -> str:
    """The ``"split/metric"`` name used for a (split, metric) pair in the JSON output."""
    return f"{split}/{metric}"


# --------------------------------------------------------------------------------------------
# Table order
# --------------------------------------------------------------------------------------------


def env_order(df: pd.DataFrame) -> list[str]:
    """Environments in order of first appearance in the table."""
    return list(dict.fromkeys(df["env"]))


def methods_present(df: pd.DataFrame, methods: Sequence[str] = METHODS) -> list[str]:
    """``methods`` (in that order) that occur in the table."""
    present = set(df["method"])
    return [m for m in methods if m in present]


# --------------------------------------------------------------------------------------------
# Summary over seeds
# --------------------------------------------------------------------------------------------


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and sample standard deviation over seeds per (env, method, split, metric).

    Args:
        df: a validated results table (:func:`pnc.studies.mujoco.results_table.validate`).

    Returns:
        Columns ``env, method, config, calibration, split, metric, mean, std, n_seeds``; ``std``
        is NaN where a single seed leaves it undefined (``ddof=1``).
    """
    grouped = df.groupby(["env", "method", "split", "metric"], sort=False)
    out = grouped["value"].agg(mean="mean", std=lambda v: v.std(ddof=1), n_seeds="count")
    out = out.reset_index()
    pair = ["config", "calibration"]
    chosen = df.groupby(["env", "method"], sort=False)[pair].first()
    out = out.join(chosen, on=["env", "method"])
    return out[["env", "method", *pair, "split", "metric", "mean", "std", "n_seeds"]]


def mean_table(
    summary: pd.DataFrame, split: str, metric: str, methods: Sequence[str]
) -> pd.DataFrame:
    """Seed means of one (split, metric) as an ``[env, method]`` frame (envs lacking the split dropped).

    Raises:
        ResultsError: if an environment that has the split lacks one of ``methods`` there.
    """
    sel = summary[(summary.split == split) & (summary.metric == metric)]
    sel = sel[sel.method.isin(methods)]
    table = sel.pivot(index="env", columns="method", values="mean")
    envs = [e for e in dict.fromkeys(summary["env"]) if e in table.index]
    table = table.reindex(index=envs, columns=list(methods))
    holes = table.isna()
    if holes.any().any():
        missing = [f"{e}: {m}" for e in table.index for m in table.columns if holes.loc[e, m]]
        raise ResultsError(f"{key(split, metric)} is missing for method(s) in env(s): {missing}")
    return table


# --------------------------------------------------------------------------------------------
# Ranks
# --------------------------------------------------------------------------------------------


def rank_row(values: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Ranks ``1..k`` of ``k`` values, 1 = best, ties share their average rank.

    Args:
        values: ``[k]`` seed means of the ranked methods in one environment.
        higher_is_better: whether larger values are better.

    Returns:
        ``[k]`` float ranks.
    """
    from scipy import stats as sps  # imported where used: most report jobs never need scipy

    values = np.asarray(values, dtype=float)
    return sps.rankdata(-values if higher_is_better else values, method="average")


def rank_methods(
    summary: pd.DataFrame, split: str, metric: str, methods: Sequence[str] = RANKED_METHODS
) -> pd.DataFrame:
    """Per-environment ranks of ``methods`` on the seed mean of (split, metric), ``[env, method]``."""
    means = mean_table(summary, split, metric, methods)
    ranks = np.stack(
        [rank_row(row, METRIC_INFO[metric].higher_is_better) for row in means.to_numpy()]
    )
    return pd.DataFrame(ranks, index=means.index, columns=means.columns)


def rank_summary(ranks: pd.DataFrame) -> pd.DataFrame:
    """Mean rank, its sample standard deviation and wins across environments.

    Args:
        ranks: ``[env, method]`` ranks from :func:`rank_methods`.

    Returns:
        Indexed by method: ``mean_rank``, ``rank_std`` (``ddof=1``; NaN for one env), ``wins``
        (environments where the method's rank equals the best rank, so every tied best wins) and
        ``n_envs``.
    """
    best = ranks.min(axis=1)
    wins = ranks.eq(best, axis=0).sum(axis=0)
    return pd.DataFrame(
        {
            "mean_rank": ranks.mean(axis=0),
            "rank_std": ranks.std(axis=0, ddof=1),
            "wins": wins.astype(int),
            "n_envs": len(ranks),
        }
    )


# --------------------------------------------------------------------------------------------
# Wilcoxon signed-rank + Holm
# --------------------------------------------------------------------------------------------


def min_wilcoxon_p(n: int) -> float:
    """The smallest p-value a two-sided exact Wilcoxon signed-rank test can give on ``n`` pairs.

    It is reached when all ``n`` differences share one sign and equals ``2 / 2**n``; computed here
    with ``scipy.stats.wilcoxon(..., method="exact")`` on such a sample.
    """
    from scipy import stats as sps

    if n < 1:
        return 1.0
    return float(sps.wilcoxon(np.arange(1.0, n + 1.0), method="exact").pvalue)


def min_holm_p(n: int, n_comparisons: int) -> float:
    """The smallest Holm-adjusted p-value attainable with ``n`` pairs and ``n_comparisons`` tests.

    Holm multiplies the smallest raw p-value by the number of comparisons (and never lowers any
    other below it), so this is ``min(1, n_comparisons * 2**(1 - n))``.
    """
    return min(1.0, n_comparisons * min_wilcoxon_p(n))


def min_envs_for_significance(n_comparisons: int, alpha: float = ALPHA) -> int:
    """Fewest environments for which a Holm-adjusted exact Wilcoxon p-value can reach ``alpha``."""
    n = 1
    while min_holm_p(n, n_comparisons) > alpha:
        n += 1
    return n


def wilcoxon_test(improvement: np.ndarray) -> dict[str, Any]:
    """Two-sided Wilcoxon signed-rank test of per-environment improvements of P&C over a baseline.

    Args:
        improvement: ``[n_envs]`` differences oriented so that positive means P&C is better
            (``baseline - pnc`` for lower-is-better metrics, ``pnc - baseline`` otherwise).

    Returns:
        ``n_nonzero`` (zero differences are dropped, ``zero_method="wilcox"``), ``statistic``
        (scipy's two-sided statistic, the smaller signed-rank sum), ``r_plus``/``r_minus`` (rank sums
        of P&C-better and baseline-better environments), ``p`` (1.0 if every difference is zero),
        ``test`` (``"exact"`` without tied absolute differences, else the exact permutation
        distribution up to 13 pairs, else the normal approximation) and ``favours`` (``"pnc"``, ``"baseline"`` or
        ``None`` from the rank sums).
    """
    from scipy import stats as sps

    d = np.asarray(improvement, dtype=float)
    nonzero = d[d != 0]
    n = int(nonzero.size)
    if n == 0:
        return {
            "n_nonzero": 0,
            "statistic": None,
            "r_plus": 0.0,
            "r_minus": 0.0,
            "p": 1.0,
            "test": "none (all differences zero)",
            "favours": None,
        }
    ranks = sps.rankdata(np.abs(nonzero))
    r_plus, r_minus = float(ranks[nonzero > 0].sum()), float(ranks[nonzero < 0].sum())
    if np.unique(np.abs(nonzero)).size == n:
        label = "exact"
        res = sps.wilcoxon(nonzero, zero_method="wilcox", alternative="two-sided", method="exact")
        statistic, p = float(res.statistic), float(res.pvalue)
    elif n <= 13:  # all 2**n sign flips, as scipy's "auto" would: exact and deterministic
        label = "exact permutation (tied |differences|)"
        statistic, p = min(r_plus, r_minus), sign_flip_pvalue(ranks, r_plus)
    else:
        label = "normal approximation (tied |differences|)"
        res = sps.wilcoxon(
            nonzero, zero_method="wilcox", alternative="two-sided", method="asymptotic"
        )
        statistic, p = float(res.statistic), float(res.pvalue)
    favours = "pnc" if r_plus > r_minus else "baseline" if r_minus > r_plus else None
    return {
        "n_nonzero": n,
        "statistic": statistic,
        "r_plus": r_plus,
        "r_minus": r_minus,
        "p": p,
        "test": label,
        "favours": favours,
    }


def sign_flip_pvalue(ranks: np.ndarray, r_plus: float) -> float:
    """Two-sided p-value of the signed-rank sum ``r_plus`` under all ``2**n`` sign flips.

    The exact null distribution of the Wilcoxon statistic with tied absolute differences: the
    (mid)ranks stay where they are and every assignment of signs is equally likely. This is the
    test ``scipy.stats.wilcoxon(method="auto")`` runs on up to 13 tied pairs (a permutation test
    over the same ``2**n`` flips, with its relative tolerance of ``100 eps`` on ties of the
    statistic), computed here at once from the ranks instead of one statistic per flip; the
    p-values are the same numbers (``tests/test_stats.py``).

    Args:
        ranks: ``[n]`` the midranks of the absolute nonzero differences (``n <= 20``).
        r_plus: the observed sum of the ranks of the positive differences.

    Returns:
        ``min(1, 2 min(P(R+ <= r_plus), P(R+ >= r_plus)))`` under the sign-flip distribution.
    """
    n = ranks.size
    if n > 20:
        raise ValueError(f"{n} pairs: 2**{n} sign flips are too many to enumerate")
    flips = (np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1  # [2**n, n] 1 = positive
    null = flips.astype(np.float64) @ np.asarray(ranks, np.float64)  # sums of half-integers: exact
    gamma = abs(np.finfo(np.float64).eps * 100 * r_plus)
    less = np.count_nonzero(null <= r_plus + gamma) / 2**n
    greater = np.count_nonzero(null >= r_plus - gamma) / 2**n
    return float(np.clip(min(less, greater) * 2, 0.0, 1.0))


def holm(pvalues: Sequence[float], alpha: float = ALPHA) -> tuple[np.ndarray, np.ndarray]:
    """Holm's step-down correction (Holm 1979) of ``m`` p-values at family-wise level ``alpha``.

    Sorted ascending, the ``k``-th smallest p-value (``k = 0..m-1``) is adjusted to
    ``max_{j <= k} (m - j) p_(j)``, capped at 1; hypotheses are rejected in that order while
    ``p_(k) <= alpha / (m - k)``. The same numbers as ``statsmodels.stats.multitest.multipletests
    (method="holm")`` (``tests/test_stats.py``), without its full garbage collection on every call
    (about a second in a process that holds JAX's objects).

    Returns:
        ``(reject [m] bool, adjusted p [m])``, in the input order.
    """
    p = np.asarray(pvalues, float)
    m = p.size
    if m == 0:
        return np.zeros(0, bool), np.zeros(0)
    order = np.argsort(p)
    ranked = p[order]
    above = np.nonzero(ranked > alpha / np.arange(m, 0, -1))[0]
    rejected = np.arange(m) < (above[0] if above.size else m)
    adjusted = np.minimum(np.maximum.accumulate(ranked * np.arange(m, 0, -1)), 1.0)
    reject, out = np.empty(m, bool), np.empty(m)
    reject[order], out[order] = rejected, adjusted
    return reject, out


def compare_to_reference(
    summary: pd.DataFrame,
    split: str,
    metric: str,
    methods: Sequence[str],
    *,
    reference: str = REFERENCE,
    alpha: float = ALPHA,
) -> dict[str, Any]:
    """Wilcoxon-Holm comparisons of ``reference`` against every other method in ``methods``.

    Args:
        summary: output of :func:`summarise`.
        split, metric: the compared quantity (seed means per environment).
        methods: the ranked methods present (must contain ``reference``).
        reference: the method tested against each baseline.
        alpha: family-wise level of the Holm correction across the baselines.

    Returns:
        ``n_envs``, ``n_comparisons``, ``min_attainable_p_holm``, ``significance_attainable``
        (whether any Holm-adjusted p could reach ``alpha`` with this many environments), and
        ``tests``: per baseline the fields of :func:`wilcoxon_test` plus ``p_holm``,
        ``significant`` and ``arrow`` (``"up"`` where P&C is significantly better, ``"down"`` where
        the baseline is, else ``None``).
    """
    baselines = [m for m in methods if m != reference]
    means = mean_table(summary, split, metric, list(methods))
    sign = 1.0 if METRIC_INFO[metric].higher_is_better else -1.0
    tests = {b: wilcoxon_test(sign * (means[reference] - means[b]).to_numpy()) for b in baselines}
    reject, adjusted = holm([tests[b]["p"] for b in baselines], alpha)
    for b, rej, p_adj in zip(baselines, reject, adjusted, strict=True):
        t = tests[b]
        t["p_holm"] = float(p_adj)
        t["significant"] = bool(rej)
        t["arrow"] = {"pnc": "up", "baseline": "down"}.get(t["favours"]) if rej else None
    n_envs = len(means)
    min_p = min_holm_p(n_envs, len(baselines))
    return {
        "n_envs": n_envs,
        "n_comparisons": len(baselines),
        "alpha": alpha,
        "min_attainable_p_holm": min_p,
        "significance_attainable": bool(min_p <= alpha) and len(baselines) > 0,
        "tests": tests,
    }


def significance_note(n_envs: int, n_comparisons: int, alpha: float = ALPHA) -> str:
    """The sentence a table prints when no Holm-adjusted result can be significant."""
    return (
        f"With {n_envs} environment(s) and {n_comparisons} baseline(s), the smallest Holm-adjusted "
        f"p-value a two-sided exact Wilcoxon signed-rank test can reach is "
        f"min(1, {n_comparisons} x 2^(1-{n_envs})) = {min_holm_p(n_envs, n_comparisons):.3g} > "
        f"alpha = {alpha:g} (all differences of one sign); at least "
        f"{min_envs_for_significance(n_comparisons, alpha)} environments are needed, so no "
        f"comparison can be significant and no arrows are shown."
    )


# --------------------------------------------------------------------------------------------
# Everything
# --------------------------------------------------------------------------------------------


def _clean(obj: Any) -> Any:
    """NaN -> None and numpy scalars -> Python, recursively, for strict JSON."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return None if math.isnan(float(obj)) else float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def substitute_methods(df: pd.DataFrame, substitutions: Mapping[str, str]) -> pd.DataFrame:
    """A results table in which each ``target`` method of ``substitutions`` (``{target: source}``)
    has the rows of ``source`` instead of its own: how the tables show a second reading of a method
    (``{"deep_ensemble": "deep_ensemble_mixture"}`` ranks the Deep Ensemble's mixture reading in
    place of its draws). The source rows are renamed, the target's own rows dropped.

    Raises:
        ValueError: a target or source is missing from ``df``, a method is both, or a source
            serves two targets.
    """
    present = set(df["method"])
    problems = []
    for target, source in substitutions.items():
        for name, role in ((target, "target"), (source, "source")):
            if name not in present:
                problems.append(f"{role} method {name!r} has no rows")
    if set(substitutions) & set(substitutions.values()):
        problems.append("a method is both a target and a source")
    if len(set(substitutions.values())) != len(substitutions):
        problems.append("a source method serves two targets")
    if problems:
        raise ValueError("cannot substitute methods: " + "; ".join(problems))
    out = df[~df["method"].isin(list(substitutions))].copy()
    out["method"] = out["method"].replace({s: t for t, s in substitutions.items()})
    return out.reset_index(drop=True)


def compute_statistics(df: pd.DataFrame, *, alpha: float = ALPHA) -> dict[str, Any]:
    """All statistics of the study on a validated results table.

    Ranks are computed for every (split, metric) pair present and Wilcoxon-Holm tests for the
    headline pairs of Table 1 (:data:`HEADLINE`), among the ranked methods present in the table
    (the ablation ``pnc_nocorr`` is excluded); tests need ``pnc`` and at least one baseline.

    Returns:
        A JSON-serialisable dict: ``alpha``, ``tie_rule``, ``envs``, ``data_sources`` (per env),
        ``seeds`` (per env, the largest seed count), ``methods``, ``ranked_methods``,
        ``summary`` (records of :func:`summarise`), ``ranks`` and ``wilcoxon`` keyed by
        ``"split/metric"``.
    """
    summary = summarise(df)
    ranked = methods_present(df, RANKED_METHODS)
    envs = env_order(df)
    out: dict[str, Any] = {
        "alpha": alpha,
        "reference": REFERENCE,
        "tie_rule": TIE_RULE,
        "std": "sample standard deviation over seeds (ddof=1); null where a single seed",
        "envs": envs,
        "data_sources": df.groupby("env")["data_source"].first().reindex(envs).to_dict(),
        "seeds": df.groupby("env")["seed"].nunique().reindex(envs).astype(int).to_dict(),
        "methods": methods_present(df),
        "ranked_methods": ranked,
        "summary": summary.to_dict("records"),
        "ranks": {},
        "wilcoxon": {},
    }
    pairs = [
        (s, m)
        for s in REPORTED_SPLITS
        for m in METRICS
        if ((summary.split == s) & (summary.metric == m)).any()
    ]
    for split, metric in pairs:
        if not ranked:
            break
        ranks = rank_methods(summary, split, metric, ranked)
        agg = rank_summary(ranks)
        out["ranks"][key(split, metric)] = {
            "per_env": {e: ranks.loc[e].to_dict() for e in ranks.index},
            "mean_rank": agg["mean_rank"].to_dict(),
            "rank_std": agg["rank_std"].to_dict(),
            "wins": agg["wins"].to_dict(),
            "n_envs": int(len(ranks)),
            "higher_is_better": METRIC_INFO[metric].higher_is_better,
        }
        if (split, metric) in HEADLINE and REFERENCE in ranked and len(ranked) > 1:
            out["wilcoxon"][key(split, metric)] = compare_to_reference(
                summary, split, metric, ranked, alpha=alpha
            )
    return _clean(out)
