"""Hyperparameter selection and the study's results tables (paper, Appendix C).

Every configuration is evaluated in each post-hoc calibration variant (``raw`` and ``vcal``, see
:mod:`pnc.studies.mujoco.calibration`); the candidates of an (env, method) are its (config, calibration)
pairs, and the pair with the lowest validation NLL, averaged over seeds, is selected; the shifted
splits play no part. Candidate order is grid order of the configurations, then
:data:`pnc.studies.mujoco.results.CALIBRATIONS` (``raw`` before ``vcal``). Ties and non-finite values
(:func:`pnc.methods.selection_rule.select_candidate`): a candidate whose mean validation NLL is ``nan`` or
``inf`` is never preferred over a finite one; among equal values the first candidate wins; if no
candidate has a finite value nothing is selected (:class:`pnc.methods.selection_rule.
NoFiniteCandidateError`, naming the environment, the method and every candidate), so the record's
``finite`` is always true. The record is strict JSON: a non-finite NLL is written as ``null``.
(The workflow's metric tables are finite by construction, see below, so there every candidate is
finite.)

The selection record (``selection.json``) is
``{env: {method: {"config", "calibration", "val_nll", "finite", "n_seeds", "candidates"}}}`` with
``candidates`` mapping ``"config|calibration"`` (:func:`candidate_key`, e.g.
``"scale=1.0|vcal"``) to the seed-mean validation NLL, in candidate order.

Tables (long format, one row per value):

- ``all_configs``: ``env, method, config, calibration, seed, split, metric, value, data_source,
  selected`` for every configuration and variant evaluated, splits ``val``, ``id``, ``near``,
  (``mid``), ``far``; ``selected`` marks the rows of the selected (config, calibration) pair (the
  two-phase evaluation, :mod:`pnc.studies.mujoco.phases`: every configuration's ``val`` and frontier-sample
  rows, ``id_sample`` and ``far_sample``, and the test rows of the configurations its test plan
  names);
- ``results``: the same without ``selected``, for the selected pair of each (env, method) only,
  splits ``id``, ``near``, (``mid``), ``far``.

Columns, splits and metrics are those of :mod:`pnc.studies.mujoco.results`; every table read here is
checked with :func:`pnc.studies.mujoco.results_table.validate`.

Integrity of the inputs (:func:`select_and_write`, :func:`concatenate_outputs`): every file is named
in the error when it is unreadable, truncated (a CSV not ending in a line break) or malformed, with
the ``snakemake --forcerun`` command that rebuilds it. Metric tables must be complete: given the
methods' grid tables (:func:`pnc.studies.mujoco.grid.read_tables`), the calibration variants and the seeds, every (config, calibration,
split, metric) row of every (env, seed, method) is expected (splits ``val``, ``id``, ``near``,
``far``, and ``mid`` where the environment has it, :func:`pnc.studies.mujoco.data.env_spec`; for environments
unknown to :mod:`pnc.studies.mujoco.data`, where any configuration of the (env, seed) has ``mid`` rows); missing
rows fail the stage naming them and the table they belong in, and so do rows of configurations
or variants outside the grid. Without the grid the expectation is derived from the tables (every
configuration and variant seen for an (env, method) in every seed, with every split and metric).
Metric tables never hold non-finite values (evaluation jobs fail on them,
:class:`pnc.studies.mujoco.stages.NonFiniteMetricError`), so one that does is refused as stale or edited.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pnc.methods.selection_rule import NoFiniteCandidateError, finite_or_none, select_candidate
from pnc.runtime.io import (
    ArtifactError,
    atomic_path,
    read_json,
    rebuild_hint,
    write_csv,
    write_json,
)
from pnc.studies.mujoco.results import (
    CALIBRATIONS,
    EVAL_SPLITS,
    MEASUREMENT_KEY,
    REPORTED_SPLITS,
    RESULT_COLUMNS,
    SCORED_SPLITS,
    SELECTED_COLUMN,
    SELECTION_METRIC,
    SELECTION_SPLIT,
    SHIFT_METRICS,
    SHIFTED_SPLITS,
    SPLIT_METRICS,
)
from pnc.studies.mujoco.results_table import (
    ResultsError,
    read_csv,
    validate,
)

#: :func:`pnc.studies.mujoco.results_table.validate` options for the evaluation jobs' metric tables: every
#: column, every configuration, the selection split kept, ``nan``/``inf`` values allowed.
METRIC_TABLE_CHECKS = {
    "all_columns": True,
    "one_config": False,
    "finite": False,
    "drop_selection_split": False,
}


#: Separates config and calibration in the candidate keys of the selection record.
CANDIDATE_SEPARATOR = "|"


def candidate_key(config: str, calibration: str) -> str:
    """``"config|calibration"``, the key of a candidate in the selection record."""
    return f"{config}{CANDIDATE_SEPARATOR}{calibration}"


def candidate_order(group: pd.DataFrame) -> list[tuple[str, str]]:
    """The (config, calibration) pairs of one (env, method), in candidate order.

    Configurations in grid order (first appearance in the table), then each configuration's
    variants in :data:`pnc.studies.mujoco.results.CALIBRATIONS` order.
    """
    configs = list(dict.fromkeys(group["config"]))
    present = set(zip(group["config"], group["calibration"], strict=True))
    return [(c, k) for c in configs for k in CALIBRATIONS if (c, k) in present]


def select(frame: pd.DataFrame, seeds: Iterable[int] | None = None) -> dict:
    """Choose one (config, calibration) pair per (env, method) by mean validation NLL over seeds.

    Args:
        frame: long metric table with :data:`pnc.studies.mujoco.results.RESULT_COLUMNS`.
        seeds: the seeds every candidate must have; default: all seeds in ``frame``.

    Returns:
        ``{env: {method: {"config", "calibration", "val_nll", "finite", "n_seeds",
        "candidates": {"config|calibration": val_nll}}}}`` (strict JSON; ``val_nll`` values are
        floats, ``None`` where not finite).

    Raises:
        pnc.studies.mujoco.results_table.ResultsError: if the table is malformed (see
            :func:`pnc.studies.mujoco.results_table.validate`).
        ValueError: if a candidate lacks the validation NLL of a seed.
    """
    frame = validate(frame, **METRIC_TABLE_CHECKS)
    seeds = sorted({int(s) for s in (frame["seed"] if seeds is None else seeds)})
    val = frame[(frame["split"] == SELECTION_SPLIT) & (frame["metric"] == SELECTION_METRIC)]
    out: dict = {}
    for (env, method), group in frame.groupby(["env", "method"], sort=False):
        vals = val[(val["env"] == env) & (val["method"] == method)]
        candidates: dict[tuple[str, str], float] = {}
        for config, calibration in candidate_order(group):
            rows = vals[(vals["config"] == config) & (vals["calibration"] == calibration)]
            have = sorted(int(s) for s in rows["seed"])
            if have != seeds:
                raise ValueError(
                    f"{env}/{method}/{config} ({calibration}): validation NLL for seeds {have}, "
                    f"expected {seeds}"
                )
            candidates[(config, calibration)] = float(np.mean(rows["value"].to_numpy(np.float64)))
        keys = {candidate_key(*c): c for c in candidates}  # named as the record names them
        try:
            best = keys[select_candidate({k: candidates[c] for k, c in keys.items()})]
        except NoFiniteCandidateError as err:
            raise NoFiniteCandidateError(
                f"{env}/{method}: seed-mean validation NLL: {err}"
            ) from None
        out.setdefault(str(env), {})[str(method)] = {
            "config": best[0],
            "calibration": best[1],
            "val_nll": finite_or_none(candidates[best]),
            "finite": True,  # select_candidate refuses when no candidate is finite
            "n_seeds": len(seeds),
            "candidates": {candidate_key(*c): finite_or_none(v) for c, v in candidates.items()},
        }
    return out


def apply_selection(frame: pd.DataFrame, selection: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Mark selected rows and extract the results table.

    Args:
        frame: validated metric table (every column of :data:`pnc.studies.mujoco.results.RESULT_COLUMNS`).
        selection: the record of :func:`select`.

    Returns:
        ``(all_configs, results)`` as described in the module docstring.
    """
    chosen = {
        (e, m): (rec["config"], rec["calibration"])
        for e, by_m in selection.items()
        for m, rec in by_m.items()
    }
    keys = list(zip(frame["env"], frame["method"], strict=True))
    missing = sorted({k for k in keys if k not in chosen})
    if missing:
        raise ValueError(f"no selection for (env, method) {missing}")
    all_configs = frame.loc[:, list(RESULT_COLUMNS)].copy()
    pairs = zip(frame["config"], frame["calibration"], strict=True)
    all_configs[SELECTED_COLUMN] = [chosen[k] == p for k, p in zip(keys, pairs, strict=True)]
    results = all_configs[all_configs[SELECTED_COLUMN] & all_configs["split"].isin(REPORTED_SPLITS)]
    results = results.drop(columns=SELECTED_COLUMN).reset_index(drop=True)
    return all_configs.reset_index(drop=True), results


#: The metric table column recording which file a row came from (never written).
_SOURCE = "_source"


def read_table(path: str | Path, **checks: bool | None) -> pd.DataFrame:
    """Read one CSV written by this study and validate it, naming the file on any failure.

    Args:
        path: the table.
        checks: :func:`pnc.studies.mujoco.results_table.validate` options.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        pnc.runtime.io.ArtifactError: the file is unreadable, does not end with a line break (every table
            written here does, so it was cut) or does not validate; the message names the file and
            the command that rebuilds it.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"table not found: {path}; {rebuild_hint(path)}")
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        if size:
            f.seek(-1, 2)
        last = f.read(1)
    if last != b"\n":
        raise ArtifactError(
            f"{path} is truncated ({'empty' if not size else 'no line break at the end'}); "
            f"{rebuild_hint(path)}"
        )
    try:
        return validate(read_csv(path), **checks)
    except (ResultsError, ValueError, UnicodeDecodeError, pd.errors.ParserError) as err:
        raise ArtifactError(f"{path}: {err}; {rebuild_hint(path)}") from err


def read_metric_tables(paths: Iterable[str | Path]) -> pd.DataFrame:
    """Read and validate the evaluation jobs' metric tables, refusing non-finite values.

    Returns:
        The validated concatenation with an extra column ``_source`` (the file of each row).

    Raises:
        pnc.runtime.io.ArtifactError: a table is unreadable, truncated, malformed or holds a non-finite
            value (named with its file).
        pnc.studies.mujoco.results_table.ResultsError: the tables together are malformed (e.g. duplicated rows).
    """
    frames = []
    for path in paths:
        frame = read_table(path, **METRIC_TABLE_CHECKS)
        bad = ~np.isfinite(frame["value"].to_numpy(np.float64))
        if bad.any():
            first = frame[bad].iloc[0]
            raise ArtifactError(
                f"{path}: {int(bad.sum())} non-finite value(s), e.g. config {first['config']!r}, "
                f"calibration {first['calibration']!r}, split {first['split']!r}, metric "
                f"{first['metric']!r}; evaluation jobs fail on non-finite metrics, so this table "
                f"is stale or was edited; {rebuild_hint(path)}"
            )
        frames.append(frame.assign(**{_SOURCE: str(path)}))
    if not frames:
        raise ValueError("no metric tables given")
    return validate(pd.concat(frames, ignore_index=True), **METRIC_TABLE_CHECKS)


def split_metrics(splits: Iterable[str]) -> list[tuple[str, str]]:
    """The (split, metric) rows an evaluation writes for ``splits`` (see :mod:`pnc.studies.mujoco.evaluate`)."""
    chosen = set(splits)
    out = []
    for split in SCORED_SPLITS:
        if split in chosen:
            out += [(split, m) for m in SPLIT_METRICS]
            if split in SHIFTED_SPLITS:
                out += [(split, m) for m in SHIFT_METRICS]
    return out


def has_mid(env: str, splits_seen: Iterable[str]) -> bool:
    """Whether ``env`` has a Mid split: its environment spec says so; an environment the package
    does not know has one when ``splits_seen`` (the splits its tables hold) names it."""
    from pnc.studies.mujoco.data.envs import env_spec
    from pnc.studies.mujoco.data.errors import UnknownEnvironmentError

    try:
        return env_spec(env).has_mid
    except UnknownEnvironmentError:
        return "mid" in set(splits_seen)


def _table_name(
    frame: pd.DataFrame,
    paths: Sequence[str],
    env: str,
    seed: int,
    method: str,
    run: str | None,
    configs: Iterable[str],
) -> str:
    """The table that should hold rows of (env, seed, method, run): by path, else by content."""
    if run is not None:
        suffix = f"{env}/seed{seed}/{method}/{run}.csv"
        for path in paths:
            if Path(path).as_posix().endswith("/" + suffix) or Path(path).as_posix() == suffix:
                return str(path)
    rows = frame[
        (frame["env"] == env)
        & (frame["seed"] == seed)
        & (frame["method"] == method)
        & frame["config"].isin(list(configs))
    ]
    files = list(dict.fromkeys(rows[_SOURCE]))
    if files:
        return ", ".join(files)
    if run is not None:
        return f"results/metrics/{env}/seed{seed}/{method}/{run}.csv (not among the inputs)"
    return f"the metric table of {env} seed {seed} {method} (none among the inputs holds it)"


def check_complete(
    frame: pd.DataFrame,
    *,
    seeds: Iterable[int],
    methods: Mapping[str, Any] | None = None,
    calibrations: Sequence[str] | None = None,
    envs: Iterable[str] | None = None,
    paths: Sequence[str] = (),
    splits: Sequence[str] = EVAL_SPLITS,
) -> None:
    """Check that the metric tables hold every expected row and no unexpected configuration.

    Args:
        frame: :func:`read_metric_tables` output (with ``_source``).
        seeds: the seeds of the study.
        methods: ``{method id: grid table}`` (:func:`pnc.studies.mujoco.grid.read_tables`): every
            configuration and its run, by id; ``None``: the configurations seen in the tables,
            per (env, method).
        calibrations: the variants every configuration is scored in; ``None``: those seen per
            (env, method) (all of :data:`~pnc.studies.mujoco.results.CALIBRATIONS` with ``methods``).
        envs: the environments; default: those in ``frame``.
        paths: the input tables (to name the one that should hold missing rows).
        splits: the splits every configuration is scored on (``mid`` only where the environment
            has it): every evaluation split (the full evaluation) or
            :data:`pnc.studies.mujoco.phases.VALIDATION_SPLITS` (the two-phase evaluation's first phase).

    Raises:
        pnc.runtime.io.ArtifactError: rows are missing (named per table, configuration and variant) or
            configurations/variants are not in the grid.
    """
    seeds = sorted({int(s) for s in seeds})
    envs = list(dict.fromkeys([*(envs or []), *frame["env"]]))
    if methods is not None:
        plan = {
            m: [(cid, rec["run_id"]) for cid, rec in table.items()] for m, table in methods.items()
        }
    variants = None if calibrations is None and methods is None else calibrations or CALIBRATIONS
    problems: list[str] = []
    for env in envs:
        sub_env = frame[frame["env"] == env]
        if methods is None:
            plan = {
                str(m): [(c, None) for c in dict.fromkeys(g["config"])]
                for m, g in sub_env.groupby("method", sort=False)
            }
        # the variants expected per method: given, else those seen for the (env, method)
        kinds_of = {
            method: variants
            if variants is not None
            else [
                k
                for k in CALIBRATIONS
                if k in set(sub_env.loc[sub_env.method == method, "calibration"])
            ]
            for method in plan
        }
        known = {(m, c, k) for m, pts in plan.items() for c, _ in pts for k in kinds_of[m]}
        for seed in seeds:
            sub = sub_env[sub_env["seed"] == seed]
            rows = split_metrics(s for s in splits if s != "mid" or has_mid(env, sub["split"]))
            present = set(
                zip(
                    sub["method"],
                    sub["config"],
                    sub["calibration"],
                    sub["split"],
                    sub["metric"],
                    strict=True,
                )
            )
            for method, points in plan.items():
                kinds = kinds_of[method]
                runs = list(dict.fromkeys(r for _, r in points))
                for run in runs:
                    configs = [c for c, r in points if r == run]
                    missing = []
                    for config in configs:
                        for kind in kinds:
                            gone = [
                                f"{s}/{m}"
                                for s, m in rows
                                if (method, config, kind, s, m) not in present
                            ]
                            if len(gone) == len(rows):
                                missing.append(f"config {config!r} ({kind}): all {len(rows)} rows")
                            elif gone:
                                shown = ", ".join(gone[:6]) + (" ..." if len(gone) > 6 else "")
                                missing.append(
                                    f"config {config!r} ({kind}): {len(gone)} of {len(rows)} "
                                    f"rows ({shown})"
                                )
                    if missing:
                        table = _table_name(frame, paths, env, seed, method, run, configs)
                        more = f"; and {len(missing) - 8} more" if len(missing) > 8 else ""
                        problems.append(
                            f"{table} lacks rows of {env} seed {seed} {method}: "
                            f"{'; '.join(missing[:8])}{more}; "
                            f"{rebuild_hint(table.split(' ')[0].rstrip(','))}"
                        )
            extra = sub.loc[
                np.array(
                    [
                        (m, c, k) not in known
                        for m, c, k in zip(
                            sub["method"], sub["config"], sub["calibration"], strict=True
                        )
                    ],
                    dtype=bool,
                )
            ]
            for (method, config, kind, source), _ in extra.groupby(
                ["method", "config", "calibration", _SOURCE], sort=False
            ):
                problems.append(
                    f"{source} holds {env} seed {seed} {method} config {config!r} ({kind}), which "
                    f"is not in the grid or calibration variants; {rebuild_hint(source)}"
                )
    if problems:
        raise ArtifactError("incomplete metric tables:\n  " + "\n  ".join(problems))


def select_and_write(
    tables: Iterable[str],
    *,
    seeds: Iterable[int],
    all_configs_path: str,
    results_path: str,
    selection_path: str,
    methods: Mapping[str, Any] | None = None,
    calibrations: Sequence[str] | None = None,
    envs: Iterable[str] | None = None,
) -> dict:
    """Read per-job metric tables, check them, select, and write the three outputs atomically.

    Args:
        tables: the evaluation jobs' metric CSVs.
        seeds: the seeds every configuration must have.
        methods, calibrations, envs: the expectation of :func:`check_complete` (the methods'
            grid tables, the config's ``variance_calibration`` list, the environments).

    Returns:
        The selection record (see :func:`select`).

    Raises:
        pnc.runtime.io.ArtifactError: a table is unreadable, truncated, incomplete or holds non-finite
            values (the message names the file and the rows).
    """
    tables = [str(t) for t in tables]
    frame = read_metric_tables(tables)
    check_complete(
        frame, seeds=seeds, methods=methods, calibrations=calibrations, envs=envs, paths=tables
    )
    frame = frame.drop(columns=_SOURCE)
    selection = select(frame, seeds=seeds)
    all_configs, results = apply_selection(frame, selection)
    write_csv(all_configs, all_configs_path)
    write_csv(results, results_path)
    with atomic_path(selection_path) as tmp:
        write_json(tmp, selection)
    return selection


def concatenate_outputs(
    all_configs: Iterable[str], results: Iterable[str], selections: Iterable[str], out_dir: str
) -> dict[str, int]:
    """Join per-environment outputs into ``out_dir/{all_configs.csv, results.csv, selection.json}``.

    Raises:
        ValueError: if two inputs cover the same environment.
        pnc.runtime.io.ArtifactError: an input is unreadable, truncated or malformed (named), or the
            tables and selection records disagree (rows of the selected pair missing from
            ``results``, candidates missing from ``all_configs``).

    Returns:
        Row counts of the two tables and the number of environments.
    """
    out = Path(out_dir)
    merged: dict = {}
    for path in selections:
        for env, rec in read_json(path).items():
            if env in merged:
                raise ValueError(f"environment {env} appears in more than one selection file")
            merged[env] = rec
    checks = {
        "all_configs": {
            "require_selected": True,
            "all_columns": True,
            "drop_selection_split": False,
        },
        "results": {"all_columns": True},
    }
    frames = {
        name: pd.concat(
            [read_table(path, **checks[name]) for path in paths],  # names a bad file
            ignore_index=True,
        )
        for name, paths in (("all_configs", all_configs), ("results", results))
    }
    _check_consistent(frames["all_configs"], frames["results"], merged)
    for name, frame in frames.items():
        write_csv(frame, out / f"{name}.csv")
    with atomic_path(out / "selection.json") as tmp:
        write_json(tmp, merged)
    return {
        "all_configs_rows": len(frames["all_configs"]),
        "results_rows": len(frames["results"]),
        "envs": len(merged),
    }


def _check_consistent(all_configs: pd.DataFrame, results: pd.DataFrame, selection: dict) -> None:
    """``results`` is exactly the selected non-``val`` rows of ``all_configs``, which holds the
    validation NLL of every candidate of ``selection`` in every seed."""
    full = validate(all_configs, require_selected=True, drop_selection_split=False, finite=False)
    res = validate(results, finite=False)
    key = list(MEASUREMENT_KEY)
    chosen = full[full[SELECTED_COLUMN] & full["split"].isin(REPORTED_SPLITS)]
    want = set(map(tuple, chosen[key].astype(str).to_numpy()))
    have = set(map(tuple, res[key].astype(str).to_numpy()))
    problems = []
    if want - have:
        problems.append(f"results.csv lacks {len(want - have)} selected row(s) of all_configs.csv")
    if have - want:
        problems.append(f"results.csv holds {len(have - want)} row(s) not selected in all_configs")
    val = full[(full["split"] == SELECTION_SPLIT) & (full["metric"] == SELECTION_METRIC)]
    for env, by_method in selection.items():
        for method, rec in by_method.items():
            rows = val[(val["env"] == env) & (val["method"] == method)]
            counts = {
                candidate_key(c, k): n
                for (c, k), n in rows.groupby(["config", "calibration"]).size().items()
            }
            short = [c for c in rec.get("candidates", {}) if counts.get(c, 0) < rec["n_seeds"]]
            if short:
                problems.append(
                    f"all_configs.csv lacks validation NLL rows of {env} {method} {short[:5]}"
                )
    if problems:
        raise ArtifactError(
            "per-environment outputs disagree (one was cut or is stale): "
            + "; ".join(problems)
            + "; rebuild them: snakemake --forcerun results/envs/ENV/results.csv"
        )
