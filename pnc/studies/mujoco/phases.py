"""The two-phase evaluation (config ``evaluation: two_phase``, the default).

The selection reads only the validation split, so scoring every configuration on every split (the
``full`` evaluation, :func:`pnc.studies.mujoco.stages.evaluate_run` with its defaults) spends most of the
study's arithmetic on test rows no selection or figure reads. The two-phase evaluation splits it:

1. **validation phase**, per (env, seed, method, run): every configuration is built and scored on
   :data:`VALIDATION_SPLITS`, the validation split and the frontier sample
   (:data:`pnc.studies.mujoco.results.SAMPLED_SPLITS`, at most 1,000 seeded rows of the ID and Far splits,
   read by the ID/OOD frontier figure of every configuration). Methods that store their posteriors
   (:attr:`pnc.methods.regression.contract.MethodBase.stores_posteriors`: Subspace's chains) write
   them beside the table (:func:`write_posteriors`).
2. **selection**, per env: the selection of :mod:`pnc.studies.mujoco.selection` on the validation rows, as in
   the full evaluation, and the *test plan* (:func:`plan_test_splits`): per method the configurations
   scored on the test splits, each with why (:data:`SELECTED`, :func:`sigma_reason`).
3. **test phase**, per (env, seed, method) (:func:`evaluate_test`; the workflow runs every method
   of an (env, seed) in one process, :func:`run_test_phase`): the planned configurations on
   :data:`TEST_SPLITS` (and on validation again, for the variance calibration's scale: the rows
   must equal the validation phase's, which checks that the posterior is the same). Posteriors are
   built again from the same keys (one P&C ridge group, one SWAG or Laplace build: seconds) or
   restored from the stored ones (Subspace: no chain is run again).
4. **assembly**, per env (:func:`assemble_and_write`): ``all_configs.csv`` holds every configuration's
   validation and frontier-sample rows and the test rows of the plan, in the order of the full
   evaluation's table; ``results.csv`` is the selected configurations' test rows. Both equal the
   full evaluation's rows wherever both have them (the same programs on the same inputs).

What reads which test rows (:func:`plan_test_splits`): ``results.csv`` and every table made from it, the
selected configuration of every method; Figure 3A and the mechanism table's 3A rows (and with them
the 3A claim), per sigma the configuration of P&C and of P&C without correction chosen by
validation NLL among those at that sigma (:func:`pnc.studies.mujoco.per_sigma.per_sigma_choices`); the
frontier figures, every configuration on the frontier sample. A reader that needs a test row the
plan did not score fails naming the configuration.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pnc.runtime.io import (
    ArtifactError,
    atomic_path,
    read_json,
    rebuild_hint,
    write_csv,
    write_json,
)
from pnc.studies.mujoco.grid import config_field
from pnc.studies.mujoco.per_sigma import PER_SIGMA_METHODS, per_sigma_choices, sigma_points
from pnc.studies.mujoco.results import (
    CALIBRATIONS,
    REPORTED_SPLITS,
    SAMPLED_SPLITS,
    SCORED_SPLITS,
    SELECTION_SPLIT,
)

#: The splits of the validation phase: the selection's, then the frontier sample's.
VALIDATION_SPLITS: tuple[str, ...] = (SELECTION_SPLIT, *SAMPLED_SPLITS)
#: The splits of the test phase (``mid`` where the environment has it).
TEST_SPLITS: tuple[str, ...] = REPORTED_SPLITS
#: The reason of the selected configuration in a test plan.
SELECTED = "selected"


def sigma_reason(sigma: float) -> str:
    """The reason of a per-sigma configuration in a test plan."""
    return f"Figure 3A and the mechanism table: sigma = {sigma:g}"


def plan_test_splits(
    frame: pd.DataFrame,
    selection: Mapping[str, Mapping[str, Any]],
    sigmas: Mapping[tuple[str, str], float],
) -> dict:
    """The configurations the test phase scores, per env and method, each with its reasons.

    Args:
        frame: the validation phase's rows (every configuration's validation NLL, every seed).
        selection: the selection record of ``frame`` (:func:`pnc.studies.mujoco.selection.select`).
        sigmas: ``{(method, config id): sigma}`` of :data:`PER_SIGMA_METHODS`' configurations,
            read from the grid tables (:func:`pnc.studies.mujoco.grid.config_field`).

    Returns:
        ``{env: {method: {config: [reason, ...]}}}``, configurations in grid order: the selected
        configuration (:data:`SELECTED`) and, for :data:`PER_SIGMA_METHODS`, the configuration
        chosen at each sigma (:func:`pnc.studies.mujoco.per_sigma.per_sigma_choices`, :func:`sigma_reason`).
    """
    plan: dict = {}
    for env, by_method in selection.items():
        reasons: dict[str, dict[str, list[str]]] = {
            m: {rec["config"]: [SELECTED]} for m, rec in by_method.items()
        }
        if any(m in by_method for m in PER_SIGMA_METHODS):
            for rec in per_sigma_choices(sigma_points(frame, env, sigmas)).itertuples():
                reasons[rec.method].setdefault(rec.config, []).append(sigma_reason(rec.sigma))
        plan[env] = {}
        for method, configs in reasons.items():
            order = list(dict.fromkeys(frame.loc[frame.method == method, "config"]))
            plan[env][method] = {c: configs[c] for c in sorted(configs, key=order.index)}
    return plan


# ----------------------------------------------------------------------------- stored posteriors

_INDEX = "configs"


def write_posteriors(arrays: Mapping[str, Mapping[str, np.ndarray]], path: str | Path) -> None:
    """Write each configuration's posterior arrays (:meth:`Method.posterior_arrays`) to one
    ``.npz`` atomically; none (a method built again in the test phase) writes an empty index."""
    configs = list(arrays)
    payload = {_INDEX: np.asarray(configs, dtype=str)}
    for i, config in enumerate(configs):
        for name, value in arrays[config].items():
            payload[f"{i}.{name}"] = np.asarray(value)
    buffer = io.BytesIO()
    np.savez(buffer, **payload)
    with atomic_path(path) as tmp:
        Path(tmp).write_bytes(buffer.getvalue())


def read_posteriors(path: str | Path) -> dict[str, dict[str, np.ndarray]]:
    """The arrays :func:`write_posteriors` wrote, per configuration id.

    Raises:
        pnc.runtime.io.ArtifactError: the file is missing, cut or not such a file (named, with the command
            that rebuilds it).
    """
    try:
        with np.load(path, allow_pickle=False) as data:
            configs = [str(c) for c in data[_INDEX]]
            out: dict[str, dict[str, np.ndarray]] = {c: {} for c in configs}
            for key in data.files:
                if key == _INDEX:
                    continue
                index, name = key.split(".", 1)
                out[configs[int(index)]][name] = data[key]
    except Exception as err:  # zipfile/numpy raise many types on a damaged file
        raise ArtifactError(
            f"{path}: cannot read the stored posteriors ({type(err).__name__}: {err}); "
            f"{rebuild_hint(path)}"
        ) from err
    return out


# ----------------------------------------------------------------------------- the test phase


def read_plan(path: str | Path, env: str, method: str) -> dict[str, list[str]]:
    """The test plan of ``(env, method)`` in ``path`` (:func:`plan_test_splits`).

    Raises:
        pnc.runtime.io.ArtifactError: the plan is missing, unreadable, or holds no plan of the pair (the
            selection of the environment is missing); the message names the file.
    """
    path = Path(path)
    hint = (
        "it is written by the selection of the validation phase; "
        f"rebuild it: snakemake --forcerun {path}"
    )
    if not path.is_file():
        raise ArtifactError(
            f"test plan {path} is missing: the selection of {env} has not run; {hint}"
        )
    try:
        plan = read_json(path)
    except (OSError, ValueError) as err:
        raise ArtifactError(f"{path}: cannot read the test plan ({err}); {hint}") from err
    if not isinstance(plan.get(env), dict) or not isinstance(plan[env].get(method), dict):
        raise ArtifactError(f"{path} holds no selection of {env} {method}; {hint}")
    return plan[env][method]


def _formatted(values: Iterable[float]) -> list[str]:
    """Values as the metric tables write them (:func:`pnc.runtime.io.write_csv`)."""
    return [f"{v:.10g}" for v in values]  # float_format="%.10g"


def check_same_validation(
    frame: pd.DataFrame, table: pd.DataFrame, path: str | Path, *, env: str, seed: int, method: str
) -> None:
    """The test phase's validation rows equal the validation phase's table at ``path`` as written
    (so the test phase scored the same posterior), for every configuration of ``frame``.

    Raises:
        pnc.runtime.io.ArtifactError: a row differs or is missing; the message names the configuration,
            the metric and both values.
    """
    key = ["config", "calibration", "metric"]
    mine = frame[frame.split == SELECTION_SPLIT].set_index(key)["value"]
    theirs = table[
        (table.split == SELECTION_SPLIT) & table.config.isin(set(mine.index.get_level_values(0)))
    ]
    theirs = theirs.set_index(key)["value"]
    missing = sorted(set(mine.index) - set(theirs.index))
    if missing:
        raise ArtifactError(
            f"{path} lacks the validation rows {missing[:4]} of {env} seed {seed} {method}; "
            f"{rebuild_hint(path)}"
        )
    theirs = theirs.reindex(mine.index)
    differ = [
        (k, a, b)
        for k, a, b in zip(mine.index, _formatted(mine), _formatted(theirs), strict=True)
        if a != b
    ]
    if differ:
        (config, calibration, metric), a, b = differ[0]
        raise ArtifactError(
            f"{env} seed {seed} {method}: the test phase's posterior of {config!r} gives other "
            f"validation rows than the validation phase's ({len(differ)} differ, e.g. "
            f"{calibration} {metric}: {a} here, {b} in {path}); the posterior was not rebuilt "
            "bit for bit (another machine, thread count or code than the validation phase's?); "
            f"{rebuild_hint(path)}"
        )


def evaluate_test(
    *,
    env: str,
    seed: int,
    method_id: str,
    runs_dir: str | Path,
    splits_dir: str | Path,
    table: Mapping[str, Mapping[str, Any]],
    validation_dir: str | Path,
    plan_path: str | Path,
    calibrations: Sequence[str] = CALIBRATIONS,
) -> tuple[pd.DataFrame, list[dict]]:
    """The test phase of one (env, seed, method): the planned configurations on the test splits.

    Args:
        env, seed, method_id: which job.
        runs_dir: the (env, seed)'s training runs, ``RUNS_DIR/{run}/run.{msgpack,json}``.
        splits_dir: the (env, seed)'s splits.
        table: the method's grid table (:func:`pnc.methods.entry.read_config_table`): the planned
            configurations are read from it by id.
        validation_dir: the validation phase's tables of the (env, seed, method),
            ``{run}.csv`` and ``{run}.npz`` (the stored posteriors).
        plan_path: the environment's test plan (:func:`plan_test_splits`).
        calibrations: the variants.

    Returns:
        ``(rows, timings)`` as :func:`pnc.studies.mujoco.stages.evaluate_run`'s, rows on :data:`TEST_SPLITS`
        only (the validation rows, scored again, are checked against the validation phase's table
        and dropped).

    Raises:
        pnc.runtime.io.ArtifactError: the plan or a validation-phase file is missing, cut or disagrees.
    """
    from pnc.methods.regression import get as get_method
    from pnc.studies.mujoco.grid import points_from_table
    from pnc.studies.mujoco.selection import METRIC_TABLE_CHECKS, read_table
    from pnc.studies.mujoco.stages import evaluate_run

    planned = read_plan(plan_path, env, method_id)
    points = points_from_table(method_id, table)
    unknown = sorted(set(planned) - set(table))
    if unknown:
        raise ArtifactError(
            f"{plan_path}: {env} {method_id} plans configurations {unknown} not in the grid; "
            f"rebuild it: snakemake --forcerun {plan_path}"
        )
    stores = get_method(method_id).stores_posteriors
    frames, timings = [], []
    for run_id in dict.fromkeys(p.run_id for p in points if p.config_id in planned):
        table_path = Path(validation_dir) / f"{run_id}.csv"
        stored = read_posteriors(Path(validation_dir) / f"{run_id}.npz") if stores else None
        frame, times = evaluate_run(
            env=env,
            seed=seed,
            method_id=method_id,
            run_id=run_id,
            run_dir=Path(runs_dir) / run_id,
            splits_dir=splits_dir,
            points=[p for p in points if p.run_id == run_id],
            calibrations=calibrations,
            splits=(SELECTION_SPLIT, *TEST_SPLITS),
            configs=[p.config_id for p in points if p.run_id == run_id and p.config_id in planned],
            stored=stored,
        )
        check_same_validation(
            frame,
            read_table(table_path, **METRIC_TABLE_CHECKS),
            table_path,
            env=env,
            seed=seed,
            method=method_id,
        )
        frames.append(frame[frame.split != SELECTION_SPLIT])
        timings += times
    out = pd.concat(frames, ignore_index=True)
    return out, timings


def run_test_phase(
    *,
    env: str,
    seed: int,
    methods: Sequence[str],
    grids: Sequence[str | Path],
    outs: Sequence[str | Path],
    runs_dir: str | Path,
    splits_dir: str | Path,
    validation_dir: str | Path,
    plan_path: str | Path,
    calibrations: Sequence[str] = CALIBRATIONS,
    log: Any = None,
) -> dict[str, list[dict]]:
    """The test phase of one (env, seed): :func:`evaluate_test` of every method in one process.

    One process per (env, seed) instead of one per (env, seed, method) pays the start-up (imports,
    tracing, compiled-program loads) once; each method's table is the same bytes as its own job's.

    Args:
        env, seed: which (env, seed).
        methods: the methods, in the order they run; ``grids[i]`` is the grid table of
            ``methods[i]`` (``results/grid/{method}.json``) and ``outs[i]`` the path its test table
            is written to.
        runs_dir, splits_dir, plan_path, calibrations: as :func:`evaluate_test`'s.
        validation_dir: the validation phase's tables and stored posteriors of the (env, seed),
            ``{method}/{run}.{csv,npz}``.
        log: a logger told each method's start and table, or None.

    Returns:
        ``{method: timings}``, :func:`evaluate_test`'s timings of each method.

    Raises:
        ValueError: ``methods``, ``grids`` and ``outs`` differ in length, or a method repeats.
        pnc.runtime.io.ArtifactError: as :func:`evaluate_test`; the tables of the methods before
            the failing one are written.
    """
    from pnc.methods.entry import read_config_table

    if not len(methods) == len(grids) == len(outs):
        raise ValueError(
            f"{len(methods)} methods, {len(grids)} grid tables and {len(outs)} outputs: "
            "expected one grid table and one output per method"
        )
    if len(set(methods)) != len(methods):
        raise ValueError(f"a method is named twice: {list(methods)}")
    timings = {}
    for method, grid, out in zip(methods, grids, outs, strict=True):
        if log is not None:
            log.info("test phase of %s seed %d %s", env, seed, method)
        frame, timings[method] = evaluate_test(
            env=env,
            seed=seed,
            method_id=method,
            runs_dir=runs_dir,
            splits_dir=splits_dir,
            table=read_config_table(grid),
            validation_dir=Path(validation_dir) / method,
            plan_path=plan_path,
            calibrations=calibrations,
        )
        write_csv(frame, out)
        if log is not None:
            log.info(
                "wrote %d rows for %d configurations to %s", len(frame), len(timings[method]), out
            )
    return timings


# ----------------------------------------------------------------------------- selection, assembly


def _select_and_plan(
    tables: Iterable[str],
    *,
    seeds: Iterable[int],
    methods: Mapping[str, Any] | None,
    calibrations: Sequence[str] | None,
    envs: Iterable[str] | None,
) -> tuple[pd.DataFrame, dict, dict]:
    """The validation phase's tables read and checked complete, the selection made on them and
    the test plan: ``(validation rows, selection, plan)``."""
    from pnc.studies.mujoco.selection import check_complete, read_metric_tables, select

    tables = [str(t) for t in tables]
    seeds = list(seeds)
    frame = read_metric_tables(tables)
    check_complete(
        frame,
        seeds=seeds,
        methods=methods,
        calibrations=calibrations,
        envs=envs,
        paths=tables,
        splits=VALIDATION_SPLITS,
    )
    frame = frame.drop(columns="_source")
    selection = select(frame, seeds=seeds)
    plan = plan_test_splits(frame, selection, config_field(methods or {}, "sigma"))
    return frame, selection, plan


def select_validation_and_write(
    tables: Iterable[str],
    *,
    seeds: Iterable[int],
    selection_path: str,
    plan_path: str,
    methods: Mapping[str, Any] | None = None,
    calibrations: Sequence[str] | None = None,
    envs: Iterable[str] | None = None,
) -> tuple[dict, dict]:
    """The selection on the validation phase's tables and the test plan, written atomically.

    Returns:
        ``(selection, plan)``.

    Raises:
        pnc.runtime.io.ArtifactError: a table is unreadable, cut, incomplete or holds non-finite values
            (named, as :func:`pnc.studies.mujoco.selection.select_and_write`).
    """
    _, selection, plan = _select_and_plan(
        tables, seeds=seeds, methods=methods, calibrations=calibrations, envs=envs
    )
    with atomic_path(selection_path) as tmp:
        write_json(tmp, selection)
    with atomic_path(plan_path) as tmp:
        write_json(tmp, plan)
    return selection, plan


def check_test_tables(
    frame: pd.DataFrame,
    plan: Mapping,
    *,
    seeds: Iterable[int],
    calibrations: Sequence[str] | None,
    paths: Sequence[str],
) -> None:
    """Every planned configuration has every test row of every seed, and nothing else is there.

    Raises:
        pnc.runtime.io.ArtifactError: rows missing or unplanned, named per table with the rebuild command.
    """
    from pnc.studies.mujoco.selection import has_mid, split_metrics

    kinds = list(calibrations or CALIBRATIONS)
    problems = []
    for env, by_method in plan.items():
        sub_env = frame[frame.env == env]
        for seed in sorted({int(s) for s in seeds}):
            sub = sub_env[sub_env.seed == seed]
            rows = split_metrics(s for s in TEST_SPLITS if s != "mid" or has_mid(env, sub.split))
            have = set(
                zip(sub.method, sub.config, sub.calibration, sub.split, sub.metric, strict=True)
            )
            for method, configs in by_method.items():
                table = _test_table(paths, env, seed, method)
                gone = [
                    f"{c} ({k}) {s}/{m}"
                    for c in configs
                    for k in kinds
                    for s, m in rows
                    if (method, c, k, s, m) not in have
                ]
                if gone:
                    problems.append(
                        f"{table} lacks {len(gone)} test row(s) of {env} seed {seed} {method} "
                        f"(e.g. {', '.join(gone[:4])}); {rebuild_hint(table.split(' ')[0])}"
                    )
                extra = sorted(set(sub.config[sub.method == method]) - set(configs))
                if extra:
                    problems.append(
                        f"{table} holds {env} seed {seed} {method} configurations {extra} the test "
                        f"plan does not name (a stale table); {rebuild_hint(table.split(' ')[0])}"
                    )
    if problems:
        raise ArtifactError("incomplete test tables:\n  " + "\n  ".join(problems))


def _test_table(paths: Sequence[str], env: str, seed: int, method: str) -> str:
    suffix = f"{env}/seed{seed}/{method}.csv"
    for path in paths:
        if Path(path).as_posix().endswith("/" + suffix):
            return str(path)
    return f"results/test/{suffix} (not among the inputs)"


def merge_phases(validation: pd.DataFrame, test: pd.DataFrame) -> pd.DataFrame:
    """The two phases' rows in the full evaluation's table order: per (seed, method, config,
    calibration) in the validation tables' order, the validation rows, the test rows (split
    order) and the frontier sample's rows."""
    group = ["env", "seed", "method", "config", "calibration"]
    both = pd.concat([validation, test], ignore_index=True)
    first = validation.drop_duplicates(group).reset_index(drop=True)
    position = {tuple(k): i for i, k in enumerate(first[group].itertuples(index=False, name=None))}
    keys = list(both[group].itertuples(index=False, name=None))
    lost = sorted({k for k in keys if k not in position})
    if lost:
        raise ArtifactError(f"test rows of configurations without validation rows: {lost[:4]}")
    order = pd.DataFrame(
        {
            "group": [position[k] for k in keys],
            "split": [SCORED_SPLITS.index(s) for s in both["split"]],
        }
    )
    index = order.sort_values(["group", "split"], kind="mergesort").index
    return both.loc[index].reset_index(drop=True)


def assemble_and_write(
    validation_tables: Iterable[str],
    test_tables: Iterable[str],
    *,
    seeds: Iterable[int],
    selection_path: str,
    plan_path: str,
    all_configs_path: str,
    results_path: str,
    methods: Mapping[str, Any] | None = None,
    calibrations: Sequence[str] | None = None,
    envs: Iterable[str] | None = None,
) -> dict:
    """``all_configs.csv`` and ``results.csv`` of the two-phase evaluation (module docstring).

    The selection and the plan are checked against the validation tables (a stale one is refused),
    and the test tables against the plan.

    Returns:
        The selection record.

    Raises:
        pnc.runtime.io.ArtifactError: an input is missing, cut, incomplete, stale or disagrees (named).
    """
    from pnc.studies.mujoco.selection import apply_selection, read_metric_tables

    test_tables = [str(t) for t in test_tables]
    validation, selection, plan = _select_and_plan(
        validation_tables, seeds=seeds, methods=methods, calibrations=calibrations, envs=envs
    )
    for path, want in ((selection_path, selection), (plan_path, plan)):
        try:
            have = read_json(path)
        except (OSError, ValueError) as err:
            raise ArtifactError(f"{path}: cannot read it ({err}); {rebuild_hint(path)}") from err
        if have != want:
            raise ArtifactError(
                f"{path} does not follow from the validation tables (stale); "
                f"rebuild it: snakemake --forcerun {path}"
            )
    test = read_metric_tables(test_tables)
    check_test_tables(
        test, read_json(plan_path), seeds=seeds, calibrations=calibrations, paths=test_tables
    )
    frame = merge_phases(validation, test.drop(columns="_source"))
    all_configs, results = apply_selection(frame, selection)
    write_csv(all_configs, all_configs_path)
    write_csv(results, results_path)
    return selection
