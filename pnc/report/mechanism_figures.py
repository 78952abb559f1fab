"""The mechanism figures of one environment (paper Figures 1 B/C and 3), PDF and PNG.

- :func:`magnitudes_figure` (1 B/C): bars of ``||dh||`` (first hidden layer) and ``||dy||``
  (predicted mean) on ID and Far per method, mean over points, median over members, then seeds.
- :func:`frontier_sigma_figure` (3 A): ID RMSE against Far NLL of P&C and P&C without correction
  at every configuration (seed means, each in its calibration variant with the lower validation
  NLL), labelled by sigma.
- :func:`distance_figure` (3 B): P&C disagreement against Mahalanobis distance, coloured by regime.
- :func:`sketch_figure` (3 C): disagreement against the probe and the analytic sketch, log-log, with
  the pooled least-squares line and the identity.

The statistics in the annotations come from :mod:`pnc.report.mechanism_table`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from pnc.report.figures import METHOD_STYLE, RC_PARAMS, save
from pnc.report.mechanism_table import (
    LOG_FLOOR,
    SKETCHES,
    distance_regression,
    magnitude_summary,
    points_wide,
    read_mechanism,
    sigma_choices,
    sigma_points,
    sketch_regression,
    split_label,
)
from pnc.studies.mujoco.grid import config_field, read_tables
from pnc.studies.mujoco.mechanism_columns import (
    DISTANCE_QUANTITY,
    MECHANISM_METHODS,
    MECHANISM_SPLITS,
)
from pnc.studies.mujoco.results import METHOD_INFO
from pnc.studies.mujoco.results_table import load

#: The figures of one environment: file stem -> what it shows.
MECHANISM_FIGURES = ("magnitudes", "frontier_sigma", "distance", "sketch")

#: Regime colours (Okabe-Ito), ID to Far.
REGIME_COLOR = {"id": "#0072B2", "near": "#009E73", "mid": "#E69F00", "far": "#D55E00"}


def _env_rows(frame: pd.DataFrame, env: str) -> pd.DataFrame:
    rows = frame[frame.env == env]
    if rows.empty:
        raise ValueError(f"no mechanism rows for {env}; environments: {sorted(frame.env.unique())}")
    return rows


def magnitudes_figure(frame: pd.DataFrame, env: str):
    """Figure 1 B/C for ``env``: two panels of grouped bars (ID, Far) per method, log scale."""
    summary = magnitude_summary(_env_rows(frame, env))
    methods = [m for m in MECHANISM_METHODS if m in set(summary.method)]
    with plt.rc_context(RC_PARAMS):
        fig, axes = plt.subplots(1, 2, figsize=(8.0, 3.0))
        width = 0.38
        for ax, (quantity, title) in zip(
            axes,
            (("dh", "(B) hidden change ||dh||"), ("dy", "(C) output change ||dy||")),
            strict=True,
        ):
            for j, split in enumerate(("id", "far")):
                values = [
                    float(summary.loc[(summary.method == m) & (summary.split == split), quantity]
                          .squeeze()) for m in methods
                ]  # fmt: skip
                xs = np.arange(len(methods)) + (j - 0.5) * width
                ax.bar(
                    xs, values, width,
                    color=[METHOD_STYLE[m]["color"] for m in methods],
                    alpha=0.55 if split == "id" else 1.0,
                    hatch="" if split == "id" else "//",
                    edgecolor="black", linewidth=0.4,
                )  # fmt: skip
            ax.set_xticks(np.arange(len(methods)))
            ax.set_xticklabels([METHOD_INFO[m].short for m in methods], rotation=30, ha="right")
            ax.set_yscale("log")
            ax.set_title(title)
        handles = [
            Patch(facecolor="lightgrey", alpha=0.55, edgecolor="black", label=split_label("id")),
            Patch(facecolor="grey", hatch="//", edgecolor="black", label=split_label("far")),
        ]
        axes[0].legend(handles=handles, frameon=False)
        fig.suptitle(f"{env}: perturbation magnitudes (median over members, then seeds)")
        fig.tight_layout()
    return fig


def frontier_sigma_figure(
    all_configs: pd.DataFrame, env: str, sigmas: Mapping[tuple[str, str], float]
):
    """Figure 3 A for ``env``: ID RMSE vs Far NLL with and without correction, labelled by sigma.

    Every configuration with test rows is drawn (in its calibration variant of lowest validation
    NLL), and a line joins, per method, the configurations chosen at each sigma
    (:func:`pnc.report.mechanism_table.sigma_choices`, those the 3A rows of the mechanism table
    compare). With the two-phase evaluation the test rows exist for those only, and the figure
    says so.
    """
    pts = sigma_points(all_configs, env, sigmas)
    chosen = sigma_choices(all_configs, env, sigmas)
    best = pts.loc[pts.groupby(["method", "config"], sort=False)["val_nll"].idxmin()]
    scored = best.dropna(subset=["id_rmse", "far_nll"])
    with plt.rc_context(RC_PARAMS):
        fig, ax = plt.subplots(figsize=(4.4, 3.4))
        for method in ("pnc", "pnc_nocorr"):
            rows = scored[scored.method == method].sort_values("sigma")
            if rows.empty:
                continue
            style = METHOD_STYLE[method]
            ax.scatter(rows.id_rmse, rows.far_nll, color=style["color"], marker=style["marker"],
                       s=30, label=METHOD_INFO[method].label, zorder=3)  # fmt: skip
            per_sigma = chosen[chosen.method == method].sort_values("sigma")
            ax.plot(per_sigma.id_rmse, per_sigma.far_nll, color=style["color"], linewidth=1,
                    linestyle=style["linestyle"])  # fmt: skip
            for rec in rows.itertuples():
                ax.annotate(f"σ={rec.sigma:g}", (rec.id_rmse, rec.far_nll), fontsize=7,
                            xytext=(3, 3), textcoords="offset points")  # fmt: skip
        unscored = len(best) - len(scored)
        if unscored:
            ax.text(0.5, -0.2, f"the configuration chosen at each σ; {unscored} others were "
                    "scored on validation only (two-phase evaluation)", transform=ax.transAxes,
                    fontsize=6, ha="center", va="top")  # fmt: skip
        ax.set_xlabel("ID RMSE (original units)")
        ax.set_ylabel("Far NLL")
        ax.set_title(f"(A) {env}: correction at equal σ")
        ax.legend(frameon=False)
        fig.tight_layout()
    return fig


def _regime_scatter(ax, wide: pd.DataFrame, x: str, y: str) -> None:
    for split in MECHANISM_SPLITS:
        rows = wide[wide.split == split]
        if len(rows):
            ax.scatter(rows[x], rows[y], s=4, alpha=0.35, color=REGIME_COLOR[split],
                       label=split_label(split), rasterized=True)  # fmt: skip


def distance_figure(wide: pd.DataFrame, env: str):
    """Figure 3 B for ``env`` from :func:`pnc.report.mechanism_table.points_wide` rows."""
    wide = wide[wide.env == env]
    fit = distance_regression(wide)
    with plt.rc_context(RC_PARAMS):
        fig, ax = plt.subplots(figsize=(4.4, 3.4))
        _regime_scatter(ax, wide, DISTANCE_QUANTITY, "disagreement")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("Mahalanobis distance (2nd hidden layer)")
        ax.set_ylabel("P&C disagreement D(x)")
        ax.set_title(f"(B) {env}")
        ax.text(0.02, 0.98, f"β₁ = {fit['slope']:.3g} ± {fit['se']:.2g} per decade\n"
                f"ρ = {fit['spearman']:.3f}, n = {fit['n']}", transform=ax.transAxes,
                va="top", fontsize=7)  # fmt: skip
        ax.legend(frameon=False, markerscale=3, loc="lower right")
        fig.tight_layout()
    return fig


def sketch_figure(wide: pd.DataFrame, env: str):
    """Figure 3 C for ``env``: one panel per sketch, log-log, pooled fit and identity lines."""
    import statsmodels.api as sm

    wide = wide[wide.env == env]
    with plt.rc_context(RC_PARAMS):
        fig, axes = plt.subplots(1, 2, figsize=(8.0, 3.4), sharey=True)
        for ax, (sketch, label) in zip(axes, SKETCHES.items(), strict=True):
            fit = sketch_regression(wide, sketch)
            _regime_scatter(ax, wide, sketch, "disagreement")
            xs = np.log10(wide[sketch].to_numpy() + LOG_FLOOR)
            ys = np.log10(wide["disagreement"].to_numpy() + LOG_FLOOR)
            pooled = sm.OLS(ys, sm.add_constant(xs)).fit()
            grid = np.linspace(xs.min(), xs.max(), 50)
            ax.plot(10**grid, 10 ** (pooled.params[0] + pooled.params[1] * grid), color="black",
                    linewidth=1, label=f"pooled fit (slope {pooled.params[1]:.2f})")  # fmt: skip
            lo = min(xs.min(), ys.min())
            hi = max(xs.max(), ys.max())
            ax.plot([10**lo, 10**hi], [10**lo, 10**hi], color="grey", linestyle="--",
                    linewidth=1, label="identity")  # fmt: skip
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel(label)
            ax.text(0.02, 0.98, f"β₁ = {fit['slope']:.3f} ± {fit['se']:.2g} (regime FE)\n"
                    f"t = {fit['t']:.3g}, ρ = {fit['spearman']:.3f}", transform=ax.transAxes,
                    va="top", fontsize=7)  # fmt: skip
            ax.legend(frameon=False, markerscale=3, loc="lower right", fontsize=6)
        axes[0].set_ylabel("P&C disagreement D(x)")
        fig.suptitle(f"(C) {env}: sketches of the corrected sensitivity")
        fig.tight_layout()
    return fig


def write_mechanism_figures(
    mechanism_paths: list[str | Path],
    all_configs_path: str | Path,
    env: str,
    out_dir: str | Path,
    grid_tables: Sequence[str | Path],
) -> list[Path]:
    """Write ``OUT_DIR/{magnitudes,frontier_sigma,distance,sketch}.{pdf,png}`` for ``env``;
    ``grid_tables``: P&C's and its ablation's (each configuration's sigma)."""
    frame = read_mechanism(mechanism_paths)
    all_configs = load(all_configs_path, require_selected=True, drop_selection_split=False)
    wide = points_wide(frame)
    out_dir = Path(out_dir)
    figures = {
        "magnitudes": magnitudes_figure(frame, env),
        "frontier_sigma": frontier_sigma_figure(
            all_configs, env, config_field(read_tables(grid_tables), "sigma")
        ),
        "distance": distance_figure(wide, env),
        "sketch": sketch_figure(wide, env),
    }
    return [path for name, fig in figures.items() for path in save(fig, out_dir / name)]
