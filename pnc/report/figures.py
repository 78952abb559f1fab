"""Figures of the MuJoCo study (matplotlib, Agg backend), written as PDF and PNG.

- :func:`frontier_figure`: the ID/OOD frontier (paper Figure 1A), ID RMSE against Far NLL for every
  method at every hyperparameter configuration it was evaluated at (seed means from
  ``results/all_configs.csv``), each configuration in the calibration variant (raw or ``vcal``)
  with the lower seed-mean validation NLL, the selected configuration highlighted, one panel per
  environment; a line joins each method's Pareto-optimal configurations (no other configuration of
  that method has both lower ID RMSE and lower Far NLL).
- :func:`metrics_figure`: one environment's four headline metrics (ID RMSE, Far NLL, Far AUROC,
  Far Spearman) for every method: each seed as a small point, the seed mean as a large marker with a
  +- one standard deviation bar (no bar for a single seed).

Every method has its own colour (Okabe-Ito, colour-blind safe), marker, line style and hatch
(:data:`METHOD_STYLE`), so the figures stay readable in grayscale. Legends show each method's label
and axis ticks its short label, both from :data:`pnc.studies.mujoco.results.METHOD_INFO` (the tables use the
same). ``python -m pnc.report frontier|metrics`` draws them from the results CSVs; :func:`save`
writes ``STEM.pdf`` and ``STEM.png``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from pnc.methods.selection_rule import select_candidate  # noqa: E402
from pnc.report import stats as st  # noqa: E402
from pnc.studies.mujoco.results import (  # noqa: E402
    BOUNDED_METRICS,
    CALIBRATIONS,
    HEADLINE,
    METHOD_INFO,
    METRIC_INFO,
    RAW,
    SAMPLE_ROWS,
    SAMPLED_SPLITS,
    SELECTION_METRIC,
    SELECTION_SPLIT,
    SPLIT_LABELS,
)

#: Per-method style: colour, marker, line style and hatch (distinct in every channel), from
#: :data:`pnc.studies.mujoco.results.METHOD_INFO` (the registry).
METHOD_STYLE: dict[str, dict[str, object]] = {
    m: dict(info.style) for m, info in METHOD_INFO.items()
}
RC_PARAMS = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "pdf.fonttype": 42,
}
FORMATS = ("pdf", "png")
PNG_DPI = 150


class FigureError(ValueError):
    """The requested figure cannot be drawn from the table (the message says why)."""


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def metric_label(split: str, metric: str) -> str:
    """E.g. ``Far NLL (↓ better)``."""
    info = METRIC_INFO[metric]
    return f"{SPLIT_LABELS[split]} {info.label} ({info.arrow} better)"


def choose_scale(values: np.ndarray) -> str:
    """``"log"`` for positive values spanning more than 1.5 decades, ``"symlog"`` for values of
    both signs with magnitudes above 100, else ``"linear"``."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if v.size < 2:
        return "linear"
    if v.min() > 0 and v.max() / v.min() > 10**1.5:
        return "log"
    if v.min() <= 0 and np.abs(v).max() > 100:
        return "symlog"
    return "linear"


def _set_scale(ax, axis: str, values: np.ndarray) -> None:
    scale = choose_scale(values)
    setter = ax.set_xscale if axis == "x" else ax.set_yscale
    if scale == "symlog":
        setter("symlog", linthresh=1.0)
    else:
        setter(scale)


def pareto_front(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of the points no other point beats in both coordinates (lower is better), by x.

    Args:
        x, y: ``[n]`` coordinates.

    Returns:
        ``[k]`` indices of the non-dominated points sorted by increasing ``x``.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = [
        i
        for i in range(x.size)
        if not np.any((x <= x[i]) & (y <= y[i]) & ((x < x[i]) | (y < y[i])))
    ]
    return np.asarray(sorted(keep, key=lambda i: (x[i], y[i])), dtype=int)


def _panel_grid(n: int, width: float, height: float, max_cols: int = 4):
    ncols = min(n, max_cols)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def check_envs(df: pd.DataFrame, envs: Sequence[str] | None) -> list[str]:
    """``envs`` (default: every environment of ``df``, in table order); unknown ones raise."""
    available = st.env_order(df)
    if not envs:
        return available
    unknown = [e for e in envs if e not in available]
    if unknown:
        raise FigureError(f"env(s) {unknown} not in the table; it has {available}")
    return list(envs)


def save(fig, stem: str | Path) -> list[Path]:
    """Write ``stem.pdf`` and ``stem.png`` and close the figure; returns the paths."""
    stem = Path(stem)
    if stem.suffix in (".pdf", ".png"):
        stem = stem.with_suffix("")
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in FORMATS:
        path = stem.with_name(f"{stem.name}.{ext}")
        fig.savefig(path, dpi=PNG_DPI if ext == "png" else None, bbox_inches="tight")
        paths.append(path)
    plt.close(fig)
    return paths


# --------------------------------------------------------------------------------------------
# ID/OOD frontier
# --------------------------------------------------------------------------------------------


def frontier_variants(all_configs: pd.DataFrame) -> pd.DataFrame:
    """The calibration variant drawn for each configuration: the one chosen by validation NLL.

    Per (env, method, config): the selected variant where the configuration is the selected one;
    otherwise the variant with the lowest seed-mean validation NLL by the selection's rule
    (:func:`pnc.methods.selection_rule.select_candidate`: non-finite values never win, ties go to ``raw``).
    A configuration evaluated in a single variant needs no validation rows.

    Args:
        all_configs: validated ``all_configs`` table (with ``selected``), with its ``val`` rows
            where a configuration has more than one variant.

    Returns:
        Columns ``env, method, config, calibration``, one row per configuration, in table order.

    Raises:
        FigureError: if an unselected configuration has several variants but lacks the
            validation NLL of one.
    """
    group = ["env", "method", "config"]
    pairs = all_configs.groupby([*group, "calibration"], sort=False)["selected"].any()
    val = all_configs[
        (all_configs.split == SELECTION_SPLIT) & (all_configs.metric == SELECTION_METRIC)
    ]
    val_means = val.groupby([*group, "calibration"], sort=False)["value"].mean()
    rows = []
    for key, flags in pairs.groupby(level=group, sort=False):
        present = set(flags.index.get_level_values("calibration"))
        order = [c for c in CALIBRATIONS if c in present]
        chosen = [c for (*_, c), selected in flags.items() if selected]
        if chosen or len(order) == 1:
            rows.append((*key, chosen[0] if chosen else order[0]))
            continue
        missing = [c for c in order if (*key, c) not in val_means.index]
        if missing:
            raise FigureError(
                f"{'/'.join(map(str, key))} has variants {order} but no {SELECTION_SPLIT} "
                f"{SELECTION_METRIC} for {missing}: the frontier needs all_configs.csv with its "
                f"{SELECTION_SPLIT} rows to choose between them"
            )
        rows.append((*key, select_candidate({c: float(val_means[(*key, c)]) for c in order})))
    return pd.DataFrame(rows, columns=[*group, "calibration"])


def frontier_splits(all_configs: pd.DataFrame) -> tuple[str, str]:
    """The splits the frontier reads its ID RMSE and Far NLL on: the frontier sample
    (:data:`pnc.studies.mujoco.results.SAMPLED_SPLITS`) where the table has it (the two-phase evaluation
    scores every configuration there, and on the whole splits only those a table reads), else
    ``id`` and ``far``."""
    sampled = {base: s for s, base in SAMPLED_SPLITS.items()}
    if set(sampled.values()) <= set(all_configs["split"]):
        return sampled["id"], sampled["far"]
    return "id", "far"


def frontier_points(all_configs: pd.DataFrame) -> pd.DataFrame:
    """Seed-averaged (ID RMSE, Far NLL) per (env, method, config), in its chosen variant.

    Args:
        all_configs: validated ``all_configs`` table (with ``selected``, and with its ``val`` rows
            where configurations have several calibration variants; see
            :func:`frontier_variants`).

    Returns:
        Columns ``env, method, config, calibration, id_rmse, far_nll, selected, n_seeds``.

    Raises:
        FigureError: on missing or non-finite id/rmse or far/nll of a drawn configuration, or a
            ``selected`` flag that differs across the rows of one (config, calibration) pair.
    """
    group = ["env", "method", "config", "calibration"]
    flags = all_configs.groupby(group, sort=False)["selected"].agg(["any", "all"])
    mixed = flags[flags["any"] != flags["all"]]
    if len(mixed):
        raise FigureError(
            f"'selected' differs across rows of one configuration: {list(mixed.index)}"
        )
    variants = frontier_variants(all_configs)
    drawn = all_configs.merge(variants, on=group, how="inner")
    id_split, far_split = frontier_splits(all_configs)
    sel = drawn[
        ((drawn.split == id_split) & (drawn.metric == "rmse"))
        | ((drawn.split == far_split) & (drawn.metric == "nll"))
    ]
    if sel.empty:
        raise FigureError("the table holds neither id/rmse nor far/nll rows")
    grouped = sel.groupby(group + ["split", "metric"], sort=False)["value"]
    index = pd.MultiIndex.from_frame(variants)
    means = grouped.mean().unstack(["split", "metric"]).reindex(index)
    counts = grouped.size().unstack(["split", "metric"]).reindex(index)
    for col in ((id_split, "rmse"), (far_split, "nll")):
        if col not in means.columns:
            raise FigureError(f"the table lacks {st.key(*col)} rows")
    holes = counts.isna().any(axis=1)
    if holes.any():
        raise FigureError(
            f"configurations lack {id_split}/rmse or {far_split}/nll: "
            f"{['/'.join(map(str, i)) for i in means.index[holes]]}"
        )
    bad = ~np.isfinite(means.to_numpy(float)).all(axis=1)
    if bad.any():
        raise FigureError(
            f"configurations with a non-finite seed-mean {id_split}/rmse or {far_split}/nll: "
            f"{['/'.join(map(str, i)) for i in means.index[bad]]}"
        )
    out = pd.DataFrame(
        {"id_rmse": means[(id_split, "rmse")], "far_nll": means[(far_split, "nll")]}
    ).reset_index()
    out["selected"] = [bool(flags.loc[tuple(r), "any"]) for r in out[group].to_numpy()]
    out["n_seeds"] = (
        sel.groupby(group, sort=False)["seed"]
        .nunique()
        .reindex(out.set_index(group).index)
        .to_numpy()
    )
    return out


def _hollow_markers(ax, x, y, style: dict, **kwargs) -> None:
    """Open markers in a method's style (:data:`METHOD_STYLE`): its marker, edged in its colour."""
    ax.scatter(x, y, marker=style["marker"], facecolors="none", edgecolors=style["color"], **kwargs)


def _draw_frontier(ax, points: pd.DataFrame, env: str) -> None:
    pts = points[points.env == env]
    for method in st.methods_present(pts):
        style = METHOD_STYLE[method]
        m = pts[pts.method == method]
        x, y = m["id_rmse"].to_numpy(), m["far_nll"].to_numpy()
        front = pareto_front(x, y)
        if front.size > 1:
            ax.plot(
                x[front],
                y[front],
                color=style["color"],
                linestyle=style["linestyle"],
                linewidth=1.2,
                alpha=0.8,
                zorder=2,
            )
        other = ~m["selected"].to_numpy()
        _hollow_markers(ax, x[other], y[other], style, s=28, linewidths=1.1, zorder=3)
        chosen = m["selected"].to_numpy()
        ax.scatter(
            x[chosen],
            y[chosen],
            s=90,
            marker=style["marker"],
            color=style["color"],
            edgecolors="black",
            linewidths=1.2,
            zorder=4,
        )
    _set_scale(ax, "x", pts["id_rmse"].to_numpy())
    _set_scale(ax, "y", pts["far_nll"].to_numpy())
    ax.set_title(env)
    ax.set_xlabel("ID RMSE (↓ better)")
    ax.set_ylabel("Far NLL (↓ better)")


def _legend_handles(methods: Sequence[str], *, frontier: bool) -> list[Line2D]:
    handles = [
        Line2D(
            [],
            [],
            color=METHOD_STYLE[m]["color"],
            marker=METHOD_STYLE[m]["marker"],
            linestyle=METHOD_STYLE[m]["linestyle"] if frontier else "none",
            markeredgecolor="black",
            markersize=7,
            label=METHOD_INFO[m].label,
        )
        for m in methods
    ]
    if frontier:
        handles += [
            Line2D(
                [],
                [],
                color="0.3",
                marker="o",
                linestyle="none",
                markeredgecolor="black",
                markersize=8,
                label="selected configuration",
            ),
            Line2D(
                [],
                [],
                color="0.3",
                marker="o",
                linestyle="none",
                markerfacecolor="none",
                markersize=5,
                label="other configurations",
            ),
            Line2D([], [], color="0.3", linestyle="-", label="Pareto front of a method"),
        ]
    return handles


def frontier_figure(all_configs: pd.DataFrame, envs: Sequence[str] | None = None):
    """The ID/OOD frontier, one panel per environment.

    Every configuration is drawn once, in the calibration variant (raw or ``vcal``) with the lower
    seed-mean validation NLL (:func:`frontier_variants`); the selected configuration, in its
    selected variant, is highlighted.

    Args:
        all_configs: validated ``all_configs`` table (:func:`pnc.studies.mujoco.results_table.validate` with
            ``require_selected=True, drop_selection_split=False``; the ``val`` rows choose each
            configuration's variant).
        envs: environments to draw (default: all, in table order).

    Returns:
        The matplotlib figure.
    """
    envs = check_envs(all_configs, envs)
    points = frontier_points(all_configs)
    with plt.rc_context(RC_PARAMS):
        fig, axes = _panel_grid(len(envs), 4.0, 3.4)
        for ax, env in zip(axes, envs, strict=True):
            _draw_frontier(ax, points, env)
        methods = st.methods_present(points[points.env.isin(envs)])
        fig.legend(
            handles=_legend_handles(methods, frontier=True),
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            ncol=2 if len(envs) == 1 else min(5, len(methods) + 3),
            frameon=False,
        )
        variants = set(points.loc[points.env.isin(envs), "calibration"])
        note = (
            "; variance calibration chosen per configuration by val NLL" if variants - {RAW} else ""
        )
        title = f"ID/OOD frontier: every evaluated configuration (seed means{note})"
        if frontier_splits(all_configs)[0] in SAMPLED_SPLITS:
            fig.suptitle(
                f"{title}\nID RMSE and Far NLL on a fixed seeded sample of {SAMPLE_ROWS:,} rows "
                "of each split;\nthe selected configurations' whole-split values are in results.csv",
                y=1.0,
                va="bottom",
            )
        else:
            fig.suptitle(title, y=1.0)
        fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------
# Per-environment headline metrics
# --------------------------------------------------------------------------------------------


def metrics_figure(results: pd.DataFrame, env: str, pairs: Sequence[tuple[str, str]] = HEADLINE):
    """One environment's headline metrics across methods with the spread over seeds.

    Args:
        results: validated selected-results table.
        env: the environment.
        pairs: the (split, metric) panels (default: ID RMSE, Far NLL, Far AUROC, Far Spearman).

    Returns:
        The matplotlib figure.
    """
    (env,) = check_envs(results, [env])
    df = results[results.env == env]
    methods = st.methods_present(df)
    rng = np.random.default_rng(0)  # jitter of the seed points only
    with plt.rc_context(RC_PARAMS):
        fig, axes = _panel_grid(len(pairs), 2.9, 3.1)
        for ax, (split, metric) in zip(axes, pairs, strict=True):
            sel = df[(df.split == split) & (df.metric == metric)]
            if sel.empty:
                ax.text(0.5, 0.5, "not measured", ha="center", va="center", transform=ax.transAxes)
            for i, method in enumerate(methods):
                vals = sel.loc[sel.method == method, "value"].to_numpy()
                if vals.size == 0:
                    continue
                style = METHOD_STYLE[method]
                jitter = rng.uniform(-0.3, 0.3, vals.size)
                if vals.size > 1:
                    _hollow_markers(
                        ax, i + jitter, vals, style, s=12, linewidths=0.7, alpha=0.8, zorder=2
                    )
                std = vals.std(ddof=1) if vals.size > 1 else 0.0
                ax.errorbar(
                    i,
                    vals.mean(),
                    yerr=std if vals.size > 1 else None,
                    fmt=style["marker"],
                    color=style["color"],
                    markeredgecolor="black",
                    markersize=8,
                    capsize=4,
                    elinewidth=1.4,
                    ecolor="black",
                    zorder=3,
                )
            if metric in BOUNDED_METRICS:  # chance level / no correlation as a reference line
                ax.axhline(METRIC_INFO[metric].reference, color="0.5", lw=0.8, ls="--")
            else:
                _set_scale(ax, "y", sel["value"].to_numpy())
            ax.set_xticks(
                range(len(methods)),
                [METHOD_INFO[m].short for m in methods],
                rotation=40,
                ha="right",
                rotation_mode="anchor",
                fontsize=7,
            )
            ax.set_xlim(-0.6, len(methods) - 0.4)
            ax.set_title(metric_label(split, metric))
            ax.grid(axis="x", visible=False)
        n_seeds = df["seed"].nunique()
        spread = (
            f"mean ± std over {n_seeds} seeds (small hollow markers: individual seeds)"
            if n_seeds > 1
            else "1 seed (no spread)"
        )
        fig.suptitle(f"{env}: headline metrics, {spread}", y=1.0)
        fig.legend(
            handles=_legend_handles(methods, frontier=False),
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            ncol=len(methods),
            frameon=False,
        )
        fig.tight_layout()
    return fig
