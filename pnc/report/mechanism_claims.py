"""The mechanism claims of Section 5.2, judged per environment on the rows of
``tables/mechanism.csv`` (:func:`pnc.report.mechanism_table.mechanism_stats`).

An environment holds a claim only when every seed does; 3A is judged on each seed's Far NLL at the
configurations chosen per sigma on the seed means (:func:`mechanism_of_folder` adds those rows
from the folder's pieces, :func:`seed_3a_rows`). The rules, per environment: 3A, P&C's Far NLL
below the uncorrected ablation's at every sigma; 3B, slope > 0 with t > :data:`MIN_T`; 3C, the
probe sketch's Spearman correlation with the disagreement > 0 and its log-log slope inside
:data:`SLOPE_BAND`; 1B/C, P&C's Far/ID ratio of ``||dy|| / ||dh||`` > 1; Theorem 3, the median
ratio of effective ranks (per-member over shared subset) > 1. A missing evidence row, environment
or finite value raises :class:`ValueError` naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from pnc.report.mechanism_table import (
    EVIDENCE_1BC,
    EVIDENCE_3A,
    EVIDENCE_3B,
    EVIDENCE_3C,
    EVIDENCE_THM3,
)
from pnc.report.verdicts import (
    CANNOT_BE_COMPARED,
    Claim,
    environment_verdict,
    number,
    shorter_list,
    span,
)
from pnc.studies.mujoco.grid import config_field, read_tables
from pnc.studies.mujoco.per_sigma import PER_SIGMA_METHODS, per_sigma_choices, sigma_points
from pnc.studies.mujoco.results import (
    REFERENCE,
)

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

#: A mechanism rule on the mechanism table: ``measured``, ``verdict`` and the rule line.
MechanismJudge = Callable[[pd.DataFrame], tuple[str, str, str]]


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
    n, which = len(good) + len(bad), shorter_list(good, bad)
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
        reading = f"{len(good)} of {len(good) + len(bad)}{shorter_list(good, bad)}"
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
