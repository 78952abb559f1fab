"""Reference-results folders: a study's small outputs, committed, with tables regenerated from them.

A *reference folder* (``docs/results/offline/`` for the study's published results) holds

- ``results.csv``, ``all_configs.csv`` and ``selection.json`` of a finished study;
- ``costs.json``, the measured CPU time per (env, seed) (:mod:`pnc.report.costs`), when the study's
  ``benchmarks/`` directory is at hand;
- ``tables/``: every table of :func:`pnc.report.tables.write_tables_and_stats` built from
  ``results.csv``, plus the mechanism table (``mechanism.*``) copied from the study;
- ``figures/``: the study's PNG figures, copied;
- ``grid/``: the study's grid tables (``results/grid/{method}.json``: each configuration's typed
  fields by id), copied, from which the claims read each P&C configuration's sigma.

:func:`export_study` makes one from a study's working directory; :func:`check_folder` rebuilds the
tables from the folder's ``results.csv`` and reports every table that differs from the committed
one, so that tables and data cannot drift apart. Both refuse a results table in which some
(env, seed, method) is missing or a value is not finite (:func:`check_complete`): nothing is
averaged over fewer seeds than the folder claims.

Command line::

    python -m pnc.report export STUDY_DIR --out docs/results/offline
    python -m pnc.report check docs/results/offline
"""

from __future__ import annotations

import filecmp
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from pnc.report import compare, costs
from pnc.report.tables import write_tables_and_stats
from pnc.runtime.io import write_json
from pnc.studies.mujoco.results import RANKED_METHODS
from pnc.studies.mujoco.results_table import (
    ResultsError,
    read_csv,
)

#: Data files of a reference folder (``costs.json`` is optional).
DATA_FILES: tuple[str, ...] = ("results.csv", "all_configs.csv", "selection.json")
#: Tables of the mechanism stage, copied rather than rebuilt (their inputs are per-point files).
MECHANISM_TABLES: tuple[str, ...] = ("mechanism.csv", "mechanism.md", "mechanism.tex")


def check_complete(frame: pd.DataFrame, *, name: str = "results.csv") -> dict[str, list[int]]:
    """Refuse a results table with a missing (env, seed, method) or a non-finite value.

    Every method present must have every seed that any method has in the same environment, and
    every ranked method (:data:`pnc.studies.mujoco.results.RANKED_METHODS`) present anywhere must be
    present in every environment.

    Args:
        frame: a long-format results table (``env, method, seed, ..., value``).
        name: the table's name, used in error messages.

    Returns:
        The seeds per environment, ``{env: [seed, ...]}``.

    Raises:
        ResultsError: naming every missing (env, seed, method) and every non-finite row.
    """
    problems: list[str] = []
    values = pd.to_numeric(frame["value"], errors="coerce")
    bad = frame[~np.isfinite(values.to_numpy(dtype=float))]
    for row in bad.head(20).itertuples(index=False):
        problems.append(
            f"non-finite value {row.value!r} at env={row.env}, seed={row.seed}, "
            f"method={row.method}, split={row.split}, metric={row.metric}"
        )
    if len(bad) > 20:
        problems.append(f"... and {len(bad) - 20} more non-finite values")
    ranked = [m for m in RANKED_METHODS if m in set(frame["method"])]
    seeds: dict[str, list[int]] = {}
    for env, part in frame.groupby("env", sort=False):
        env_seeds = sorted(int(s) for s in part["seed"].unique())
        seeds[str(env)] = env_seeds
        methods = list(dict.fromkeys([*ranked, *part["method"].unique()]))
        have = set(zip(part["method"], part["seed"].astype(int), strict=True))
        for method in methods:
            missing = [s for s in env_seeds if (method, s) not in have]
            if missing:
                problems.append(f"missing env={env}, method={method}, seed(s) {missing}")
    if problems:
        raise ResultsError(f"{name} is incomplete:\n  " + "\n  ".join(problems))
    return seeds


def _copy_tree_files(src: Path, dst: Path, pattern: str) -> list[Path]:
    copied = []
    for path in sorted(src.rglob(pattern)):
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        copied.append(target)
    return copied


def build_tables(folder: str | Path, out_dir: str | Path) -> list[Path]:
    """Build every table of the folder's ``results.csv`` into ``out_dir``; returns the files."""
    folder = Path(folder)
    check_complete(read_csv(folder / "results.csv"))
    write_tables_and_stats(folder / "results.csv", out_dir)
    return sorted(Path(out_dir).iterdir())


def export_study(
    study_dir: str | Path,
    out_dir: str | Path,
    *,
    n_envs: int = 11,
    n_seeds: int = 10,
    cores: Sequence[int] = (2, 8, 32),
    force: bool = False,
) -> list[Path]:
    """Turn a finished study's working directory into a reference folder.

    Args:
        study_dir: the directory Snakemake ran in (``results/``, ``figures/``, ``benchmarks/``).
        out_dir: the reference folder to write.
        n_envs, n_seeds, cores: the projection of ``costs.json`` (:func:`pnc.report.costs.summarize`).
        force: replace files of an existing folder (otherwise an existing folder is refused).

    Returns:
        The files written.

    Raises:
        FileNotFoundError: a data file is missing from ``study_dir/results``.
        ResultsError: the results are incomplete (:func:`check_complete`).
        FileExistsError: ``out_dir`` holds files and ``force`` is not set.
    """
    study, out = Path(study_dir), Path(out_dir)
    results = study / "results"
    missing = [f for f in DATA_FILES if not (results / f).is_file()]
    if missing:
        raise FileNotFoundError(f"{results} lacks {', '.join(missing)}: run the study first")
    check_complete(read_csv(results / "results.csv"))
    if out.exists() and any(out.iterdir()) and not force:
        raise FileExistsError(f"{out} is not empty; pass --force to replace its files")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in DATA_FILES:
        shutil.copyfile(results / name, out / name)
        written.append(out / name)
    if (study / "benchmarks").is_dir():
        summary = costs.summarize(
            costs.read_benchmarks(study / "benchmarks", study / "logs"),
            n_envs=n_envs,
            n_seeds=n_seeds,
            cores=list(cores),
        )
        write_json(out / "costs.json", summary)
        written.append(out / "costs.json")
    # the configurations the study evaluated, typed and keyed by id (each one's sigma, for claims)
    if (results / "grid").is_dir():
        written += _copy_tree_files(results / "grid", out / "grid", "*.json")
    written += build_tables(out, out / "tables")
    for name in MECHANISM_TABLES:
        if (results / "tables" / name).is_file():
            shutil.copyfile(results / "tables" / name, out / "tables" / name)
            written.append(out / "tables" / name)
    if (study / "figures").is_dir():
        written += _copy_tree_files(study / "figures", out / "figures", "*.png")
    return written


def check_folder(folder: str | Path, paper: str | Path | None = None) -> list[str]:
    """Rebuild a reference folder's tables and list every difference from the committed ones.

    A folder with a ``comparison.md`` (:mod:`pnc.report.compare`) has it rebuilt too, against the
    paper's folder ``paper``; without ``paper`` that is reported as a problem.

    Returns:
        One line per table that differs or is missing on either side; empty when they agree.

    Raises:
        ResultsError: the folder's ``results.csv`` is incomplete (:func:`check_complete`).
    """
    folder = Path(folder)
    committed = folder / "tables"
    with tempfile.TemporaryDirectory() as tmp:
        rebuilt = [p.name for p in build_tables(folder, tmp)]
        problems = []
        for name in rebuilt:
            path = committed / name
            if not path.is_file():
                problems.append(f"{path}: missing (rebuilt from results.csv)")
            elif not filecmp.cmp(path, Path(tmp) / name, shallow=False):
                problems.append(f"{path}: differs from the table rebuilt from results.csv")
    extra = (
        sorted(
            p.name
            for p in committed.glob("*")
            if p.name not in rebuilt and p.name not in MECHANISM_TABLES
        )
        if committed.is_dir()
        else []
    )
    problems += [f"{committed / name}: not built from results.csv" for name in extra]
    comparison = folder / compare.COMPARISON_FILE
    if comparison.is_file():
        if paper is None:
            problems.append(f"{comparison}: not checked (no paper folder given)")
        elif comparison.read_text() != compare.comparison_text(folder, paper):
            problems.append(f"{comparison}: differs from the comparison rebuilt from the CSVs")
    return problems
