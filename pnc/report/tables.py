"""The paper's MuJoCo tables, each as LaTeX (booktabs), Markdown and CSV of the same numbers.

Five :class:`pnc.runtime.render.Table` objects are built from a validated results table
(:func:`pnc.studies.mujoco.results_table.validate`) and the statistics of
:func:`pnc.report.stats.compute_statistics`; :func:`pnc.runtime.render.write_tables` writes them:

- ``cross_env`` (paper Table 1): mean rank +- standard deviation and wins per headline metric
  (ID RMSE, Far NLL, Far AUROC, Far Spearman), best mean rank in bold, Wilcoxon-Holm arrows;
- ``wilcoxon``: the tests behind the arrows, raw and Holm-adjusted p-values;
- ``hparams`` (Appendix Table 3): the selected configuration per (env, method), marked ``+ vcal``
  where its variance-calibrated variant was selected;
- ``per_env`` (Appendix Table 4): mean +- std over seeds of ID RMSE, Far NLL, Far AUROC;
- ``spearman`` (Appendix Table 5): Spearman per split, negatives in italics, ``--`` where an
  environment has no such split.

Bold marks the best seed mean among the six ranked methods (every exactly tied best is bold). Where
a single seed leaves the standard deviation undefined, only the mean is printed (and the caption
says so). Method, split and metric labels and the metric definitions in the captions come from
:mod:`pnc.studies.mujoco.results`. The LaTeX needs ``\\usepackage{booktabs,longtable}``.
:func:`write_tables_and_stats` goes from a results CSV to the written tables and ``stats.json``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from pnc.report import stats as st
from pnc.runtime.io import write_json
from pnc.runtime.render import (
    ARROW,
    LATEX_ARROW,
    Table,
    best_mask,
    decimals_for,
    latex_escape,
    latex_longtable,
    latex_tabular,
    markdown_table,
    mean_std_cell,
    write_tables,
)
from pnc.studies.mujoco.results import (
    ABLATION_METHODS,
    BOUNDED_METRICS,
    CALIBRATION_INFO,
    HEADLINE,
    HPARAM_ABBREVIATIONS,
    HPARAM_LEGEND,
    METHOD_INFO,
    METRIC_INFO,
    RANKED_METHODS,
    RAW,
    REPORTED_SPLITS,
    SPLIT_LABELS,
)
from pnc.studies.mujoco.results_table import load

#: Metrics whose definition a caption prints.
DEFINED_IN_CAPTIONS: tuple[str, ...] = ("rmse", "nll", "auroc", "spearman")
PER_ENV_COLUMNS: tuple[tuple[str, str], ...] = (("id", "rmse"), ("far", "nll"), ("far", "auroc"))
SINGLE_SEED_NOTE = (
    "Where an environment has a single seed the standard deviation is undefined and only the "
    "mean is shown."
)


# --------------------------------------------------------------------------------------------
# Labels and captions
# --------------------------------------------------------------------------------------------


def column_label(split: str, metric: str) -> str:
    """E.g. ``Far NLL ↓``."""
    return f"{SPLIT_LABELS[split]} {METRIC_INFO[metric].label} {METRIC_INFO[metric].arrow}"


def column_id(split: str, metric: str) -> str:
    return f"{split}_{metric}"


def describe_study(df: pd.DataFrame) -> str:
    """E.g. ``"2 MuJoCo environments (offline behaviour datasets), 3 seeds per environment"``."""
    envs = st.env_order(df)
    sources = df.groupby("env")["data_source"].first()
    names = {
        "minari": "Minari MuJoCo datasets",
        "offline": "offline behaviour datasets",
        "unspecified": "data source not recorded",
    }
    used = list(dict.fromkeys(sources.reindex(envs)))
    if len(used) == 1:
        source = names[used[0]]
    else:
        source = "; ".join(
            f"{names[s]}: {', '.join(e for e in envs if sources[e] == s)}" for s in used
        )
    seeds = df.groupby("env")["seed"].nunique()
    lo, hi = int(seeds.min()), int(seeds.max())
    seed_text = f"{lo} seed{'s' if lo != 1 else ''}" if lo == hi else f"{lo}-{hi} seeds"
    n = len(envs)
    return f"{n} MuJoCo environment{'s' if n != 1 else ''} ({source}), {seed_text} per environment"


def metric_definitions(metrics: Sequence[str]) -> str:
    """The definitions of ``metrics`` (those in :data:`DEFINED_IN_CAPTIONS`), in order."""
    return " ".join(
        METRIC_INFO[m].definition for m in dict.fromkeys(metrics) if m in DEFINED_IN_CAPTIONS
    )


def _has_single_seed(summary: pd.DataFrame) -> bool:
    return bool((summary["n_seeds"] < 2).any())


# --------------------------------------------------------------------------------------------
# Table 1: cross-environment summary
# --------------------------------------------------------------------------------------------


def _significance_notes(stats: dict[str, Any], pairs: Sequence[tuple[str, str]]) -> list[str]:
    notes = []
    tested = [stats["wilcoxon"].get(st.key(s, m)) for s, m in pairs]
    if not any(tested):
        return ["P&C or every baseline is absent, so no Wilcoxon-Holm comparisons are made."]
    unattainable = {
        (t["n_envs"], t["n_comparisons"]) for t in tested if t and not t["significance_attainable"]
    }
    for n_envs, n_comp in sorted(unattainable):
        notes.append(st.significance_note(n_envs, n_comp, stats["alpha"]))
    return notes


def _unranked_note(df: pd.DataFrame) -> str:
    """Names the unranked methods present (the ablation, the Deep Ensemble's second reading)."""
    unranked = st.methods_present(df, ABLATION_METHODS)
    if not unranked:
        return ""
    return f"Not ranked: {', '.join(METHOD_INFO[m].label for m in unranked)}. "


def _substitution_note(stats: dict[str, Any]) -> str:
    """Names the methods whose rows show another method's values (``--substitute``)."""
    subs = stats.get("substitutions") or {}
    return "".join(
        f"{METHOD_INFO[target].label}: the values of {METHOD_INFO[source].label}. "
        for target, source in subs.items()
    )


def cross_env_table(df: pd.DataFrame, stats: dict[str, Any]) -> Table:
    """Paper Table 1: mean rank +- std and wins of the six methods per headline metric."""
    pairs = [(s, m) for s, m in HEADLINE if st.key(s, m) in stats["ranks"]]
    methods = stats["ranked_methods"]
    caption = (
        f"Cross-environment summary across {describe_study(df)}. Entries report mean rank ± "
        "standard deviation across environments (ranks within each environment on the seed mean, "
        "1 = best, ties share the average rank) and win counts (environments where the method "
        f"ranks best; {st.TIE_RULE}). Lower rank is better; the best mean rank is in bold. Header "
        "arrows give the preferred direction of the underlying metric; superscript arrows give "
        "two-sided Wilcoxon signed-rank tests over environments on the per-environment means "
        f"against P&C, Holm-corrected across the baselines at alpha = {stats['alpha']:g}: ↑ means "
        "P&C is significantly better than the baseline, ↓ the reverse (p-values in the Wilcoxon "
        "table). "
        + _unranked_note(df)
        + _substitution_note(stats)
        + metric_definitions([m for _, m in pairs])
    )
    notes = _significance_notes(stats, pairs)
    caption = " ".join([caption, *notes])

    records: list[dict[str, Any]] = []
    md_rows: list[list[str]] = []
    tex_rows: list[list[str]] = []
    best_rank = {
        st.key(s, m): min(stats["ranks"][st.key(s, m)]["mean_rank"].values()) for s, m in pairs
    }
    for method in methods:
        rec: dict[str, Any] = {"method": method, "label": METHOD_INFO[method].label}
        md_row, tex_row = [METHOD_INFO[method].label], [latex_escape(METHOD_INFO[method].label)]
        for split, metric in pairs:
            k, cid = st.key(split, metric), column_id(split, metric)
            r = stats["ranks"][k]
            mean_rank = r["mean_rank"][method]
            std = r["rank_std"][method]
            std = float("nan") if std is None else std
            wins, n_envs = r["wins"][method], r["n_envs"]
            test = stats["wilcoxon"].get(k, {}).get("tests", {}).get(method)
            arrow = test["arrow"] if test else None
            bold = mean_rank == best_rank[k]
            rec |= {
                f"{cid}_mean_rank": mean_rank,
                f"{cid}_rank_std": std,
                f"{cid}_wins": wins,
                f"{cid}_n_envs": n_envs,
                f"{cid}_best": bold,
                f"{cid}_p": test["p"] if test else None,
                f"{cid}_p_holm": test["p_holm"] if test else None,
                f"{cid}_arrow": arrow,
            }
            md_row += [
                mean_std_cell(mean_rank, std, 2, latex=False, bold=bold)
                + (ARROW[arrow] if arrow else ""),
                f"{wins} / {n_envs}",
            ]
            tex_row += [
                mean_std_cell(
                    mean_rank,
                    std,
                    2,
                    latex=True,
                    bold=bold,
                    superscript=LATEX_ARROW[arrow] if arrow else "",
                ),
                f"{wins} / {n_envs}",
            ]
        records.append(rec)
        md_rows.append(md_row)
        tex_rows.append(tex_row)

    tex_header = [
        "Method & "
        + " & ".join(
            f"\\multicolumn{{2}}{{c}}{{{latex_escape(column_label(s, m))}}}" for s, m in pairs
        )
        + r" \\",
        " & " + " & ".join(["mean rank & wins"] * len(pairs)) + r" \\",
    ]
    md_header = ["Method"]
    for s, m in pairs:
        md_header += [f"{column_label(s, m)} mean rank", f"{column_label(s, m)} wins"]
    return Table(
        name="cross_env",
        caption=caption,
        data=pd.DataFrame.from_records(records),
        latex=latex_tabular(
            caption, "tab:mujoco-cross-env", "l" + "rr" * len(pairs), tex_header, tex_rows
        ),
        markdown=markdown_table(caption, md_header, md_rows),
    )


def wilcoxon_table(df: pd.DataFrame, stats: dict[str, Any]) -> Table:
    """The Wilcoxon signed-rank tests of P&C against each baseline, with Holm-adjusted p-values."""
    pairs = [(s, m) for s, m in HEADLINE if st.key(s, m) in stats["wilcoxon"]]
    caption = (
        f"P&C against each baseline across {describe_study(df)}: two-sided Wilcoxon signed-rank "
        "tests over environments on the per-environment seed means (zero differences dropped), "
        f"Holm-corrected across the baselines within each metric at alpha = {stats['alpha']:g}. "
        "R+ (R-) is the signed-rank sum of environments where P&C (the baseline) is better. "
        + metric_definitions([m for _, m in pairs])
        + " "
        + " ".join(_significance_notes(stats, pairs))
    )
    records, rows = [], []
    for split, metric in pairs:
        w = stats["wilcoxon"][st.key(split, metric)]
        for baseline, t in w["tests"].items():
            verdict = (
                f"P&C better {ARROW['up']}"
                if t["arrow"] == "up"
                else f"baseline better {ARROW['down']}"
                if t["arrow"] == "down"
                else "not significant"
            )
            records.append(
                {
                    "split": split,
                    "metric": metric,
                    "baseline": baseline,
                    "n_envs": w["n_envs"],
                    "n_nonzero": t["n_nonzero"],
                    "r_plus": t["r_plus"],
                    "r_minus": t["r_minus"],
                    "statistic": t["statistic"],
                    "p": t["p"],
                    "p_holm": t["p_holm"],
                    "significant": t["significant"],
                    "arrow": t["arrow"],
                    "test": t["test"],
                }
            )
            rows.append(
                [
                    column_label(split, metric),
                    METHOD_INFO[baseline].label,
                    str(w["n_envs"]),
                    f"{t['r_plus']:g}",
                    f"{t['r_minus']:g}",
                    f"{t['p']:.4f}",
                    f"{t['p_holm']:.4f}",
                    verdict,
                ]
            )
    header = ["Metric", "Baseline", "Envs", "R+", "R-", "p", "p (Holm)", "Result"]
    return Table(
        name="wilcoxon",
        caption=caption,
        data=pd.DataFrame.from_records(records, columns=list(records[0]) if records else None),
        latex=latex_tabular(
            caption,
            "tab:mujoco-wilcoxon",
            "llrrrrrl",
            [" & ".join(latex_escape(h) for h in header) + r" \\"],
            [[latex_escape(c) for c in r] for r in rows],
        ),
        markdown=markdown_table(caption, header, rows),
    )


# --------------------------------------------------------------------------------------------
# Table 3: selected hyperparameters
# --------------------------------------------------------------------------------------------


def _hparam_names() -> re.Pattern:
    """A hyperparameter name with an abbreviation, where a configuration id names it."""
    names = sorted(HPARAM_ABBREVIATIONS, key=len, reverse=True)
    return re.compile(r"(^|,)(" + "|".join(map(re.escape, names)) + ")=")


def abbreviate_config(config: str) -> str:
    """The hparams cell of a ``config`` label, for display only (nothing is read from it):
    ``"sigma=16,bootstrap_frac=0.1,ridge=0.0001"`` -> ``"ps=16, bf=0.1, lreg=0.0001"`` (the names
    :data:`~pnc.studies.mujoco.results.HPARAM_ABBREVIATIONS` knows abbreviated); any other label, e.g.
    ``"default"`` or a user's ``"selected"``, as given."""
    text = _hparam_names().sub(lambda m: f"{m[1]}{HPARAM_ABBREVIATIONS[m[2]]}=", str(config))
    if not text:
        return "default"  # an empty label: the default configuration
    return text.replace(",", ", ")


#: The form of a configuration id (``name=value`` items joined by commas), or ``default``.
_CONFIG_ID = re.compile(r"default|\w+=[^,=]*(,\w+=[^,=]*)*")


def free_labels(configs: Iterable[str]) -> list[str]:
    """The ``config`` labels that are not configuration ids (e.g. a user's ``"selected"``): the
    hparams table shows them as given and its caption names them."""
    return sorted({str(c) for c in configs if not _CONFIG_ID.fullmatch(str(c))})


def abbreviations_used(configs: Iterable[str]) -> set[str]:
    """The abbreviations :func:`abbreviate_config` writes for ``configs`` (the caption's legend)."""
    pattern = _hparam_names()
    return {HPARAM_ABBREVIATIONS[m[2]] for c in configs for m in pattern.finditer(str(c))}


def selected_cell(config: str, calibration: str = RAW) -> str:
    """The hparams cell of a selected pair: ``"ps=16, bf=0.1, lreg=0.0001 + vcal"``."""
    label = CALIBRATION_INFO[calibration].label
    return abbreviate_config(config) + (f" {label}" if label else "")


def hparams_table(df: pd.DataFrame) -> Table:
    """Appendix Table 3: the selected (configuration, calibration) pair per (env, method).

    Cells show the abbreviated configuration, followed by the calibration label (``+ vcal``) where
    the variance-calibrated variant was selected. The CSV has one column per method with the
    configuration id and one ``{method}_calibration`` column per method.
    """
    methods = st.methods_present(df)
    envs = st.env_order(df)
    chosen = df.groupby(["env", "method"])[["config", "calibration"]].first()
    configs, calibrations = chosen["config"], chosen["calibration"]
    used = abbreviations_used(configs)
    free = free_labels(configs)  # named in the caption, shown as given
    legend = HPARAM_LEGEND
    marked = [c for c in CALIBRATION_INFO if c != RAW and c in set(calibrations)]
    caption = (
        f"Selected hyperparameter configuration per (env, method) across {describe_study(df)}, "
        "chosen by the lowest mean validation NLL across seeds (NLL as in the per-environment "
        "table, on the held-out validation slice of the training data). "
        + "; ".join(f"{a}: {legend[a]}" for a in legend if a in used)
        + ("." if used else "")
        + " 'default': the method has no tuned hyperparameters."
        + "".join(
            f" {CALIBRATION_INFO[c].description} Each configuration competed with and without "
            "it; the label marks where the calibrated variant was selected."
            for c in marked
        )
        + (
            f" Labels that are not configuration ids are shown as given: {', '.join(free)}."
            if free
            else ""
        )  # fmt: skip
    )
    data = pd.DataFrame(
        [
            {"env": e}
            | {m: configs.get((e, m), "") for m in methods}
            | {f"{m}_calibration": calibrations.get((e, m), "") for m in methods}
            for e in envs
        ]
    )
    header = ["Env"] + [METHOD_INFO[m].short for m in methods]
    rows = [
        [e]
        + [
            selected_cell(configs[(e, m)], calibrations[(e, m)]) if (e, m) in configs else "--"
            for m in methods
        ]
        for e in envs
    ]
    return Table(
        name="hparams",
        caption=caption,
        data=data,
        latex=latex_tabular(
            caption,
            "tab:mujoco-selected-hparams",
            "l" * len(header),
            [" & ".join(latex_escape(h) for h in header) + r" \\"],
            [[latex_escape(c) for c in r] for r in rows],
            size=r"\scriptsize",
        ),
        markdown=markdown_table(caption, header, rows),
    )


# --------------------------------------------------------------------------------------------
# Tables 4 and 5: per-environment metrics, Spearman per split
# --------------------------------------------------------------------------------------------


def _grouped(
    df: pd.DataFrame,
    summary: pd.DataFrame,
    pairs: Sequence[tuple[str, str]],
    *,
    decimals: int | None,
    italic_negative: bool,
) -> tuple[list[dict[str, Any]], list[tuple[str, list[list[str]]]], list[list[str]]]:
    """Rows grouped by environment: CSV records, LaTeX groups and Markdown rows."""
    methods = st.methods_present(df, RANKED_METHODS)
    seeds = df.groupby("env")["seed"].nunique()
    indexed = summary.set_index(["env", "method", "split", "metric"])
    records, groups, md_rows = [], [], []
    for env in st.env_order(df):
        cells: dict[tuple[str, str], pd.DataFrame] = {}
        for split, metric in pairs:
            try:
                cells[(split, metric)] = indexed.loc[
                    (env, slice(None), split, metric), :
                ].droplevel([0, 2, 3])
            except KeyError:
                continue
        bold = {
            sm: best_mask(c["mean"].reindex(methods).dropna(), METRIC_INFO[sm[1]].higher_is_better)
            for sm, c in cells.items()
        }
        tex_rows = []
        for method in methods:
            rec: dict[str, Any] = {"env": env, "method": method}
            tex_row, md_row = (
                [latex_escape(METHOD_INFO[method].label)],
                [env, METHOD_INFO[method].label],
            )
            for split, metric in pairs:
                cid = column_id(split, metric)
                c = cells.get((split, metric))
                if c is None or method not in c.index:
                    rec |= {f"{cid}_mean": None, f"{cid}_std": None, f"{cid}_best": False}
                    tex_row.append("--")
                    md_row.append("--")
                    continue
                mean, std = float(c.loc[method, "mean"]), float(c.loc[method, "std"])
                is_best = bool(bold[(split, metric)].get(method, False))
                italic = italic_negative and mean < 0
                if decimals is not None:
                    dec = decimals
                elif metric in BOUNDED_METRICS:
                    dec = 3
                else:
                    dec = decimals_for(mean)
                rec |= {
                    f"{cid}_mean": mean,
                    f"{cid}_std": std,
                    f"{cid}_n_seeds": int(c.loc[method, "n_seeds"]),
                    f"{cid}_best": is_best,
                }
                tex_row.append(
                    mean_std_cell(mean, std, dec, latex=True, bold=is_best, italic=italic)
                )
                md_row.append(
                    mean_std_cell(mean, std, dec, latex=False, bold=is_best, italic=italic)
                )
            records.append(rec)
            tex_rows.append(tex_row)
            md_rows.append(md_row)
        n = int(seeds[env])
        title = f"\\textit{{{latex_escape(env)}}} ($n={n}$ seed{'s' if n != 1 else ''})"
        groups.append((title, tex_rows))
    return records, groups, md_rows


def per_env_table(
    df: pd.DataFrame, summary: pd.DataFrame, pairs: Sequence[tuple[str, str]] = PER_ENV_COLUMNS
) -> Table:
    """Appendix Table 4: per-environment mean +- std over seeds, best per column in bold."""
    caption = (
        f"Per-environment headline metrics across {describe_study(df)}. Cells report mean ± "
        "standard deviation across seeds for the validation-NLL-selected configuration. Header "
        "arrows indicate the preferred direction. Within each environment, the best value(s) in "
        "each metric column are shown in bold. "
        + metric_definitions([m for _, m in pairs])
        + (" " + SINGLE_SEED_NOTE if _has_single_seed(summary) else "")
    )
    records, groups, md_rows = _grouped(df, summary, pairs, decimals=None, italic_negative=False)
    labels = [column_label(s, m) for s, m in pairs]
    header = "Method & " + " & ".join(latex_escape(lab) for lab in labels) + r" \\"
    return Table(
        name="per_env",
        caption=caption,
        data=pd.DataFrame.from_records(records),
        latex=latex_longtable(
            caption, "tab:mujoco-per-env", "l" + "r" * len(pairs), header, groups
        ),
        markdown=markdown_table(caption, ["Env", "Method", *labels], md_rows),
    )


def spearman_table(df: pd.DataFrame, summary: pd.DataFrame) -> Table:
    """Appendix Table 5: Spearman per split, best in bold, negatives in italics, ``--`` if absent."""
    pairs = [(s, "spearman") for s in REPORTED_SPLITS]
    caption = (
        f"Spearman rank correlation between predicted variance and squared error across "
        f"{describe_study(df)}, computed per seed and reported as mean ± standard deviation "
        "across seeds. Header arrows indicate that higher is better. Within each environment, "
        "the best value(s) in each split column are shown in bold. Negative correlations are "
        "italicised to indicate anti-informative uncertainty signals; '--' marks a split the "
        "environment does not have. "
        + METRIC_INFO["spearman"].definition
        + (" " + SINGLE_SEED_NOTE if _has_single_seed(summary) else "")
    )
    records, groups, md_rows = _grouped(df, summary, pairs, decimals=2, italic_negative=True)
    labels = [f"{SPLIT_LABELS[s]} ↑" for s, _ in pairs]
    header = "Method & " + " & ".join(latex_escape(lab) for lab in labels) + r" \\"
    return Table(
        name="spearman",
        caption=caption,
        data=pd.DataFrame.from_records(records),
        latex=latex_longtable(
            caption, "tab:mujoco-spearman", "l@{\\hskip 1.5em}rrrr", header, groups
        ),
        markdown=markdown_table(caption, ["Env", "Method", *labels], md_rows),
    )


# --------------------------------------------------------------------------------------------
# All tables
# --------------------------------------------------------------------------------------------


def build_tables(df: pd.DataFrame, stats: dict[str, Any]) -> list[Table]:
    """All five tables from a validated results table and its statistics."""
    summary = st.summarise(df)
    return [
        cross_env_table(df, stats),
        wilcoxon_table(df, stats),
        hparams_table(df),
        per_env_table(df, summary),
        spearman_table(df, summary),
    ]


TABLE_NAMES: tuple[str, ...] = ("cross_env", "wilcoxon", "hparams", "per_env", "spearman")


def write_tables_and_stats(
    results_csv: str | Path,
    out_dir: str | Path,
    *,
    alpha: float = st.ALPHA,
    substitutions: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Load ``results_csv``, compute the statistics and write the tables and ``stats.json``.

    ``substitutions`` (``{target: source}``) shows ``source``'s rows under ``target``
    (:func:`pnc.report.stats.substitute_methods`); they are recorded in ``stats.json`` and named
    in the captions.
    """
    df = load(results_csv)
    if substitutions:
        df = st.substitute_methods(df, substitutions)
    result = st.compute_statistics(df, alpha=alpha)
    if substitutions:
        result["substitutions"] = dict(substitutions)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_tables(build_tables(df, result), out_dir)
    write_json(out_dir / "stats.json", result)
    return result
