"""Cross-environment statistics of the MuJoCo study (paper Table 1 and Appendix C, Tables 3-5).

Input is the long-format results table the workflow writes (``results/results.csv``): one row per
measured value with columns ``env, method, config, seed, split, metric, value, data_source``, holding
only the selected configuration of each (env, method). From it this module computes

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
or tested. ``python -m pnc.report.stats RESULTS.csv --out DIR`` writes the tables (:mod:`pnc.report.tables`) and
``DIR/stats.json``.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from pnc.io import write_json

#: The six methods of the ranking, in the paper's row order (P&C last).
RANKED_METHODS: tuple[str, ...] = (
    "deep_ensemble",
    "mc_dropout",
    "swag",
    "laplace",
    "subspace",
    "pnc",
)
#: Methods reported in the summary and figures but never ranked or tested.
ABLATION_METHODS: tuple[str, ...] = ("pnc_nocorr",)
METHODS: tuple[str, ...] = RANKED_METHODS + ABLATION_METHODS
#: The method every baseline is tested against.
REFERENCE = "pnc"
METHOD_LABELS: dict[str, str] = {
    "deep_ensemble": "Deep Ensemble",
    "mc_dropout": "MC Dropout",
    "swag": "SWAG",
    "laplace": "Laplace",
    "subspace": "Subspace",
    "pnc": "P&C",
    "pnc_nocorr": "P&C w/o Corr",
}

#: Evaluation splits in display order; ``val`` rows are accepted in the input and ignored.
SPLITS: tuple[str, ...] = ("id", "near", "mid", "far")
IGNORED_SPLITS: tuple[str, ...] = ("val",)
SPLIT_LABELS: dict[str, str] = {"id": "ID", "near": "Near", "mid": "Mid", "far": "Far"}

#: Metric -> whether higher values are better.
HIGHER_IS_BETTER: dict[str, bool] = {
    "rmse": False,
    "rmse_std": False,
    "nll": False,
    "auroc": True,
    "auroc_epistemic": True,
    "spearman": True,
}
METRICS: tuple[str, ...] = tuple(HIGHER_IS_BETTER)
METRIC_LABELS: dict[str, str] = {
    "rmse": "RMSE",
    "rmse_std": "RMSE (std.)",
    "nll": "NLL",
    "auroc": "AUROC",
    "auroc_epistemic": "AUROC (epist.)",
    "spearman": "Spearman",
}
#: The four headline (split, metric) pairs of paper Table 1.
HEADLINE: tuple[tuple[str, str], ...] = (
    ("id", "rmse"),
    ("far", "nll"),
    ("far", "auroc"),
    ("far", "spearman"),
)

REQUIRED_COLUMNS: tuple[str, ...] = ("env", "method", "seed", "split", "metric", "value")
#: Optional columns and the value they take when absent.
OPTIONAL_DEFAULTS: dict[str, str] = {"config": "default", "data_source": "unspecified"}
DATA_SOURCES: tuple[str, ...] = ("minari", "offline", "unspecified")
ALPHA = 0.05
TIE_RULE = "every method tied for the best rank counts a win"


class ResultsError(ValueError):
    """The results table is malformed; the message names the offending column, value or rows."""


def key(split: str, metric: str) -> str:
    """The ``"split/metric"`` name used for a (split, metric) pair in the JSON output."""
    return f"{split}/{metric}"


# --------------------------------------------------------------------------------------------
# Loading and validation
# --------------------------------------------------------------------------------------------


def _describe_rows(frame: pd.DataFrame, limit: int = 5) -> str:
    cols = [c for c in ("env", "method", "config", "seed", "split", "metric") if c in frame]
    rows = [
        ", ".join(f"{c}={r[c]}" for c in cols) for r in frame[cols].head(limit).to_dict("records")
    ]
    more = f" (and {len(frame) - limit} more)" if len(frame) > limit else ""
    return "; ".join(rows) + more


def validate_results(frame: pd.DataFrame, *, require_selected: bool = False) -> pd.DataFrame:
    """Check a long-format results table and return a clean copy without ``val`` rows.

    Args:
        frame: one row per measured value; required columns ``env, method, seed, split, metric,
            value``; optional ``config`` (default ``"default"``) and ``data_source`` (default
            ``"unspecified"``); with ``require_selected`` also a boolean ``selected`` column.
        require_selected: whether the table lists every configuration (``all_configs.csv``) and so
            needs a ``selected`` column and may hold several configurations per (env, method).

    Returns:
        A copy with string ``env``/``method``/``config``/``split``/``metric``/``data_source``,
        float ``value`` and the ``val`` split removed.

    Raises:
        ResultsError: on missing columns, unknown methods/splits/metrics/data sources, missing or
            non-finite values, duplicated measurements, several configurations of one
            (env, method) in a selected-only table, or an env with more than one data source.
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if require_selected and "selected" not in frame.columns:
        missing.append("selected")
    if missing:
        raise ResultsError(
            f"results table lacks required column(s) {missing}; it has {list(frame.columns)}"
        )
    df = frame.copy()
    for column, default in OPTIONAL_DEFAULTS.items():
        if column not in df.columns:
            df[column] = default
    df["config"] = df["config"].fillna("").astype(str).replace("", "default")
    for column in ("env", "method", "split", "metric", "data_source"):
        if df[column].isna().any():
            raise ResultsError(
                f"column {column!r} is empty in rows: {_describe_rows(df[df[column].isna()])}"
            )
        df[column] = df[column].astype(str).str.strip()
    if df["seed"].isna().any():
        raise ResultsError(f"column 'seed' is empty in rows: {_describe_rows(df[df.seed.isna()])}")

    for column, allowed in (
        ("method", METHODS),
        ("split", SPLITS + IGNORED_SPLITS),
        ("metric", METRICS),
        ("data_source", DATA_SOURCES),
    ):
        unknown = sorted(set(df[column]) - set(allowed))
        if unknown:
            raise ResultsError(f"unknown {column} value(s) {unknown}; expected one of {allowed}")

    df = df[~df["split"].isin(IGNORED_SPLITS)].reset_index(drop=True)
    if df.empty:
        raise ResultsError("results table holds no rows on the id/near/mid/far splits")

    values = pd.to_numeric(df["value"], errors="coerce")
    bad = ~np.isfinite(values.to_numpy(dtype=float))
    if bad.any():
        raise ResultsError(
            f"{int(bad.sum())} value(s) are missing, non-numeric or non-finite (NaN/inf): "
            f"{_describe_rows(df[bad])}"
        )
    df["value"] = values.astype(float)

    if require_selected:
        selected = df["selected"]
        if selected.dtype != bool:
            mapped = (
                selected.astype(str)
                .str.strip()
                .str.lower()
                .map({"true": True, "false": False, "1": True, "0": False})
            )
            if mapped.isna().any():
                raise ResultsError(
                    f"column 'selected' must be boolean; got {sorted(set(selected[mapped.isna()].astype(str)))}"
                )
            df["selected"] = mapped.astype(bool)

    ident = ["env", "method", "config", "seed", "split", "metric"]
    dup = df.duplicated(ident, keep=False)
    if dup.any():
        raise ResultsError(f"duplicated measurements: {_describe_rows(df[dup])}")

    if not require_selected:
        n_configs = df.groupby(["env", "method"])["config"].nunique()
        several = n_configs[n_configs > 1]
        if len(several):
            raise ResultsError(
                "a selected-results table holds one configuration per (env, method); several in "
                f"{[f'{e}/{m}' for e, m in several.index]}"
            )
    sources = df.groupby("env")["data_source"].nunique()
    mixed = sources[sources > 1]
    if len(mixed):
        raise ResultsError(f"env(s) {list(mixed.index)} list more than one data_source")
    return df


def load_results(path: str | Path, *, require_selected: bool = False) -> pd.DataFrame:
    """Read and validate a long-format results CSV (see :func:`validate_results`)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"results table not found: {path}")
    frame = pd.read_csv(path, dtype={"env": str, "method": str, "config": str, "split": str})
    return validate_results(frame, require_selected=require_selected)


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
        df: a validated results table (:func:`validate_results`).

    Returns:
        Columns ``env, method, config, split, metric, mean, std, n_seeds``; ``std`` is NaN where a
        single seed leaves it undefined (``ddof=1``).
    """
    grouped = df.groupby(["env", "method", "split", "metric"], sort=False)
    out = grouped["value"].agg(mean="mean", std=lambda v: v.std(ddof=1), n_seeds="count")
    out = out.reset_index()
    configs = df.groupby(["env", "method"], sort=False)["config"].first()
    out["config"] = [configs[(e, m)] for e, m in zip(out["env"], out["method"], strict=True)]
    return out[["env", "method", "config", "split", "metric", "mean", "std", "n_seeds"]]


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
    values = np.asarray(values, dtype=float)
    return sps.rankdata(-values if higher_is_better else values, method="average")


def rank_methods(
    summary: pd.DataFrame, split: str, metric: str, methods: Sequence[str] = RANKED_METHODS
) -> pd.DataFrame:
    """Per-environment ranks of ``methods`` on the seed mean of (split, metric), ``[env, method]``."""
    means = mean_table(summary, split, metric, methods)
    ranks = np.stack([rank_row(row, HIGHER_IS_BETTER[metric]) for row in means.to_numpy()])
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
        method, label = "exact", "exact"
    elif n <= 13:  # scipy enumerates all 2**n sign flips: exact and deterministic
        method, label = "auto", "exact permutation (tied |differences|)"
    else:
        method, label = "asymptotic", "normal approximation (tied |differences|)"
    res = sps.wilcoxon(nonzero, zero_method="wilcox", alternative="two-sided", method=method)
    favours = "pnc" if r_plus > r_minus else "baseline" if r_minus > r_plus else None
    return {
        "n_nonzero": n,
        "statistic": float(res.statistic),
        "r_plus": r_plus,
        "r_minus": r_minus,
        "p": float(res.pvalue),
        "test": label,
        "favours": favours,
    }


def holm(pvalues: Sequence[float], alpha: float = ALPHA) -> tuple[np.ndarray, np.ndarray]:
    """Holm step-down correction (``statsmodels ... multipletests(method="holm")``).

    Returns:
        ``(reject [m] bool, adjusted p [m])``.
    """
    if len(pvalues) == 0:
        return np.zeros(0, bool), np.zeros(0)
    reject, adjusted, _, _ = multipletests(np.asarray(pvalues, float), alpha=alpha, method="holm")
    return reject, adjusted


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
    sign = 1.0 if HIGHER_IS_BETTER[metric] else -1.0
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
        for s in SPLITS
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
            "higher_is_better": HIGHER_IS_BETTER[metric],
        }
        if (split, metric) in HEADLINE and REFERENCE in ranked and len(ranked) > 1:
            out["wilcoxon"][key(split, metric)] = compare_to_reference(
                summary, split, metric, ranked, alpha=alpha
            )
    return _clean(out)


def run(results_csv: str | Path, out_dir: str | Path, *, alpha: float = ALPHA) -> dict[str, Any]:
    """Load ``results_csv``, compute the statistics and write the tables and ``stats.json``."""
    from pnc.report import tables  # local import: tables imports this module

    df = load_results(results_csv)
    result = compute_statistics(df, alpha=alpha)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tables.write_tables(tables.build_tables(df, result), out_dir)
    write_json(out_dir / "stats.json", result)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pnc.report.stats",
        description="Ranks, Wilcoxon-Holm tests and the paper's tables from a long-format results CSV.",
    )
    parser.add_argument(
        "results", help="long-format CSV (env, method, seed, split, metric, value, ...)"
    )
    parser.add_argument("--out", required=True, help="directory for the tables and stats.json")
    parser.add_argument("--alpha", type=float, default=ALPHA, help="Holm family-wise level")
    args = parser.parse_args(argv)
    if not 0.0 < args.alpha < 1.0:
        parser.error(f"--alpha must lie in (0, 1), got {args.alpha}")
    try:
        result = run(args.results, args.out, alpha=args.alpha)
    except (ResultsError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(
        f"{len(result['envs'])} env(s), methods {result['methods']}: tables and stats.json "
        f"written to {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
