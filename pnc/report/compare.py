"""Our Table 1 beside the paper's: the side-by-side comparison of a reference folder.

A reference folder's ``comparison.md`` shows, for each headline metric of the paper's Table 1
(:data:`pnc.studies.mujoco.results.HEADLINE`), one row per ranked method and one column per source:

- **ours, draws**: the folder's ``results.csv`` with the Deep Ensemble's predictive as in the
  authors' runs (one draw per member, ``deep_ensemble``);
- **ours, mixture**: the same results with the Deep Ensemble's mixture reading
  (``deep_ensemble_mixture``) ranked in its place (:func:`pnc.report.stats.substitute_methods`),
  when the folder has it;
- **paper, recomputed**: the paper's per-environment appendix means (``PAPER/results.csv``) run
  through the same statistics;
- **paper, printed**: the paper's Table 1 as printed (``PAPER/table1_printed.csv``);
- before the paper's columns, each variant's (:data:`VARIANTS_FILE`: e.g. the study with the
  authors' settings, ``docs/results/offline_authors/``), draws and mixture; after the Far RMSE
  ratios, a table per variant of where it moves each ranking claim's number: toward the paper or
  away from it (:func:`pnc.report.variant_moves.variant_moves`).

Each cell is ``mean rank ± std (wins / environments)`` followed by the Wilcoxon-Holm arrow against
P&C (↑: P&C significantly better, ↓: the reverse); the best mean rank of a column is in bold. Then
come the per-environment AUROC and Spearman, ours beside the paper's, our Far RMSE over ID RMSE
per environment (:func:`shift_ratio_markdown`: how much harder Far is to predict), and last the
paper's claims measured on the folder, each with its verdict (:mod:`pnc.report.claims`; the
mechanism claims from the folder's ``tables/mechanism.csv`` when it has one). The file is built
from CSVs alone, so :func:`pnc.report.export.check_folder` rebuilds it and compares it with the
committed one.

Command line::

    python -m pnc.report compare docs/results/offline --paper docs/results/paper
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from pnc.report import claims, mechanism_claims, variant_moves, verdicts
from pnc.report import stats as st
from pnc.report.table1 import (  # noqa: F401  (re-exported: the cells are part of this API)
    MIXTURE_SUBSTITUTION,
    Cell,
    Column,
    cells_from_stats,
    our_readings,
    statistics_of,
)
from pnc.report.tables import column_label
from pnc.report.variant import read_config
from pnc.runtime.render import markdown_table
from pnc.studies.mujoco.results import (
    HEADLINE,
    METHOD_INFO,
    RANKED_METHODS,
    REFERENCE,
    SUBSPACE,
)
from pnc.studies.mujoco.results_table import (
    ResultsError,
    load,
)

#: File name of the comparison inside a reference folder.
COMPARISON_FILE = "comparison.md"
#: The repository's study configs, where a variant folder's config is found by the folder's name
#: (``config/offline_authors.yaml`` for ``docs/results/offline_authors/``; none: no caveat).
CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"
#: Optional file of a reference folder naming its variants: ``{"FOLDER": "label", ...}``, each
#: folder a sibling reference folder (e.g. ``{"offline_authors": "authors' settings"}``).
VARIANTS_FILE = "variants.json"
#: The paper's Table 1 as printed, inside the paper's folder.
PRINTED_FILE = "table1_printed.csv"
#: Columns of :data:`PRINTED_FILE`.
PRINTED_COLUMNS: tuple[str, ...] = (
    "method", "split", "metric", "mean_rank", "rank_std", "wins", "n_envs", "arrow",
)  # fmt: skip


def read_printed(path: str | Path) -> Column:
    """The paper's Table 1 as printed, from :data:`PRINTED_FILE`.

    Raises:
        ResultsError: a column is missing, a value is not finite, an arrow is not ``up``/``down``/
            empty, a method is not ranked, or a (method, metric) appears twice.
    """
    frame = pd.read_csv(path, keep_default_na=False, dtype={"arrow": str})
    missing = [c for c in PRINTED_COLUMNS if c not in frame.columns]
    if missing:
        raise ResultsError(f"{path}: missing column(s) {missing}")
    for name in ("mean_rank", "rank_std"):
        frame[name] = pd.to_numeric(frame[name], errors="coerce")  # "" or text: nan, refused below
    problems = []
    out: Column = {}
    for row in frame.itertuples(index=False):
        k = st.key(row.split, row.metric)
        if row.method not in RANKED_METHODS:
            problems.append(f"unknown method {row.method!r}")
        if row.arrow not in ("", "up", "down"):
            problems.append(f"{row.method} {k}: arrow {row.arrow!r} is not up, down or empty")
        values = (float(row.mean_rank), float(row.rank_std))
        if not np.isfinite(values).all():
            problems.append(f"{row.method} {k}: non-finite rank")
        if row.method in out.get(k, {}):
            problems.append(f"{row.method} {k}: listed twice")
        out.setdefault(k, {})[row.method] = Cell(
            *values, int(row.wins), int(row.n_envs), row.arrow or None
        )
    if problems:
        raise ResultsError(f"{path}: " + "; ".join(problems))
    return out


def comparison_markdown(columns: Sequence[tuple[str, Column]]) -> str:
    """One Markdown table per headline metric, a column per source, a row per ranked method.

    Raises:
        ValueError: no columns, or a column lacks a method that another column has for the same
            metric (sources must rank the same methods to be compared).
    """
    if not columns:
        raise ValueError("nothing to compare: no columns")
    blocks = []
    for split, metric in HEADLINE:
        k = st.key(split, metric)
        present = [(label, col[k]) for label, col in columns if k in col]
        if not present:
            continue
        methods = [m for m in RANKED_METHODS if any(m in cells for _, cells in present)]
        for label, cells in present:
            lacking = [m for m in methods if m not in cells]
            if lacking:
                raise ValueError(f"{label} has no {column_label(split, metric)} rank for {lacking}")
        best = {label: min(c.mean_rank for c in cells.values()) for label, cells in present}
        header = ["Method", *(f"{column_label(split, metric)}, {label}" for label, _ in present)]
        rows = [
            [METHOD_INFO[m].label]
            + [cells[m].text(bold=cells[m].mean_rank == best[lb]) for lb, cells in present]
            for m in methods
        ]
        blocks.append(markdown_table(None, header, rows).rstrip("\n"))
    return "\n\n".join(blocks) + "\n"


#: Per-environment metrics whose units do not depend on the data, with their printed decimals.
UNITLESS: tuple[tuple[str, str, int], ...] = (("far", "auroc", 3), ("far", "spearman", 2))


def seed_means(df: pd.DataFrame, split: str, metric: str) -> pd.DataFrame:
    """``metric`` on ``split`` of the ranked methods, averaged over seeds: environments (table
    order) x methods."""
    rows = df[(df.split == split) & (df.metric == metric) & df.method.isin(RANKED_METHODS)]
    return rows.groupby(["env", "method"], sort=False)["value"].mean().unstack()


def per_env_markdown(
    ours: pd.DataFrame, paper: pd.DataFrame, split: str, metric: str, decimals: int
) -> str:
    """One metric's per-environment means, ours beside the paper's: a row per environment that
    both have, a column per ranked method, cells ``ours / paper`` (ours: mean over seeds).

    Raises:
        ValueError: the two tables share no environment with this metric.
    """

    a, b = seed_means(ours, split, metric), seed_means(paper, split, metric)
    envs = [e for e in a.index if e in b.index]
    if not envs:
        raise ValueError(f"no environment has {column_label(split, metric)} in both tables")
    methods = [m for m in RANKED_METHODS if m in a.columns and m in b.columns]
    header = ["Environment", *(METHOD_INFO[m].label for m in methods)]
    rows = [
        [env, *(f"{a.loc[env, m]:.{decimals}f} / {b.loc[env, m]:.{decimals}f}" for m in methods)]
        for env in envs
    ]
    return markdown_table(None, header, rows).rstrip("\n")


def shift_ratio_markdown(ours: pd.DataFrame, metric: str = "rmse") -> str:
    """How much harder Far is to predict than ID: per environment (rows, table order) and ranked
    method (columns), the seed mean of ``metric`` on Far over its seed mean on ID, 3 significant
    digits. The ratio has no units, but the paper reports no Far RMSE, so it is ours alone.

    Raises:
        ValueError: no environment has ``metric`` on both splits, or a mean is not positive.
    """
    far, id_ = seed_means(ours, "far", metric), seed_means(ours, "id", metric)
    envs = [e for e in far.index if e in id_.index]
    if not envs:
        raise ValueError(f"no environment has {metric} on both the Far and the ID split")
    methods = [m for m in RANKED_METHODS if m in far.columns and m in id_.columns]
    ratio = far.loc[envs, methods] / id_.loc[envs, methods]
    bad = ~np.isfinite(ratio.to_numpy()) | (ratio.to_numpy() <= 0)
    if bad.any():
        env, method = np.argwhere(bad)[0]
        raise ValueError(
            f"{envs[env]}, {methods[method]}: Far/ID {metric} is not a positive number "
            f"({ratio.iloc[env, method]})"
        )
    header = ["Environment", *(METHOD_INFO[m].label for m in methods)]
    rows = [[env, *(verdicts.number(ratio.loc[env, m]) for m in methods)] for env in envs]
    return markdown_table(None, header, rows).rstrip("\n")


def _columns(
    readings: tuple[Column, Column | None], paper: pd.DataFrame, paper_dir: Path
) -> list[tuple[str, Column]]:
    draws, mixture = readings
    columns = [("ours, draws", draws)]
    if mixture is not None:
        columns.append(("ours, mixture", mixture))
    columns.append(("paper, recomputed", statistics_of(paper)))
    columns.append(("paper, printed", read_printed(paper_dir / PRINTED_FILE)))
    return columns


def read_variants(folder: str | Path) -> list[tuple[str, Path]]:
    """The folder's variants (:data:`VARIANTS_FILE`) as ``(label, folder)``; none without it.

    Raises:
        FileNotFoundError: a variant's folder has no ``results.csv``.
    """
    path = Path(folder) / VARIANTS_FILE
    if not path.is_file():
        return []
    out = []
    for name, label in json.loads(path.read_text()).items():
        where = Path(folder).parent / name
        if not (where / "results.csv").is_file():
            raise FileNotFoundError(f"{path} names {where}, which has no results.csv")
        out.append((str(label), where))
    return out


def _beats(frame: pd.DataFrame, method: str, other: str = REFERENCE) -> tuple[int, int]:
    """In how many environments ``method``'s ID RMSE seed mean is lower than ``other``'s, and of
    how many."""
    rows = frame[(frame["split"] == "id") & (frame["metric"] == "rmse")]
    means = rows.groupby(["env", "method"])["value"].mean().unstack()
    return int((means[method] < means[other]).sum()), len(means)


def _rows_of(frame: pd.DataFrame, method: str) -> pd.DataFrame:
    rows = frame[frame["method"] == method]
    return rows.sort_values(list(rows.columns)).reset_index(drop=True)


def subspace_note(ours: pd.DataFrame, variant: pd.DataFrame, label: str) -> str:
    """Why Subspace's ID RMSE rank moves in a variant: whether its rows are the same in both
    folders, and in how many environments its ID RMSE seed mean beats P&C's in each."""
    sub = METHOD_INFO[SUBSPACE].label
    k, n = _beats(variant, SUBSPACE)
    j, _ = _beats(ours, SUBSPACE)
    counts = (
        f"{sub}'s ID RMSE seed mean beats P&C's in {k} of {n} environments with the {label} "
        f"and in {j} of {n} in ours"
    )
    if _rows_of(ours, SUBSPACE).equals(_rows_of(variant, SUBSPACE)):
        return (
            f"{sub}'s rows are identical in both folders (the variant reuses the reference's "
            f"pieces of the methods it does not change), so its ID RMSE rank moves only because "
            f"P&C's ID RMSE moves: {counts}."
        )
    return f"{sub}'s rows differ between the two folders; {counts}."


def calibration_caveat(where: Path) -> str:
    """The caveat of a variant whose methods calibrate on the ID pool (``calibration_pool:
    id_pool``, read from its config, :data:`CONFIG_DIR`), validation rows included; empty when
    none does or no config is found."""
    path = CONFIG_DIR / f"{where.name}.yaml"
    if not path.is_file():
        return ""
    methods = read_config(path)["methods"]
    pooled = [
        m
        for m, entry in methods.items()
        if isinstance(entry, dict) and entry.get("calibration_pool") == "id_pool"
    ]
    if not pooled:
        return ""
    who = verdicts.names(pooled)
    return (
        f"Caveat: the variant's {who} draws its calibration rows from the whole ID pool "
        "(`calibration_pool: id_pool`), validation rows included, and those validation rows then "
        "select its configuration: its validation NLL, the selection's criterion, is partly "
        "measured on rows its correction fitted (`docs/protocol.md` keeps the train split for "
        "this reason)."
    )


def variant_columns(variants: Sequence[tuple[str, Path]]) -> list[tuple[str, Column]]:
    """Each variant's Table 1 columns (draws and, when present, mixture)."""
    columns = []
    for label, where in variants:
        draws, mixture = our_readings(load(where / "results.csv"))
        columns.append((f"{label}, draws", draws))
        if mixture is not None:
            columns.append((f"{label}, mixture", mixture))
    return columns


def comparison_columns(folder: str | Path, paper: str | Path) -> list[tuple[str, Column]]:
    """The comparison's columns for a reference folder and the paper's folder (module docstring)."""
    paper = Path(paper)
    ours = our_readings(load(Path(folder) / "results.csv"))
    return _columns(ours, load(paper / "results.csv"), paper)


def comparison_text(folder: str | Path, paper: str | Path) -> str:
    """The full ``comparison.md`` of a reference folder."""
    folder = Path(folder)
    intro = (
        f"# Table 1: `{folder.name}` beside the paper\n\n"
        "Generated by `python -m pnc.report compare` from this folder's `results.csv` and the "
        "paper's folder (`results.csv`: the appendix means; `table1_printed.csv`: Table 1 as "
        "printed). Cells: mean rank ± std across environments (wins / environments); ↑: P&C "
        "significantly better than the baseline (two-sided Wilcoxon signed-rank over environments, "
        "Holm across the baselines at 0.05), ↓: the reverse; bold: the column's best mean rank. "
        "\"draws\": the Deep Ensemble's predictive of the authors' runs (one draw per member); "
        '"mixture": its mixture reading ranked in its place.\n\n'
    )
    paper = Path(paper)
    ours, theirs = load(folder / "results.csv"), load(paper / "results.csv")
    per_env = "\n\n".join(
        f"### {column_label(split, metric)} per environment, ours / paper\n\n"
        + per_env_markdown(ours, theirs, split, metric, dec)
        for split, metric, dec in UNITLESS
    )
    per_env_intro = (
        "\n## Per environment, where the units allow\n\n"
        "AUROC and Spearman do not depend on the targets' units; ours are means over this folder's "
        "seeds of the selected configuration, the paper's its appendix means over 10 seeds. The "
        "data differ: ours are rolled out from this project's behaviour policies "
        "(`docs/offline_data.md`), the paper's are Minari's datasets, so a cell pair compares the "
        "methods' behaviour, not the same numbers.\n\n"
    )
    has_far_rmse = bool(((ours.split == "far") & (ours.metric == "rmse")).any())
    shift = (
        "\n\n### Far RMSE / ID RMSE per environment, ours\n\n"
        "How much harder the Far split is to predict than ID, for each method: its mean Far RMSE "
        "over this folder's seeds divided by its mean ID RMSE. The ratio has no units; the paper "
        "reports no Far RMSE, so there is no paper column.\n\n"
        + (shift_ratio_markdown(ours) if has_far_rmse else "This folder has no Far RMSE.")
    )
    readings = our_readings(ours)
    variants = read_variants(folder)
    columns = _columns(readings, theirs, paper)
    columns[len(columns) - 2 : len(columns) - 2] = variant_columns(variants)
    moves = "".join(
        f"\n## {label}: what the variant moves\n\n"
        f"The folder `{where.name}` is this folder's study, varied: {label} "
        f"(`{where.name}/README.md`). Per ranking claim, the number that says how far it holds, "
        "in the draws reading (the authors' runs'): ours, the variant's and the paper's "
        "(recomputed from its appendix means); the variant moves it toward the paper when its "
        "number is nearer to the paper's than ours is. Last, Subspace's ID RMSE rank. The "
        "verdict is the claim's in the variant, by the rules below.\n\n"
        + variant_moves.moves_markdown(
            variant_moves.variant_moves(
                readings, our_readings(load(where / "results.csv")), statistics_of(theirs)
            ),
            label,
        )
        + "\n"
        + " ".join(
            t
            for t in (
                subspace_note(ours, load(where / "results.csv"), label),
                calibration_caveat(where),
            )
            if t
        )
        + "\n"
        for label, where in variants
    )
    measured = claims.claims_of(*readings, mechanism_claims.mechanism_of_folder(folder))
    claims_section = (
        "\n## The paper's claims, measured\n\n"
        "Each claim of the paper's Sections 5.2 and 5.3 beside what this folder measures: the "
        "ranking claims from the tables above, the mechanism claims from `tables/mechanism.csv` (and "
        "3A's Far NLL per seed from the metric tables in `pieces/`, where the folder has them). "
        f"{claims.RULE}\n\n" + claims.claims_markdown(measured)
    )
    return (
        intro
        + comparison_markdown(columns)
        + per_env_intro
        + per_env
        + shift
        + "\n"
        + moves
        + claims_section
    )


def write_comparison(folder: str | Path, paper: str | Path, out: str | Path | None = None) -> Path:
    """Write ``comparison.md`` (default: into ``folder``); returns its path."""
    path = Path(out) if out is not None else Path(folder) / COMPARISON_FILE
    path.write_text(comparison_text(folder, paper))
    return path
