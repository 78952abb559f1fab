"""Check a re-run (env, seed) piece against a stored reference, to the byte and in distribution.

A piece re-run on the machine kind that made the reference, with the same software, reproduces
its metric tables to the byte. On another machine kind (another CPU vector width, an ARM CPU, a
GPU, docs/results.md, "What reproduces where") XLA's float32 kernels round differently, training
amplifies the last bits into different networks, and the tables differ in every digit; the
re-run is then another draw of the same (env, seed) and the question is whether it lands where
the reference's seeds do. :func:`verify_piece` answers both, at the level the study's
conclusions live:

- **bytes**: each stored metric table of the (env, seed) against the re-run's file of the same
  path (SHA-256); for a re-run with the two-phase evaluation, whose tables are laid out otherwise,
  each of its tables' values against the stored piece's values of the same rows;
- **selection**: the cross-seed selection (:func:`cross_seed_selection`, the study's rule: mean
  validation NLL over the stored seeds) recomputed with the re-run's tables in place of the stored seed's:
  the same (config, calibration) per method, or which one it moves to;
- **metrics**: for the selected (config, calibration) of every method (with the two-phase
  evaluation: every (config, calibration) the re-run scored on the test splits), every (split,
  metric) value of the re-run against the stored seeds' values of that row: the statistic
  ``t = (x - mean) / (sd * sqrt(1 + 1/n))`` is Student-t with ``n - 1`` degrees of freedom when
  ``x`` is one more draw from the seeds' distribution (a prediction interval), and the re-run is
  *within the spread* when every row's ``|t|`` is below the two-sided quantile at level
  ``alpha / rows`` (Bonferroni over the rows checked, family-wise ``alpha``, default 0.05). A
  row whose stored seeds all agree (``sd = 0``) is within only when the re-run's value equals
  theirs to 1e-9 relative.

The re-run may come from either evaluation mode (docs/workflow.md, ``evaluation``): ``full``
writes every configuration on every split under ``results/metrics/ENV/seedS`` (the stored pieces'
layout); ``two_phase`` writes every configuration's validation rows under
``results/validation/ENV/seedS/METHOD/`` and the test splits of the planned configurations under
``results/test/ENV/seedS/METHOD.csv`` (its frontier-sample rows, which the stored pieces do not
hold, are not checked).

Seeds are a conservative yardstick: they vary the splits and the training noise, a re-run of one
seed only the latter. A re-run outside the spread is a finding to explain, not rounding.

Command line::

    python -m pnc.report verify-piece ENV SEED --study STUDY_DIR [--store DIR] [--out F]

exits 0 when the re-run is within the spread and the selection is unchanged, 1 otherwise, 2 when
a table is missing or malformed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pnc.methods.selection_rule import select_candidate
from pnc.report.pieces import MANIFESTS, TABLE_DIRS, PieceError
from pnc.runtime.io import ArtifactError, file_sha256
from pnc.studies.mujoco.results import (
    CALIBRATIONS,
    SAMPLED_SPLITS,
    SELECTION_METRIC,
    SELECTION_SPLIT,
)
from pnc.studies.mujoco.results_table import (
    read_csv,
    validate,
)

#: Family-wise level of the metric check (Bonferroni over the rows checked).
ALPHA = 0.05

#: Relative tolerance for rows whose stored seeds all agree (zero spread).
ZERO_SPREAD_RTOL = 1e-9


#: The key of a metric row: one value per (method, candidate, split, metric) of an (env, seed).
ROW_KEY = ["method", "config", "calibration", "split", "metric"]


def metric_dir(env: str, seed: int) -> str:
    """Path of an (env, seed)'s metric tables relative to a study: ``results/metrics/ENV/seedS``
    (``evaluation: full``, the stored pieces' layout; one folder per method)."""
    return TABLE_DIRS["metrics"].format(env=env, seed=seed)


#: The phases of ``evaluation: two_phase`` and their folders in a study (``{env}``, ``{seed}``;
#: :data:`pnc.report.pieces.TABLE_DIRS`).
PHASE_DIRS = {phase: TABLE_DIRS[phase] for phase in ("validation", "test")}


def phase_dir(phase: str, env: str, seed: int) -> str:
    """The folder of a two-phase study's ``phase`` tables of (env, seed), relative to the study
    (:data:`PHASE_DIRS`)."""
    return PHASE_DIRS[phase].format(env=env, seed=seed)


def _tables(root: Path, env: str, seed: int) -> list[Path]:
    return sorted((root / metric_dir(env, seed)).rglob("*.csv"))


@dataclasses.dataclass(frozen=True)
class RerunTables:
    """A re-run's metric tables of one (env, seed), in the layout its evaluation mode wrote.

    Attributes:
        layout: ``"full"`` (``results/metrics``) or ``"two_phase"`` (``results/validation`` and
            ``results/test``).
        by_method: ``{method: [table paths]}``; with ``two_phase`` only the methods that have both
            validation and test tables.
        incomplete: ``two_phase``: methods with tables of one phase only (``{method: phase
            missing}``).
    """

    layout: str
    by_method: dict[str, list[Path]]
    incomplete: dict[str, str]

    @property
    def paths(self) -> list[Path]:
        return [p for paths in self.by_method.values() for p in paths]


def rerun_tables(study: str | Path, env: str, seed: int) -> RerunTables:
    """Find a re-run's metric tables of (env, seed) in either evaluation mode's layout.

    Raises:
        PieceError: the study has no tables of (env, seed), or validation tables without any test
            table (the test phase has not run).
    """
    study = Path(study)
    full = _tables(study, env, seed)
    if full:
        by_method: dict[str, list[Path]] = {}
        for path in full:
            by_method.setdefault(path.parent.name, []).append(path)
        return RerunTables("full", by_method, {})
    val_dir, test_dir = (study / phase_dir(p, env, seed) for p in ("validation", "test"))
    validation = sorted(val_dir.glob("*/*.csv"))
    if not validation:
        raise PieceError(
            f"no metric tables of {env} seed {seed} under {study / metric_dir(env, seed)} "
            f"(evaluation: full) nor {val_dir} (evaluation: two_phase)"
        )
    test = {p.stem: p for p in sorted(test_dir.glob("*.csv"))}
    if not test:
        raise PieceError(
            f"{env} seed {seed} has validation tables under {val_dir} but no test tables under "
            f"{test_dir}: its test phase has not run"
        )
    val_by_method: dict[str, list[Path]] = {}
    for path in validation:
        val_by_method.setdefault(path.parent.name, []).append(path)
    by_method = {m: [*paths, test[m]] for m, paths in val_by_method.items() if m in test}
    incomplete = {m: "test" for m in val_by_method if m not in test}
    incomplete.update({m: "validation" for m in test if m not in val_by_method})
    return RerunTables("two_phase", by_method, dict(sorted(incomplete.items())))


def read_tables(paths: Iterable[Path]) -> pd.DataFrame:
    """The metric tables at ``paths``, validated, refusing a cut or non-finite one (named)."""
    frames = []
    for path in paths:
        data = Path(path).read_bytes()
        if not data.endswith(b"\n"):
            raise ArtifactError(f"{path}: does not end with a line break (cut short)")
        try:
            frame = validate(
                read_csv(path), all_columns=True, one_config=False, drop_selection_split=False
            )
        except ValueError as err:
            raise ArtifactError(f"{path}: {err}") from None
        frames.append(frame)
    if not frames:
        raise PieceError("no metric tables given")
    return pd.concat(frames, ignore_index=True)


def cross_seed_selection(frame: pd.DataFrame, seeds: list[int]) -> dict[str, dict[str, Any]]:
    """The study's selection rule on one environment's validation rows.

    Per method, the (config, calibration) candidate with the lowest validation NLL averaged
    over ``seeds``, configurations in table order and calibrations in
    :data:`pnc.studies.mujoco.results.CALIBRATIONS` order, ties and non-finite values resolved by
    :func:`pnc.methods.selection_rule.select_candidate`: the rule of
    :func:`pnc.studies.mujoco.selection.select`, which ``tests/test_verify_piece.py`` checks it equals.

    Returns:
        ``{method: {"choice": (config, calibration), "candidates": {(config, calibration):
        seed-mean validation NLL}}}``.

    Raises:
        PieceError: a candidate lacks the validation NLL of a seed.
    """
    val = frame[(frame["split"] == SELECTION_SPLIT) & (frame["metric"] == SELECTION_METRIC)]
    out: dict[str, dict[str, Any]] = {}
    for method, group in val.groupby("method", sort=False):
        present = set(zip(group["config"], group["calibration"], strict=True))
        order = [
            (c, k)
            for c in dict.fromkeys(group["config"])
            for k in CALIBRATIONS
            if (c, k) in present
        ]
        candidates = {}
        for config, calibration in order:
            rows = group[(group["config"] == config) & (group["calibration"] == calibration)]
            if sorted(int(s) for s in rows["seed"]) != sorted(seeds):
                raise PieceError(
                    f"{method} {config} ({calibration}): validation NLL of seeds "
                    f"{sorted(int(s) for s in rows['seed'])}, expected {sorted(seeds)}"
                )
            candidates[(config, calibration)] = float(np.mean(rows["value"].to_numpy(np.float64)))
        out[str(method)] = {"choice": select_candidate(candidates), "candidates": candidates}
    return out


def stored_seeds(store: str | Path, env: str) -> list[int]:
    """The seeds of ``env`` whose piece a store holds (from its manifests), sorted."""
    manifests = Path(store) / MANIFESTS / env
    found = sorted(int(p.stem.removeprefix("seed")) for p in manifests.glob("seed*.json"))
    if not found:
        raise PieceError(f"no stored piece of {env} in {Path(store) / MANIFESTS / env}")
    return found


def compare_bytes(study: str | Path, store: str | Path, env: str, seed: int) -> dict[str, Any]:
    """Each stored metric table of (env, seed) against the re-run's file of the same path.

    Returns:
        ``{"identical": [paths], "different": [paths], "missing": [paths]}`` (paths relative to
        the study), with ``"extra"``: the re-run's tables the store does not have.
    """
    study, store = Path(study), Path(store)
    stored = {p.relative_to(store).as_posix() for p in _tables(store, env, seed)}
    rerun = {p.relative_to(study).as_posix() for p in _tables(study, env, seed)}
    out: dict[str, list[str]] = {"identical": [], "different": [], "missing": []}
    for rel in sorted(stored):
        if rel not in rerun:
            out["missing"].append(rel)
        elif file_sha256(study / rel) == file_sha256(store / rel):
            out["identical"].append(rel)
        else:
            out["different"].append(rel)
    out["extra"] = sorted(rerun - stored)
    return out


def compare_values(
    stored: pd.DataFrame,
    study: str | Path,
    tables: RerunTables,
    seed: int,
    frames: Mapping[Path, pd.DataFrame],
) -> dict[str, Any]:
    """A two-phase re-run's tables against the stored piece of the same seed, value by value.

    The stored pieces hold every configuration on every split in the ``full`` layout, so the files
    cannot be compared; each row of a re-run table (frontier-sample rows aside) is looked up by
    (method, config, calibration, split, metric) among the stored seed's rows and its value
    compared exactly (both written in the same format).

    Args:
        stored: metric rows of the store (any seeds; ``seed``'s are used).
        study: the re-run's study directory.
        tables: its :func:`rerun_tables` (``two_phase``).
        seed: the piece's seed.
        frames: ``tables``' tables as read (:func:`read_tables`), by path.

    Returns:
        Like :func:`compare_bytes`, paths relative to the study: ``identical`` (every row equals
        the stored one), ``different`` (a value differs or a row has no stored counterpart),
        ``missing`` (the stored methods the re-run has no tables of, named by their validation
        folder) and ``extra`` (methods the store does not have).
    """
    study = Path(study)
    mine = stored[stored["seed"] == seed].set_index(ROW_KEY)["value"]
    val_dir = phase_dir("validation", str(stored["env"].iloc[0]), seed)
    out: dict[str, list[str]] = {"identical": [], "different": [], "missing": [], "extra": []}
    stored_methods = set(mine.index.get_level_values("method"))
    for method, paths in tables.by_method.items():
        if method not in stored_methods:
            out["extra"].append(f"{val_dir}/{method}")
            continue
        for path in paths:
            rows = frames[path]
            rows = rows[~rows["split"].isin(SAMPLED_SPLITS)].set_index(ROW_KEY)["value"]
            theirs = mine.reindex(rows.index)
            same = bool(np.array_equal(rows.to_numpy(), theirs.to_numpy()))
            out["identical" if same else "different"].append(path.relative_to(study).as_posix())
    for method in sorted(stored_methods - set(tables.by_method)):
        out["missing"].append(f"{val_dir}/{method}")
    return out


def _val_nll(frame: pd.DataFrame, method: str, candidate: tuple[str, str]) -> pd.Series:
    """Validation NLL of one candidate per seed (indexed by seed)."""
    rows = frame[
        (frame["method"] == method)
        & (frame["config"] == candidate[0])
        & (frame["calibration"] == candidate[1])
        & (frame["split"] == SELECTION_SPLIT)
        & (frame["metric"] == SELECTION_METRIC)
    ]
    return rows.set_index("seed")["value"].astype(np.float64).sort_index()


def compare_selection(
    stored: pd.DataFrame,
    rerun: pd.DataFrame,
    env: str,
    seed: int,
    seeds: list[int],
    alpha: float = ALPHA,
) -> dict[str, dict[str, Any]]:
    """The cross-seed selection with the stored seed's tables, and with the re-run's in their place.

    A selection that moves is a *near tie* when, on the stored seeds, the re-run's choice was
    already indistinguishable from the stored one: its seed-mean validation NLL exceeds the
    stored choice's by no more than ``t_{n-1, 1 - alpha/2}`` standard errors of the per-seed
    differences. Between two candidates that close a re-run may choose either; a move to a
    candidate the stored seeds rank clearly worse is a finding.

    Args:
        stored: the stored seeds' metric rows of ``env`` (every seed of ``seeds``).
        rerun: the re-run's metric rows of (env, seed).

    Returns:
        ``{method: {"stored": [config, calibration], "rerun": [config, calibration], "same":
        bool, "val_nll_gap": float, "gap_se": float, "near_tie": bool}}``; the gap is how much
        higher (worse) the stored choice's seed-mean validation NLL is than the re-run's choice,
        with the re-run in place (0 when the same); ``stored_gap`` and ``stored_gap_se``: how much
        worse the re-run's choice is than the stored one on the stored seeds, and its standard
        error.
    """
    from scipy import stats  # imported where used, as in pnc.report.stats

    swapped = pd.concat([stored[stored["seed"] != seed], rerun])
    before = cross_seed_selection(stored, seeds)
    after = cross_seed_selection(swapped, seeds)
    limit = float(stats.t.ppf(1 - alpha / 2, df=max(len(seeds) - 1, 1)))
    out: dict[str, dict[str, Any]] = {}
    for method, rec in before.items():
        new = after.get(method)
        if new is None:
            raise PieceError(f"{env} seed {seed}: the re-run has no validation rows of {method}")
        old, chosen = rec["choice"], new["choice"]
        diff = _val_nll(stored, method, chosen) - _val_nll(stored, method, old)
        se = float(diff.std(ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else 0.0
        out[method] = {
            "stored": list(old),
            "rerun": list(chosen),
            "same": old == chosen,
            "val_nll_gap": float(new["candidates"][old] - new["candidates"][chosen]),
            "stored_gap": float(diff.mean()),
            "stored_gap_se": se,
            "near_tie": old == chosen or float(diff.mean()) <= limit * se,
        }
    return out


def compare_metrics(
    stored: pd.DataFrame,
    rerun: pd.DataFrame,
    seed: int,
    selected: Mapping[str, tuple[str, str]] | Iterable[tuple[str, str, str]],
    alpha: float = ALPHA,
) -> pd.DataFrame:
    """Every (split, metric) row of the given candidates against the stored seeds.

    Args:
        stored: the stored seeds' metric rows of one environment.
        rerun: the re-run's metric rows of (env, seed).
        seed: the re-run's seed (its stored value is reported beside, ``stored_same_seed``).
        selected: the candidates to check: ``{method: (config, calibration)}`` (each method's
            selected one) or ``(method, config, calibration)`` triples.
        alpha: family-wise level over the rows checked.

    Returns:
        One row per checked (method, config, calibration, split, metric) with ``rerun``,
        ``stored_same_seed``, ``mean``, ``sd``, ``n_seeds``, ``t``, ``limit`` and ``within``;
        sorted by ``|t|``, largest first.

    Raises:
        PieceError: a selected candidate has no rows in the re-run, or a row of the re-run has
            no stored values.
    """
    if isinstance(selected, Mapping):
        selected = [(m, c, k) for m, (c, k) in selected.items()]
    rows = []
    for method, config, calibration in selected:
        sel = lambda f, m=method, c=config, k=calibration: f[
            (f["method"] == m) & (f["config"] == c) & (f["calibration"] == k)
        ]
        mine = sel(rerun)
        if mine.empty:
            raise PieceError(f"the re-run has no rows of {method} {config} ({calibration})")
        theirs = sel(stored)
        for (split, metric), group in mine.groupby(["split", "metric"], sort=False):
            ref = theirs[(theirs["split"] == split) & (theirs["metric"] == metric)]
            if ref.empty:
                raise PieceError(f"no stored values of {method} {config} {split} {metric}")
            values = ref["value"].to_numpy(np.float64)
            same = ref.loc[ref["seed"] == seed, "value"].to_numpy(np.float64)
            rows.append(
                {
                    "method": method,
                    "config": config,
                    "calibration": calibration,
                    "split": split,
                    "metric": metric,
                    "rerun": float(group["value"].iloc[0]),
                    "stored_same_seed": float(same[0]) if same.size else math.nan,
                    "mean": float(values.mean()),
                    "sd": float(values.std(ddof=1)) if values.size > 1 else 0.0,
                    "n_seeds": int(values.size),
                }
            )
    table = pd.DataFrame(rows)
    if table.empty:
        raise PieceError("no rows to check")
    from scipy import stats

    dof = max(int(table["n_seeds"].min()) - 1, 1)
    quantile = float(stats.t.ppf(1 - alpha / (2 * len(table)), df=dof))
    scale = (table["sd"] * np.sqrt(1 + 1 / table["n_seeds"])).to_numpy()
    dev = (table["rerun"] - table["mean"]).to_numpy()
    equal = np.abs(dev) <= ZERO_SPREAD_RTOL * np.maximum(1.0, table["mean"].abs().to_numpy())
    with np.errstate(divide="ignore", invalid="ignore"):
        spread_t = dev / scale
    table["t"] = np.where(scale > 0, spread_t, np.where(equal, 0.0, np.copysign(np.inf, dev)))
    table["limit"] = quantile
    table["within"] = np.abs(table["t"]) <= quantile
    order = np.argsort(-np.abs(table["t"].to_numpy()), kind="stable")
    return table.iloc[order].reset_index(drop=True)


def verify_piece(
    study: str | Path,
    store: str | Path,
    env: str,
    seed: int,
    alpha: float = ALPHA,
    partial: bool = False,
) -> dict[str, Any]:
    """Compare the re-run piece of (env, seed) in ``study`` with the stored reference in ``store``.

    Args:
        study: the re-run's study directory, run with either evaluation mode
            (:func:`rerun_tables`).
        store: a pieces store holding every seed of ``env`` (``docs/results/offline/pieces``).
        env, seed: the piece.
        alpha: family-wise level of the metric check.
        partial: check only the methods whose tables the re-run has (the others are listed in
            ``missing_methods``); without it a re-run lacking a stored method is refused.

    Returns:
        A JSON-ready record: ``layout`` (the re-run's evaluation mode), ``bytes``
        (:func:`compare_bytes`; :func:`compare_values` for ``two_phase``), ``byte_identical``,
        ``selection`` (:func:`compare_selection`), ``selection_same``, ``metrics`` (the rows of
        :func:`compare_metrics`: each method's stored choice, or with ``two_phase`` every
        candidate the re-run scored on the test splits), ``unchecked_choices`` (``two_phase``:
        the methods whose stored choice the re-run did not score on the test splits, so that
        only its validation rows enter the selection), ``within_spread``, ``largest`` (the row
        of largest ``|t|``) and ``verdict``: ``"byte-identical"`` (``two_phase``: ``"identical
        values"``), ``"within the seeds' spread"`` or ``"outside the seeds' spread"``.

    Raises:
        PieceError: the store lacks the seed, or the re-run lacks tables.
        FileNotFoundError, pnc.runtime.io.ArtifactError: a table is missing or malformed (named).
    """
    study, store = Path(study), Path(store)
    seeds = stored_seeds(store, env)
    if seed not in seeds:
        raise PieceError(f"the store {store} has no piece of {env} seed {seed} (it has {seeds})")
    tables = rerun_tables(study, env, seed)
    stored = read_tables(p for s in seeds for p in _tables(store, env, s))
    frames = {path: read_tables([path]) for path in tables.paths}  # each table read once
    rerun = pd.concat(frames.values(), ignore_index=True) if frames else None
    if tables.layout == "full":
        byte_report = compare_bytes(study, store, env, seed)
        # a method is checked only when every stored table of it was re-run
        missing_methods = sorted({Path(rel).parts[-2] for rel in byte_report["missing"]})
    else:
        byte_report = compare_values(stored, study, tables, seed, frames)
        missing_methods = sorted({Path(rel).name for rel in byte_report["missing"]})
    if missing_methods and not partial:
        where = byte_report["missing"][0]
        incomplete = "".join(
            f"; {m} has no {phase} tables" for m, phase in tables.incomplete.items()
        )
        raise PieceError(
            f"the re-run of {env} seed {seed} lacks the metric tables of {missing_methods} "
            f"(e.g. {where}){incomplete}; re-run them, or check the rest with --partial"
        )
    if rerun is None:
        raise PieceError(f"the re-run of {env} seed {seed} has no method with both phases' tables")
    have = set(rerun["method"]) - set(missing_methods)
    rerun = rerun[rerun["method"].isin(have) & ~rerun["split"].isin(SAMPLED_SPLITS)]
    stored = stored[stored["method"].isin(have)]
    selection = compare_selection(stored, rerun, env, seed, seeds, alpha)
    unchecked: list[str] = []
    if tables.layout == "full":
        candidates: Any = {m: tuple(rec["stored"]) for m, rec in selection.items()}
    else:
        tested = rerun[rerun["split"] != SELECTION_SPLIT]
        candidates = list(dict.fromkeys(zip(*(tested[c] for c in ROW_KEY[:3]), strict=True)))
        scored = set(candidates)
        unchecked = [m for m, rec in selection.items() if (m, *rec["stored"]) not in scored]
    metrics = compare_metrics(stored, rerun, seed, candidates, alpha)
    identical = not (byte_report["different"] or byte_report["missing"])
    within = bool(metrics["within"].all())
    same = all(rec["near_tie"] for rec in selection.values())
    if not (within and same):
        verdict = "outside the seeds' spread"
    elif missing_methods:
        verdict = f"within the seeds' spread (partial: {len(missing_methods)} method(s) not re-run)"
    elif identical:
        verdict = "byte-identical" if tables.layout == "full" else "identical values"
    else:
        verdict = "within the seeds' spread"
    records = metrics.to_dict(orient="records")
    return {
        "env": env,
        "seed": seed,
        "layout": tables.layout,
        "stored_seeds": seeds,
        "alpha": alpha,
        "bytes": byte_report,
        "byte_identical": identical,
        "missing_methods": missing_methods,
        "selection": selection,
        "selection_same": same,
        "unchecked_choices": unchecked,
        "metrics": records,
        "rows_checked": len(records),
        "rows_outside": int((~metrics["within"]).sum()),
        "within_spread": within,
        "largest": records[0],
        "verdict": verdict,
    }


def summary(report: dict[str, Any], rows: int = 5) -> Iterable[str]:
    """Lines for a person: the verdict, the byte count, selection changes, the largest |t| rows."""
    b = report["bytes"]
    n = len(b["identical"]) + len(b["different"]) + len(b["missing"])
    yield f"{report['env']} seed {report['seed']}: {report['verdict']}"
    what = (
        "metric tables byte-identical"
        if report["layout"] == "full"
        else "tables (two-phase evaluation) whose every value equals the stored piece's"
    )
    yield f"  {what}: {len(b['identical'])} of {n}" + (
        f" (missing: {', '.join(b['missing'])})" if b["missing"] else ""
    )
    if report["missing_methods"]:
        yield f"  not re-run, not checked: {', '.join(report['missing_methods'])}"
    if report["unchecked_choices"]:
        yield (
            "  the stored choice not scored on the test splits by the re-run (its validation rows"
            f" enter the selection; the candidates it scored are checked): "
            f"{', '.join(report['unchecked_choices'])}"
        )
    for method, rec in report["selection"].items():
        if not rec["same"]:
            yield (
                f"  selection of {method} moves: {'|'.join(rec['stored'])} -> "
                f"{'|'.join(rec['rerun'])} (stored choice worse by {rec['val_nll_gap']:.4g} "
                f"seed-mean validation NLL; on the stored seeds the new choice is worse by "
                f"{rec['stored_gap']:.4g} +- {rec['stored_gap_se']:.3g}: "
                + ("a near tie)" if rec["near_tie"] else "beyond the seeds' noise)")
            )
    yield (
        f"  {report['rows_checked']} "
        + ("selected-candidate" if report["layout"] == "full" else "test-phase candidates'")
        + f" rows against {len(report['stored_seeds'])} "
        f"stored seeds: {report['rows_outside']} outside |t| <= {report['metrics'][0]['limit']:.3g} "
        f"(family-wise alpha {report['alpha']})"
    )
    for r in report["metrics"][:rows]:
        yield (
            f"    {r['method']} ({r['calibration']}) {r['split']} {r['metric']}: re-run {r['rerun']:.5g}, stored seed "
            f"{r['stored_same_seed']:.5g}, seeds {r['mean']:.5g} +- {r['sd']:.3g}, t {r['t']:.2f}"
        )
