"""The mechanism evidence (paper Figures 1 B/C and 3) as statistics and the mechanism table.

Reads the per-(env, seed) mechanism files (:data:`pnc.studies.mujoco.mechanism_columns.MECHANISM_COLUMNS`) and the
``all_configs`` table, and computes per environment (seeds pooled):

- **3B** (:func:`distance_regression`): OLS of the P&C disagreement ``D(x)`` on
  ``log10`` Mahalanobis distance with regime fixed effects (ID the baseline; a seed fixed effect
  too when several seeds are pooled): slope, SE, t, and the pooled Spearman correlation.
- **3C** (:func:`sketch_regression`): OLS of ``log10(D + c)`` on ``log10(sketch + c)`` with the same
  fixed effects (``c`` = :data:`LOG_FLOOR`), for the probe sketch and the analytic sketch; the
  theorem predicts a slope near 1.
- **1B/C** (:func:`magnitude_summary`): per method and split, ``||dh||`` and ``||dy||`` averaged
  over points, median over members, then over seeds; and the Far/ID ratio of ``||dy||/||dh||``.
- **Score** (:func:`score_auroc_rows`): the ID/Far AUROC of the evaluation's total-variance OOD
  score and of its aleatoric and epistemic parts, on the mechanism points.
- **Input** (:func:`distance_row`): how much farther Far's inputs lie from the nearest training
  input than ID's (ratio of the medians).
- **3A** (:func:`frontier_verdicts`): per sigma, P&C against P&C without correction, each at the
  (configuration, calibration) with the lowest seed-mean validation NLL among those at that sigma
  (the study's selection rule restricted to one sigma): seed-mean Far NLL and ID RMSE.

Regressions use statsmodels (ordinary least squares with the classical covariance), Spearman
correlations scipy. :func:`mechanism_table` renders all of it (``results/tables/mechanism``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from pnc.runtime.io import ArtifactError, rebuild_hint
from pnc.runtime.render import (
    Table,
    fmt,
    latex_escape,
    latex_tabular,
    markdown_table,
    write_tables,
)
from pnc.studies.mujoco.grid import config_field, read_tables
from pnc.studies.mujoco.mechanism_columns import (
    DISTANCE_QUANTITY,
    MECHANISM_COLUMNS,
    MECHANISM_METHODS,
)
from pnc.studies.mujoco.per_sigma import per_sigma_choices, sigma_points
from pnc.studies.mujoco.results import (
    METHOD_INFO,
    SPLIT_LABELS,
)
from pnc.studies.mujoco.results_table import load

#: Added to disagreement and sketch before the logarithm of the 3C regression.
LOG_FLOOR = 1e-12
#: Sketches of Figure 3C: quantity -> label.
SKETCHES = {
    "sketch_probe": "probe sketch (J probes, FD)",
    "sketch_analytic": "analytic sketch (Thm 2)",
}

#: Evidence labels of the mechanism table's rows (:func:`mechanism_stats`; read by
#: :mod:`pnc.report.claims`).
EVIDENCE_3A = "3A: Far NLL, P&C - w/o Corr"
EVIDENCE_3B = "3B: D ~ log10 Mahalanobis"
EVIDENCE_3C = {sketch: f"3C: log D ~ log {label}" for sketch, label in SKETCHES.items()}
EVIDENCE_1BC = "1B/C: Far/ID of ||dy||/||dh||"
EVIDENCE_THM3 = "Thm 3: r_eff per-member / shared subset"
#: Far over ID median distance of the inputs to their nearest training input (:func:`distance_row`).
EVIDENCE_DISTANCE = "Input: nearest train row distance, Far/ID"
#: The ID/Far AUROC of the evaluation's OOD score and of each of its parts, on the mechanism
#: points (:func:`score_auroc_rows`): part -> evidence label.
EVIDENCE_SCORE = {
    "total": "Score: Far AUROC, total variance",
    "score_aleatoric": "Score: Far AUROC, aleatoric part",
    "score_epistemic": "Score: Far AUROC, epistemic part",
}


def read_mechanism(paths: Sequence[str | Path]) -> pd.DataFrame:
    """Read and concatenate mechanism files (parquet), checking their columns.

    Raises:
        pnc.runtime.io.ArtifactError: a file is unreadable or has other columns (named, with the command
            that rebuilds it).
    """
    frames = []
    for path in paths:
        try:
            frame = pd.read_parquet(path)
        except Exception as err:  # pyarrow raises several types on a damaged file
            raise ArtifactError(
                f"{path}: cannot read the mechanism table ({type(err).__name__}: {err}); "
                f"{rebuild_hint(path)}"
            ) from err
        if tuple(frame.columns) != MECHANISM_COLUMNS:
            raise ArtifactError(
                f"{path}: columns {list(frame.columns)}, expected {list(MECHANISM_COLUMNS)}; "
                f"{rebuild_hint(path)}"
            )
        frames.append(frame)
    if not frames:
        raise ValueError("no mechanism files given")
    return pd.concat(frames, ignore_index=True)


def points_wide(frame: pd.DataFrame) -> pd.DataFrame:
    """P&C's per-point quantities, one row per (env, seed, split, point), one column each."""
    pts = frame[(frame.member == -1) & (frame.method == "pnc")]
    wide = pts.pivot_table(
        index=["env", "seed", "split", "point"], columns="quantity", values="value", aggfunc="first"
    )
    return wide.reset_index()


# ----------------------------------------------------------------------------- regressions


def _fixed_effects(data: pd.DataFrame) -> str:
    terms = " + C(split, Treatment('id'))" if data["split"].nunique() > 1 else ""
    if data["seed"].nunique() > 1:
        terms += " + C(seed)"
    return terms


def _ols(formula: str, data: pd.DataFrame, term: str) -> dict:
    import statsmodels.formula.api as smf

    fit = smf.ols(formula, data=data).fit()
    return {
        "slope": float(fit.params[term]),
        "se": float(fit.bse[term]),
        "t": float(fit.tvalues[term]),
        "n": int(fit.nobs),
    }


def distance_regression(wide: pd.DataFrame) -> dict:
    """3B: ``D ~ log10(Mahalanobis) + regime FE``; slope, SE, t, n and Spearman(distance, D)."""
    from scipy import stats

    data = wide[["disagreement", DISTANCE_QUANTITY, "split", "seed"]].copy()
    data["log_distance"] = np.log10(data[DISTANCE_QUANTITY])
    out = _ols("disagreement ~ log_distance" + _fixed_effects(data), data, "log_distance")
    out["spearman"] = float(
        stats.spearmanr(data[DISTANCE_QUANTITY], data["disagreement"]).statistic
    )
    return out


def sketch_regression(wide: pd.DataFrame, sketch: str) -> dict:
    """3C: ``log10(D + c) ~ log10(sketch + c) + regime FE``; slope, SE, t, n, Spearman."""
    from scipy import stats

    data = wide[["disagreement", sketch, "split", "seed"]].copy()
    data["log_d"] = np.log10(data["disagreement"] + LOG_FLOOR)
    data["log_s"] = np.log10(data[sketch] + LOG_FLOOR)
    out = _ols("log_d ~ log_s" + _fixed_effects(data), data, "log_s")
    out["spearman"] = float(stats.spearmanr(data[sketch], data["disagreement"]).statistic)
    return out


# ----------------------------------------------------------------------------- the OOD score


def _id_far(wide: pd.DataFrame, columns: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """The ID and the Far points of ``wide`` with every one of ``columns``; None when a column is
    missing (mechanism files that predate it) or either split has no such point."""
    if not set(columns) <= set(wide.columns):
        return None
    data = wide.dropna(subset=list(columns))
    id_rows, far_rows = data[data.split == "id"], data[data.split == "far"]
    return None if id_rows.empty or far_rows.empty else (id_rows, far_rows)


def score_auroc_rows(wide: pd.DataFrame) -> list[dict]:
    """The ID/Far AUROC of the total-variance score and of its aleatoric and epistemic parts.

    ``wide`` holds one environment's P&C points (:func:`points_wide`) with ``score_aleatoric`` and
    ``score_epistemic``; the total is their sum (the evaluation's score). Seeds are pooled. One
    dict per part: ``part, auroc, id_median, far_median, n``. Empty when the points have no ID or
    no Far row, or the mechanism files predate the two quantities.
    """
    from pnc.core.roc import auroc

    split = _id_far(wide, ("score_aleatoric", "score_epistemic"))
    if split is None:
        return []
    id_rows, far_rows = (d.assign(total=d.score_aleatoric + d.score_epistemic) for d in split)
    return [
        {
            "part": part,
            "auroc": auroc(id_rows[part].to_numpy(), far_rows[part].to_numpy()),
            "id_median": float(id_rows[part].median()),
            "far_median": float(far_rows[part].median()),
            "n": len(id_rows) + len(far_rows),
        }
        for part in EVIDENCE_SCORE
    ]


def distance_row(wide: pd.DataFrame) -> dict | None:
    """How far Far lies from the training inputs, against ID: the median ``input_distance`` of
    each and their ratio (``far_over_id``), with ``n`` the points. None when the points have no
    ID or no Far row, or the mechanism files predate the quantity."""
    split = _id_far(wide, ("input_distance",))
    if split is None:
        return None
    id_d, far_d = (d["input_distance"] for d in split)
    return {
        "id_median": float(id_d.median()),
        "far_median": float(far_d.median()),
        "far_over_id": float(far_d.median() / id_d.median()),
        "n": len(id_d) + len(far_d),
    }


# ----------------------------------------------------------------------------- Figure 1 B/C


def magnitude_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """``||dh||``/``||dy||`` per (env, method, split): mean over points (per member, as stored),
    median over members, then median over seeds. Columns ``env, method, split, dh, dy, ratio``
    (``ratio = dy / dh``)."""
    members = frame[(frame.point == -1) & frame.quantity.isin(["dh", "dy"])]
    per_seed = members.groupby(["env", "method", "split", "seed", "quantity"])["value"].median()
    out = per_seed.groupby(["env", "method", "split", "quantity"]).median().unstack("quantity")
    out = out.reset_index()
    out["ratio"] = out["dy"] / out["dh"]
    return out


def far_id_ratios(summary: pd.DataFrame) -> pd.DataFrame:
    """Per (env, method): ``(||dy||/||dh||)_Far / (||dy||/||dh||)_ID`` (Figure 1 B/C)."""
    wide = summary.pivot_table(index=["env", "method"], columns="split", values="ratio")
    wide = wide.reset_index()
    wide["far_over_id"] = wide["far"] / wide["id"]
    return wide[["env", "method", "id", "far", "far_over_id"]]


# ----------------------------------------------------------------------------- Figure 3A


def frontier_verdicts(
    all_configs: pd.DataFrame, env: str, sigmas: Mapping[tuple[str, str], float]
) -> pd.DataFrame:
    """3A per sigma of P&C: P&C and P&C without correction, each chosen by validation NLL among
    its candidates at that sigma (:func:`pnc.studies.mujoco.per_sigma.per_sigma_choices`, the configurations
    the two-phase evaluation scores on the test splits for this); ``verdict`` says which has the
    lower Far NLL and ID RMSE.

    Columns ``env, sigma, pnc_config, pnc_far_nll, pnc_id_rmse, nocorr_config, nocorr_far_nll,
    nocorr_id_rmse, verdict`` (the no-correction columns empty where it was not run at that
    sigma). ``sigmas``: each configuration's sigma from the grid tables
    (:func:`pnc.studies.mujoco.grid.config_field`).

    Raises:
        ValueError: a chosen configuration lacks its ID RMSE or Far NLL (named).
    """
    chosen = sigma_choices(all_configs, env, sigmas)
    rows = []
    for sigma in sorted(chosen.loc[chosen.method == "pnc", "sigma"].unique()):
        at = chosen[chosen.sigma == sigma].set_index("method")
        p = at.loc["pnc"]
        row = {
            "env": env,
            "sigma": sigma,
            "pnc_config": f"{p.config}|{p.calibration}",
            "pnc_far_nll": p.far_nll,
            "pnc_id_rmse": p.id_rmse,
            "nocorr_config": None,
            "nocorr_far_nll": np.nan,
            "nocorr_id_rmse": np.nan,
        }
        if "pnc_nocorr" in at.index:
            q = at.loc["pnc_nocorr"]
            row.update(
                nocorr_config=f"{q.config}|{q.calibration}",
                nocorr_far_nll=q.far_nll,
                nocorr_id_rmse=q.id_rmse,
            )
            far, rmse = p.far_nll < q.far_nll, p.id_rmse < q.id_rmse
            if far and rmse:
                row["verdict"] = "correction better on both"
            elif far or rmse:
                row["verdict"] = (
                    "correction better on " + ("Far NLL" if far else "ID RMSE") + " only"
                )
            else:
                row["verdict"] = "correction worse on both"
        else:
            row["verdict"] = "no P&C w/o Corr at this sigma"
        rows.append(row)
    return pd.DataFrame(rows)


def sigma_choices(
    all_configs: pd.DataFrame, env: str, sigmas: Mapping[tuple[str, str], float]
) -> pd.DataFrame:
    """:func:`pnc.studies.mujoco.per_sigma.per_sigma_choices` of ``env``'s :func:`sigma_points`, each with
    its seed-mean ID RMSE and Far NLL.

    Raises:
        ValueError: a chosen configuration lacks them (the test phase of the two-phase evaluation
            did not score it: a stale table), named with its method, sigma and configuration.
    """
    chosen = per_sigma_choices(sigma_points(all_configs, env, sigmas))
    lacking = chosen[chosen[["id_rmse", "far_nll"]].isna().any(axis=1)]
    if len(lacking):
        named = [
            f"{r.method} sigma {r.sigma:g} {r.config} ({r.calibration})"
            for r in lacking.itertuples()
        ]
        raise ValueError(
            f"{env}: all_configs lacks the ID RMSE or Far NLL of {named}, which Figure 3A and "
            "the mechanism table read (chosen by validation NLL at each sigma; the two-phase "
            "evaluation's test plan scores them): rebuild the environment's results"
        )
    return chosen


# ----------------------------------------------------------------------------- the table


#: Columns of :func:`mechanism_stats`; a table of several seeds has :data:`SEED_COLUMNS` too.
STATS_COLUMNS = ["env", "evidence", "method", "sigma", "estimate", "se", "t", "spearman", "n",
                 "note"]  # fmt: skip
#: ``seed`` (empty on a row over the seeds) and ``seed_sd`` (the estimate's sample standard
#: deviation over the seeds, on those rows).
SEED_COLUMNS = ["seed", "seed_sd"]


def point_evidence(frame: pd.DataFrame, env: str) -> list[dict]:
    """The rows of ``env``'s point evidence (3B, 3C, 1B/C, Thm 3, Input, Score) computed on the
    points of ``frame`` (one seed, or several pooled), as :func:`mechanism_stats` lists them."""
    rows = []
    frame = frame[frame.env == env]
    wide = points_wide(frame)
    summary = far_id_ratios(magnitude_summary(frame))
    base = {"env": env, "method": "pnc", "sigma": np.nan, "note": ""}
    r = distance_regression(wide)
    rows.append({**base, "evidence": EVIDENCE_3B, "estimate": r["slope"],
                 "se": r["se"], "t": r["t"], "spearman": r["spearman"], "n": r["n"]})  # fmt: skip
    for sketch, evidence in EVIDENCE_3C.items():
        r = sketch_regression(wide, sketch)
        rows.append({**base, "evidence": evidence, "estimate": r["slope"],
                     "se": r["se"], "t": r["t"], "spearman": r["spearman"], "n": r["n"]})  # fmt: skip
    ratios = summary[summary.env == env].set_index("method")
    ratios = ratios.loc[[m for m in MECHANISM_METHODS if m in ratios.index]].reset_index()
    for rec in ratios.itertuples():
        rows.append({**base, "method": rec.method, "evidence": EVIDENCE_1BC,
                     "estimate": rec.far_over_id, "se": np.nan, "t": np.nan,
                     "spearman": np.nan, "n": np.nan,
                     "note": f"ID {rec.id:.3g}, Far {rec.far:.3g}"})  # fmt: skip
    if {"rank_mixture", "rank_shared"} <= set(wide.columns):
        boot = wide.dropna(subset=["rank_mixture", "rank_shared"])
        if len(boot):
            gain = boot.rank_mixture / boot.rank_shared
            ratio = boot.rank_predicted / boot.rank_mixture
            rows.append({**base, "evidence": EVIDENCE_THM3,
                         "estimate": float(gain.median()), "se": np.nan, "t": np.nan,
                         "spearman": np.nan, "n": len(boot),
                         "note": (f"median r_eff {boot.rank_mixture.median():.3g} vs "
                                  f"{boot.rank_shared.median():.3g}; > 1 at "
                                  f"{100 * (gain > 1).mean():.0f}% of points; alpha_bar "
                                  f"{boot.alignment.median():.3g}; predicted/measured "
                                  f"{ratio.median():.3g}; trace CV "
                                  f"{boot.trace_cv.median():.2g}")})  # fmt: skip
    r = distance_row(wide)
    if r is not None:
        rows.append({**base, "evidence": EVIDENCE_DISTANCE, "estimate": r["far_over_id"],
                     "se": np.nan, "t": np.nan, "spearman": np.nan, "n": r["n"],
                     "note": f"median ID {r['id_median']:.3g}, Far {r['far_median']:.3g}"})  # fmt: skip
    for r in score_auroc_rows(wide):
        rows.append({**base, "evidence": EVIDENCE_SCORE[r["part"]], "estimate": r["auroc"],
                     "se": np.nan, "t": np.nan, "spearman": np.nan, "n": r["n"],
                     "note": f"median ID {r['id_median']:.3g}, Far {r['far_median']:.3g}"})  # fmt: skip
    return rows


def over_seeds(per_seed: pd.DataFrame) -> pd.DataFrame:
    """One row per (env, evidence, method) of the per-seed rows (a ``seed`` column): the mean over
    the seeds of ``estimate``, ``se``, ``t`` and ``spearman``, ``n`` summed, ``seed_sd`` the sample
    standard deviation of the estimate (``ddof=1``), ``seed`` empty and a note naming the seeds.

    Raises:
        ValueError: an (env, evidence, method) lacks a seed that another has (a mean over
            different seeds would be compared with the others).
    """
    keys = ["env", "evidence", "method"]
    every = sorted(set(per_seed["seed"]))
    out = []
    for key, rows in per_seed.groupby(keys, sort=False):
        seeds = sorted(set(rows["seed"]))
        if seeds != every:
            raise ValueError(f"mechanism evidence {key}: seeds {seeds}, expected {every}")
        n = rows["n"].sum(min_count=len(rows))
        out.append({**dict(zip(keys, key, strict=True)), "sigma": np.nan,
                    "estimate": rows["estimate"].mean(), "se": rows["se"].mean(),
                    "t": rows["t"].mean(), "spearman": rows["spearman"].mean(), "n": n,
                    "note": f"mean over {len(seeds)} seeds ({seeds[0]}-{seeds[-1]})",
                    "seed": np.nan, "seed_sd": rows["estimate"].std(ddof=1)})  # fmt: skip
    return pd.DataFrame(out, columns=STATS_COLUMNS + SEED_COLUMNS)


def mechanism_stats(
    frame: pd.DataFrame, all_configs: pd.DataFrame, sigmas: Mapping[tuple[str, str], float]
) -> pd.DataFrame:
    """Every number of the mechanism table, long: ``env, evidence, method, sigma, estimate, se,
    t, spearman, n, note``.

    With one seed in ``frame`` the point evidence is computed on its points. With several, it is
    computed on each seed's points (rows with a ``seed``) and summarised over them
    (:func:`over_seeds`: the mean, and ``seed_sd``, the spread); the summary rows come first.
    3A is computed from ``all_configs``' seed means in either case (``seed`` empty), each
    configuration's sigma read from ``sigmas`` (:func:`pnc.studies.mujoco.grid.config_field`).
    """
    seeds = sorted(frame.seed.unique())
    rows = []
    for env in sorted(frame.env.unique()):
        if len(seeds) > 1:
            per_seed = pd.DataFrame(
                [
                    {**r, "seed": s}
                    for s in seeds
                    for r in point_evidence(frame[frame.seed == s], env)
                ]
            )
            rows += over_seeds(per_seed).to_dict("records")
        else:
            per_seed = None
            rows += point_evidence(frame, env)
        base = {"env": env, "method": "pnc", "note": ""}
        for rec in frontier_verdicts(all_configs, env, sigmas).itertuples():
            note = rec.verdict
            if pd.notna(rec.nocorr_config):
                note += (f" (Far NLL {rec.pnc_far_nll:.3g} vs {rec.nocorr_far_nll:.3g}; "
                         f"ID RMSE {rec.pnc_id_rmse:.3g} vs {rec.nocorr_id_rmse:.3g})")  # fmt: skip
            rows.append({**base, "sigma": rec.sigma, "evidence": EVIDENCE_3A,
                         "estimate": rec.pnc_far_nll - rec.nocorr_far_nll, "se": np.nan,
                         "t": np.nan, "spearman": np.nan, "n": np.nan, "note": note})  # fmt: skip
        if per_seed is not None:
            rows += per_seed.assign(seed_sd=np.nan).to_dict("records")
    columns = STATS_COLUMNS + (SEED_COLUMNS if len(seeds) > 1 else [])
    return pd.DataFrame(rows, columns=columns)


def _cell(value: float, latex: bool) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return ""
    minus = "$-$" if latex else "−"
    if abs(value) >= 1000 or (0 < abs(value) < 1e-3):
        text = f"{value:.2e}"
        return text.replace("-", minus, 1) if text.startswith("-") else text
    return fmt(value, 3, minus)


def mechanism_table(stats: pd.DataFrame) -> Table:
    """The mechanism table (``results/tables/mechanism.{tex,md,csv}``) from :func:`mechanism_stats`.

    With several seeds (a ``seed`` column) the CSV holds every row, the Markdown and LaTeX tables
    the rows over the seeds with the standard deviation over them beside the estimate.
    """
    several = "seed" in stats.columns
    scope = (
        "each point evidence computed on every seed of the mechanism stage, then its mean over "
        "the seeds (SD over seeds: the estimates' sample standard deviation; every seed's rows "
        "are in the CSV)"
        if several
        else "seeds in the mechanism stage pooled"
    )
    caption = (
        f"Mechanism evidence per environment ({scope}). 3B: OLS slope "
        "of the P&C disagreement D(x) on log10 Mahalanobis distance (second hidden layer, ID "
        "train statistics) with regime fixed effects (ID baseline). 3C: log-log OLS slope of D "
        "on the probe and analytic sketches of the corrected sensitivity with regime fixed "
        "effects (theory: 1). SE: classical OLS standard error; t = slope / SE; Spearman pooled "
        "over regimes. 1B/C: (||dy||/||dh||) on Far over that on ID (mean over points, median "
        "over members, then seeds; > 1: the output change re-emerges under shift relative to "
        "the hidden change). 3A: Far NLL of P&C minus that of P&C w/o Corr at equal sigma, each "
        "chosen by validation NLL among its configurations at that sigma (negative: the "
        "correction lowers Far NLL); the note gives both ID RMSEs. Thm 3: median over points "
        "(all regimes) of the effective rank of the first-order output covariance of members "
        "corrected on their own bootstrap subsets (the mixture) over that of one subset shared "
        "by all members (theory: > 1 when the members' covariances are not aligned, alpha_bar "
        "< 1); the note gives both ranks, the median alignment alpha_bar, the theorem's "
        "prediction over the measured mixture rank (1 when every member's covariance has the "
        "same trace and norm) and the coefficient of variation of the traces. Score: AUROC of ID "
        "against Far on the mechanism points of the evaluation's OOD score (the total predictive "
        "variance of the P&C members, original units, mean over dimensions) and of its two "
        "parts, the members' mean variance (aleatoric) and the variance of their means "
        "(epistemic); the note gives each part's median on ID and on Far. Input: the median "
        "Euclidean distance of the Far points' standardised inputs to the nearest ID train input "
        "over that of the ID points (the note gives both)."
    )
    header = ["Environment", "Evidence", "Method", "σ", "Estimate", "SE", "t", "Spearman", "n",
              "Note"]  # fmt: skip
    if several:
        header.insert(5, "SD over seeds")
    shown = stats[stats["seed"].isna()] if several else stats
    md_rows, tex_rows = [], []
    for rec in shown.itertuples():
        label = METHOD_INFO[rec.method].label if rec.method in METHOD_INFO else rec.method
        cells = [rec.env, rec.evidence, label, "" if np.isnan(rec.sigma) else f"{rec.sigma:g}"]
        n = "" if not np.isfinite(rec.n) else str(int(rec.n))
        nums = [rec.estimate, *([rec.seed_sd] if several else []), rec.se, rec.t, rec.spearman]
        md_rows.append(cells + [_cell(v, False) for v in nums] + [n, rec.note])
        tex_rows.append(
            [latex_escape(c) for c in cells]
            + [_cell(v, True) for v in nums]
            + [n, latex_escape(rec.note)]
        )
    latex = latex_tabular(
        caption,
        "tab:mechanism",
        "lllrrrrrrrp{5cm}" if several else "lllrrrrrrp{5cm}",
        [" & ".join(latex_escape(h) for h in header) + r" \\"],
        tex_rows,
        size=r"\scriptsize",
    )
    return Table("mechanism", caption, stats, latex, markdown_table(caption, header, md_rows))


def write_mechanism_table(
    mechanism_paths: Sequence[str | Path],
    all_configs_path: str | Path,
    out_dir: str | Path,
    grid_tables: Sequence[str | Path],
) -> pd.DataFrame:
    """Write ``OUT_DIR/mechanism.{tex,md,csv}``; returns the statistics. ``grid_tables``: the
    grid tables of P&C and its ablation (``results/grid/{method}.json``), which give each
    configuration's sigma."""
    frame = read_mechanism(mechanism_paths)
    all_configs = load(all_configs_path, require_selected=True, drop_selection_split=False)
    stats = mechanism_stats(frame, all_configs, config_field(read_tables(grid_tables), "sigma"))
    write_tables([mechanism_table(stats)], out_dir)
    return stats


def split_label(split: str) -> str:
    return SPLIT_LABELS.get(split, split)


__all__ = [
    "LOG_FLOOR",
    "MECHANISM_METHODS",
    "SKETCHES",
    "distance_row",
    "distance_regression",
    "far_id_ratios",
    "frontier_verdicts",
    "magnitude_summary",
    "mechanism_stats",
    "mechanism_table",
    "over_seeds",
    "point_evidence",
    "points_wide",
    "read_mechanism",
    "score_auroc_rows",
    "sigma_choices",
    "sigma_points",
    "sketch_regression",
    "split_label",
    "write_mechanism_table",
]
