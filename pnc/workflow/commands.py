"""The workflow's stages: ``python -m pnc.workflow STAGE --threads N ARGS``.

Every rule's shell command runs one stage of this table, and every stage follows one convention:
it parses its arguments, calls :func:`pnc.runtime.stage.limit_threads` with ``--threads`` (the rule's
``threads:``) before any JAX computation, then calls one library function or library command line.
Stages hold no logic of their own.

Two kinds of stage:

- *forwarding* stages (:class:`Forward`) run a library command line in-process: ``--threads N``,
  then that command line's own arguments, unchanged (its exit status is the stage's);
- the other stages parse their arguments here (the CIFAR-10 study's in
  :mod:`pnc.workflow.cifar_stages`) and call one library function.

``python -m pnc.workflow --help`` lists the stages; ``python -m pnc.workflow STAGE --help`` shows one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Callable
from typing import NoReturn

from pnc.runtime.stage import (
    STAGE_PROGS,
    json_arg,
    limit_threads,
    parser,
    process_line,
    run_library_cli,
    setup_logging,
)
from pnc.workflow.cifar_stages import CIFAR_STAGES


@dataclasses.dataclass(frozen=True)
class Forward:
    """A stage that runs the command line ``python -m MODULE [COMMAND...] ARGS`` in-process.

    Attributes:
        module: the library module whose ``main(argv)`` runs.
        command: the subcommand put before the stage's arguments (e.g. ``("tables",)``).
        help: one line for ``--help``.
    """

    module: str
    help: str
    command: tuple[str, ...] = ()

    def __call__(self, argv: list[str]) -> int:
        return run_library_cli(self.module, self.help, argv, command=self.command)


def _add_env_seed(p: argparse.ArgumentParser) -> None:
    """The (env, seed) options every per-(env, seed) stage takes."""
    p.add_argument("--env", required=True)
    p.add_argument("--seed", type=int, required=True)


def _add_splits(p: argparse.ArgumentParser) -> None:
    """The splits option of the stages that read an (env, seed)'s data splits."""
    p.add_argument("--splits", required=True, help="directory with splits.npz + manifest.json")


def train_run(argv: list[str]) -> int:
    """Train one shared training run on the train split of (env, seed) (pnc.studies.mujoco.stages.train_run)."""
    p = parser("Train one shared training run on the train split of (env, seed).")
    _add_env_seed(p)
    p.add_argument("--run-id", required=True, help="e.g. base, deep_ensemble-n_members5")
    p.add_argument(
        "--spec", type=json_arg, required=True, help='e.g. {"kind": "base", "options": []}'
    )
    _add_splits(p)
    p.add_argument("--out", required=True, help="directory for run.msgpack + run.json")
    p.add_argument("--model", type=json_arg, default={}, help="config 'model' as JSON")
    p.add_argument("--train", type=json_arg, default={}, help="config 'train' as JSON")
    args = p.parse_args(argv)
    cpus = limit_threads(args.threads)
    log = setup_logging()
    log.info("train %s seed %d run %s on CPUs %s", args.env, args.seed, args.run_id, cpus)

    from pnc.studies.mujoco.stages import spec_from_dict, train_run

    spec = spec_from_dict(args.spec)
    if spec.run_id != args.run_id:
        p.error(f"--spec gives run id {spec.run_id!r}, not --run-id {args.run_id!r}")
    summary = train_run(
        env=args.env,
        seed=args.seed,
        spec=spec,
        splits_dir=args.splits,
        out_dir=args.out,
        model=args.model,
        train=args.train,
    )
    log.info("done: %s", json.dumps(summary))
    return 0


def evaluate_run(argv: list[str]) -> int:
    """Construct, predict and score every configuration of one (env, seed, method, run) (pnc.studies.mujoco.stages.evaluate_run)."""
    p = parser("Post-hoc construction, prediction and metrics for one method on one training run.")
    _add_env_seed(p)
    p.add_argument("--method", required=True)
    p.add_argument("--run-id", required=True)
    p.add_argument("--run", required=True, help="directory of the training run")
    _add_splits(p)
    p.add_argument(
        "--grid", required=True, help="the method's grid table (results/grid/{method}.json)"
    )
    p.add_argument(
        "--configs",
        nargs="+",
        required=True,
        metavar="ID",
        help="the configuration ids of the table that use the run, in grid order",
    )
    p.add_argument(
        "--calibrations",
        nargs="+",
        metavar="VARIANT",
        help="calibration variants to score (pnc.studies.mujoco.results.CALIBRATIONS): raw (as "
        "constructed), vcal (variance scaled on val); default: all",
    )
    p.add_argument(
        "--score",
        nargs="+",
        metavar="SPLIT",
        help="splits to score (pnc.studies.mujoco.results.SCORED_SPLITS; val among them); default: every "
        "evaluation split (the full evaluation)",
    )
    p.add_argument(
        "--posteriors",
        help="also write the posteriors of methods that store them here (.npz; the two-phase "
        "evaluation's validation phase, pnc.studies.mujoco.phases)",
    )
    p.add_argument("--out", required=True, help="metric table (CSV)")
    args = p.parse_args(argv)
    cpus = limit_threads(args.threads)
    log = setup_logging()
    log.info(
        "evaluate %s seed %d %s on run %s (CPUs %s)",
        args.env,
        args.seed,
        args.method,
        args.run_id,
        cpus,
    )

    from pnc.methods.entry import read_config_table
    from pnc.runtime.io import write_csv
    from pnc.studies.mujoco.grid import points_by_id
    from pnc.studies.mujoco.phases import write_posteriors
    from pnc.studies.mujoco.results import CALIBRATIONS
    from pnc.studies.mujoco.stages import evaluate_run

    calibrations = CALIBRATIONS if args.calibrations is None else tuple(args.calibrations)
    posteriors: dict | None = None if args.posteriors is None else {}
    frame, timings = evaluate_run(
        env=args.env,
        seed=args.seed,
        method_id=args.method,
        run_id=args.run_id,
        run_dir=args.run,
        splits_dir=args.splits,
        points=points_by_id(args.method, read_config_table(args.grid), args.configs),
        calibrations=calibrations,
        splits=args.score,
        posteriors_out=posteriors,
    )
    for t in timings:
        log.info("timing %s", json.dumps(t))
    if args.posteriors is not None:  # before the table, whose presence marks a finished job
        write_posteriors(posteriors, args.posteriors)
        log.info(
            "stored the posteriors of %d configurations in %s", len(posteriors), args.posteriors
        )
    write_csv(frame, args.out)
    log.info(
        "wrote %d rows for %d configurations (%s) to %s",
        len(frame),
        len(timings),
        ", ".join(calibrations),
        args.out,
    )
    return 0


def evaluate_test(argv: list[str]) -> int:
    """The test phase of one (env, seed): every method's planned configurations on the test splits, in one process (pnc.studies.mujoco.phases.run_test_phase)."""
    p = parser(
        "The two-phase evaluation's test phase of one (env, seed): the configurations the test "
        "plan names, on the test splits, for every method in one process."
    )
    _add_env_seed(p)
    p.add_argument("--methods", nargs="+", required=True, help="the methods, in order")
    p.add_argument("--runs", required=True, help="directory of the (env, seed)'s training runs")
    _add_splits(p)
    p.add_argument(
        "--grids",
        nargs="+",
        required=True,
        help="each method's grid table (results/grid/{method}.json), in the order of --methods",
    )
    p.add_argument("--calibrations", nargs="+", metavar="VARIANT", help="as evaluate_run's")
    p.add_argument(
        "--validation",
        required=True,
        help="directory of the validation phase's tables and stored posteriors of the "
        "(env, seed): {method}/{run}.csv and .npz",
    )
    p.add_argument("--plan", required=True, help="the environment's test plan (JSON)")
    p.add_argument(
        "--out", nargs="+", required=True, help="each method's metric table (CSV), in order"
    )
    args = p.parse_args(argv)
    cpus = limit_threads(args.threads)
    log = setup_logging()
    log.info(
        "test phase of %s seed %d: %s (CPUs %s)", args.env, args.seed, " ".join(args.methods), cpus
    )

    from pnc.studies.mujoco.phases import run_test_phase
    from pnc.studies.mujoco.results import CALIBRATIONS

    timings = run_test_phase(
        env=args.env,
        seed=args.seed,
        methods=args.methods,
        grids=args.grids,
        outs=args.out,
        runs_dir=args.runs,
        splits_dir=args.splits,
        validation_dir=args.validation,
        plan_path=args.plan,
        calibrations=CALIBRATIONS if args.calibrations is None else tuple(args.calibrations),
        log=log,
    )
    for method, times in timings.items():
        for t in times:
            log.info("timing %s %s", method, json.dumps(t))
    return 0


def _add_selection_inputs(p: argparse.ArgumentParser) -> None:
    """The options of the stages that check the metric tables against the config."""
    p.add_argument(
        "--seeds", type=int, nargs="+", required=True, help="seeds every config must have"
    )
    p.add_argument(
        "--grid",
        nargs="+",
        help="the grid tables of the methods that run (results/grid/{method}.json): every "
        "configuration's rows are expected",
    )
    p.add_argument(
        "--calibrations",
        nargs="+",
        metavar="VARIANT",
        help="calibration variants every configuration is scored in (default: all, with "
        "--methods-json; else those in the tables)",
    )
    p.add_argument("--env", action="append", help="environment(s) the tables must cover")


def _grid_tables(paths: list[str] | None) -> dict | None:
    """``{method id: grid table}`` of ``--grid`` (pnc.studies.mujoco.grid.read_tables), or None."""
    from pnc.studies.mujoco.grid import read_tables

    return None if paths is None else read_tables(paths)


def select_validation(argv: list[str]) -> int:
    """The two-phase evaluation's selection: selection.json and the test plan from the validation phase's tables (pnc.studies.mujoco.phases)."""
    p = parser(
        "Select per (env, method) by seed-mean validation NLL on the validation phase's tables "
        "and write the test plan."
    )
    p.add_argument("tables", nargs="+", help="the validation phase's metric CSVs")
    _add_selection_inputs(p)
    p.add_argument("--selection", required=True, help="output: selection record (JSON)")
    p.add_argument("--plan", required=True, help="output: the test plan (JSON)")
    args = p.parse_args(argv)
    limit_threads(args.threads)
    log = setup_logging()

    from pnc.studies.mujoco.phases import select_validation_and_write

    _, plan = select_validation_and_write(
        args.tables,
        seeds=args.seeds,
        selection_path=args.selection,
        plan_path=args.plan,
        methods=_grid_tables(args.grid),
        calibrations=args.calibrations,
        envs=args.env,
    )
    for env, by_method in plan.items():
        for method, configs in by_method.items():
            log.info("%s %s: test phase scores %s", env, method, json.dumps(configs))
    return 0


def assemble(argv: list[str]) -> int:
    """The two-phase evaluation's all_configs.csv and results.csv of one environment (pnc.studies.mujoco.phases)."""
    p = parser("all_configs.csv and results.csv from the two phases' metric tables.")
    p.add_argument("--validation", nargs="+", required=True, help="validation-phase metric CSVs")
    p.add_argument("--test", nargs="+", required=True, help="test-phase metric CSVs")
    _add_selection_inputs(p)
    p.add_argument("--selection", required=True, help="the environment's selection.json")
    p.add_argument("--plan", required=True, help="the environment's test plan")
    p.add_argument("--all-configs", required=True, help="output: every configuration's rows")
    p.add_argument("--results", required=True, help="output: the selected configurations' rows")
    args = p.parse_args(argv)
    limit_threads(args.threads)
    log = setup_logging()

    from pnc.studies.mujoco.phases import assemble_and_write

    assemble_and_write(
        args.validation,
        args.test,
        seeds=args.seeds,
        selection_path=args.selection,
        plan_path=args.plan,
        all_configs_path=args.all_configs,
        results_path=args.results,
        methods=_grid_tables(args.grid),
        calibrations=args.calibrations,
        envs=args.env,
    )
    log.info("wrote %s and %s", args.all_configs, args.results)
    return 0


def select(argv: list[str]) -> int:
    """Select per (env, method) by seed-mean validation NLL and write the results tables (pnc.studies.mujoco.selection)."""
    p = parser(
        "Select the (configuration, calibration) pair with the lowest seed-mean validation NLL "
        "per (env, method)."
    )
    p.add_argument("tables", nargs="+", help="metric CSVs of the evaluation jobs")
    _add_selection_inputs(p)
    p.add_argument(
        "--all-configs", required=True, help="output: every configuration, with 'selected'"
    )
    p.add_argument(
        "--results", required=True, help="output: selected (config, calibration), eval splits"
    )
    p.add_argument("--selection", required=True, help="output: selection record (JSON)")
    args = p.parse_args(argv)
    limit_threads(args.threads)
    log = setup_logging()

    from pnc.studies.mujoco.selection import select_and_write

    selection = select_and_write(
        args.tables,
        seeds=args.seeds,
        all_configs_path=args.all_configs,
        results_path=args.results,
        selection_path=args.selection,
        methods=_grid_tables(args.grid),
        calibrations=args.calibrations,
        envs=args.env,
    )
    for env, by_method in selection.items():
        for method, rec in by_method.items():
            log.info(
                "%s %s: %s, %s (val NLL %s)",
                env,
                method,
                rec["config"],
                rec["calibration"],
                rec["val_nll"],
            )
    return 0


def aggregate(argv: list[str]) -> int:
    """Concatenate the per-environment results tables and selection records (pnc.studies.mujoco.selection)."""
    p = parser("Concatenate per-environment results tables and selection records.")
    p.add_argument("--all-configs", nargs="+", required=True, help="per-env all_configs.csv files")
    p.add_argument("--results", nargs="+", required=True, help="per-env results.csv files")
    p.add_argument("--selection", nargs="+", required=True, help="per-env selection.json files")
    p.add_argument(
        "--out-dir", required=True, help="writes all_configs.csv, results.csv, selection.json"
    )
    args = p.parse_args(argv)
    limit_threads(args.threads)
    log = setup_logging()

    from pnc.studies.mujoco.selection import concatenate_outputs

    sizes = concatenate_outputs(args.all_configs, args.results, args.selection, args.out_dir)
    log.info("wrote %s", sizes)
    return 0


def minari_data(argv: list[str]) -> int:
    """Check (with --download, fetch) one environment's Minari datasets (pnc.studies.mujoco.stages.fetch_minari)."""
    p = parser("Make sure the Minari datasets of one environment are present.")
    p.add_argument("env")
    p.add_argument(
        "--minari-root", default=None, help="Minari root (default $MINARI_DATASETS_PATH)"
    )
    p.add_argument("--download", action="store_true", help="download missing datasets")
    p.add_argument("--out", required=True, help="JSON record")
    args = p.parse_args(argv)
    limit_threads(args.threads)
    log = setup_logging()

    from pnc.runtime.io import atomic_path, write_json
    from pnc.studies.mujoco.stages import fetch_minari

    record = fetch_minari(args.env, root=args.minari_root, download=args.download)
    with atomic_path(args.out) as tmp:
        write_json(tmp, record)
    log.info("%s", record)
    return 0


def pnc_members(argv: list[str]) -> int:
    """Build and store the selected P&C members of one (env, seed) (pnc.studies.mujoco.mechanism)."""
    p = parser("Build and store the selected P&C members of one (env, seed).")
    _add_env_seed(p)
    p.add_argument("--run", required=True, help="directory of the base training run")
    _add_splits(p)
    p.add_argument("--selection", required=True, help="the environment's selection.json")
    p.add_argument("--grid", required=True, help="P&C's grid table (results/grid/pnc.json)")
    p.add_argument("--out", required=True, help="output directory")
    args = p.parse_args(argv)
    cpus = limit_threads(args.threads)
    log = setup_logging()
    log.info("P&C members of %s seed %d (CPUs %s)", args.env, args.seed, cpus)

    from pnc.methods.entry import read_config_table
    from pnc.runtime.io import read_json
    from pnc.studies.mujoco.pnc_members import write_pnc_members

    record = write_pnc_members(
        env=args.env,
        seed=args.seed,
        run_dir=args.run,
        splits_dir=args.splits,
        selection=read_json(args.selection),
        table=read_config_table(args.grid),
        out_dir=args.out,
    )
    log.info(
        "%s: %d members, %d bytes (%.0f per member), built in %.1f s",
        record["config_id"],
        record["n_members"],
        record["bytes"],
        record["bytes_per_member"],
        record["build_s"],
    )
    return 0


def mechanism_diagnostics(argv: list[str]) -> int:
    """Per-point mechanism diagnostics of one (env, seed) (pnc.studies.mujoco.mechanism)."""
    p = parser("Mechanism diagnostics (paper Figures 1 B/C and 3) of one (env, seed).")
    _add_env_seed(p)
    p.add_argument("--run", required=True, help="directory of the base training run")
    _add_splits(p)
    p.add_argument("--members", required=True, help="directory of the stored P&C members")
    p.add_argument("--selection", required=True, help="the environment's selection.json")
    p.add_argument(
        "--grid",
        nargs="+",
        required=True,
        help="the grid tables of the mechanism methods that run (results/grid/{method}.json)",
    )
    p.add_argument("--settings", type=json_arg, default={}, help="config 'mechanism' as JSON")
    p.add_argument(
        "--validation",
        help="the two-phase validation phase's directory of this (env, seed): restore the "
        "posteriors it stored (Subspace's chains) instead of building them again",
    )
    p.add_argument("--out", required=True, help="output parquet file")
    p.add_argument("--info", required=True, help="output JSON record")
    args = p.parse_args(argv)
    cpus = limit_threads(args.threads)
    log = setup_logging()
    log.info("mechanism diagnostics of %s seed %d (CPUs %s)", args.env, args.seed, cpus)

    from pnc.runtime.io import read_json, write_json
    from pnc.studies.mujoco.mechanism import MechanismSettings, mechanism_frame, write_mechanism

    settings = {k: v for k, v in args.settings.items() if k not in ("enabled", "seeds")}
    frame, info = mechanism_frame(
        env=args.env,
        seed=args.seed,
        run_dir=args.run,
        splits_dir=args.splits,
        members_dir=args.members,
        selection=read_json(args.selection),
        tables=_grid_tables(args.grid),
        settings=MechanismSettings(**settings),
        validation_dir=args.validation,
    )
    write_mechanism(frame, args.out)
    write_json(args.info, info)
    log.info("wrote %d rows to %s: %s", len(frame), args.out, json.dumps(info))
    return 0


def mechanism_report(argv: list[str]) -> int:
    """Mechanism figures of one environment or the mechanism table: figures|table ARGS (pnc.report)."""
    p = parser("Mechanism figures (per environment) or the mechanism table.")
    p.add_argument("kind", choices=("figures", "table"))
    p.add_argument("mechanism", nargs="+", help="mechanism parquet files")
    p.add_argument("--all-configs", required=True, help="all_configs.csv (Figure 3A)")
    p.add_argument("--env", help="the environment (figures)")
    p.add_argument(
        "--grid",
        nargs="+",
        required=True,
        help="the grid tables of P&C and its ablation (each configuration's sigma)",
    )
    p.add_argument("--out", required=True, help="output directory")
    args = p.parse_args(argv)
    limit_threads(args.threads)
    log = setup_logging()
    if args.kind == "figures" and not args.env:
        p.error("figures needs --env")

    if args.kind == "figures":
        from pnc.report.mechanism_figures import write_mechanism_figures

        paths = write_mechanism_figures(
            args.mechanism, args.all_configs, args.env, args.out, args.grid
        )
        log.info("wrote %s", ", ".join(map(str, paths)))
    else:
        from pnc.report.mechanism_table import write_mechanism_table

        stats = write_mechanism_table(args.mechanism, args.all_configs, args.out, args.grid)
        log.info("mechanism table:\n%s", stats.to_string())
    return 0


#: The word that separates the stages of :func:`batch`'s command line.
BATCH_SEPARATOR = "::"


def batch(argv: list[str]) -> int:
    """Several stages one after another in one process (config ``batch``), paying the start-up once."""
    if not argv or argv[0] in ("-h", "--help"):
        p = parser(
            "Run the stages one after another in this process, so that Python, JAX and the "
            "project start once (config `batch: env`: the quick default's jobs take a few seconds "
            "each, most of it start-up). Each stage takes its own --threads, the same in all. "
            "Stops at the first stage that fails, with its exit status."
        )
        p.usage = f"%(prog)s STAGE --threads N ARGS [{BATCH_SEPARATOR} STAGE --threads N ARGS ...]"
        p.parse_args(argv or ["--help"])
    parts: list[list[str]] = [[]]
    for word in argv:
        if word == BATCH_SEPARATOR:
            parts.append([])
        else:
            parts[-1].append(word)
    valid = [name for name in STAGES if name != "batch"]
    for part in parts:
        if not part or part[0] not in valid:
            what = f"unknown stage {part[0]!r}" if part else f"no stage around {BATCH_SEPARATOR!r}"
            print(f"error: batch: {what}; valid stages: {', '.join(valid)}", file=sys.stderr)
            return 2
    log = setup_logging()
    for k, (name, *rest) in enumerate(parts, 1):
        log.info("batch: stage %d of %d: %s", k, len(parts), name)
        STAGE_PROGS.append(f"python -m pnc.workflow {name}")
        try:
            status = STAGES[name](rest)
        finally:
            STAGE_PROGS.pop()
        if status:
            log.error(
                "batch: stage %d of %d (%s) ended with status %s", k, len(parts), name, status
            )
            return status
    return 0


#: Every stage by name: a :class:`Forward` or a function ``stage(argv) -> exit status``. The rules
#: of ``workflow/rules/`` name them (``tests/test_workflow_entry.py`` checks that every name exists).
STAGES: dict[str, Callable[[list[str]], int]] = {
    # MuJoCo data (pnc.studies.mujoco.data)
    "behaviour_policies": Forward(
        "pnc.studies.mujoco.data.behaviour",
        "Train the behaviour policies of one environment (pnc.studies.mujoco.data.behaviour).",
    ),
    "offline_data": Forward(
        "pnc.studies.mujoco.data.offline",
        "Offline behaviour datasets of one environment (pnc.studies.mujoco.data.offline).",
    ),
    "minari_data": minari_data,
    "far_data": Forward(
        "pnc.studies.mujoco.data.far",
        "Far (uniform-random-action) dataset of one environment (pnc.studies.mujoco.data.far).",
    ),
    "episode_splits": Forward(
        "pnc.studies.mujoco.data.__main__",
        "Train/val/id/near/mid/far episode splits of one (env, seed) (pnc.studies.mujoco.data).",
    ),
    # MuJoCo study (pnc.studies.mujoco)
    "train_run": train_run,
    "evaluate_run": evaluate_run,
    "select": select,
    "select_validation": select_validation,
    "evaluate_test": evaluate_test,
    "assemble": assemble,
    "aggregate": aggregate,
    "pnc_members": pnc_members,
    "mechanism_diagnostics": mechanism_diagnostics,
    # reports (pnc.report)
    "report_tables": Forward(
        "pnc.report.__main__",
        "The study's tables and stats.json from results.csv (pnc.report tables).",
        ("tables",),
    ),
    "report_figure": Forward(
        "pnc.report.__main__",
        "The ID/OOD frontier or headline-metrics figure: frontier|metrics ARGS (pnc.report).",
    ),
    "mechanism_report": mechanism_report,
    # several stages in one process (config `batch`)
    "batch": batch,
    "piece": Forward(
        "pnc.report.__main__",
        "List one (env, seed)'s output files with their hashes (pnc.report piece).",
        ("piece",),
    ),
    # CIFAR-10 study (pnc.workflow.cifar_stages)
    **CIFAR_STAGES,
}


def _usage() -> str:
    width = max(map(len, STAGES))
    lines = ["usage: python -m pnc.workflow STAGE --threads N [ARGS...]", "", "stages:"]
    for name, stage in STAGES.items():
        text = stage.help if isinstance(stage, Forward) else (stage.__doc__ or "").strip()
        lines.append(f"  {name:<{width}}  {text.splitlines()[0] if text else ''}")
    return "\n".join(lines)


FULL_EXIT_VAR = "PNC_FULL_EXIT"
"""Set to ``1`` to end a stage's process through the interpreter's normal teardown
(:func:`exit_process`), e.g. for a profiler or coverage tool that writes its report at exit."""


def exit_process(status: int | None) -> NoReturn:
    """End a stage's process with ``status`` (``None``: 0) once :func:`main` has returned.

    By then the stage has written and closed its outputs and the log's last line is its process
    record, so the process ends at once (``os._exit`` after flushing ``stdout``, ``stderr`` and
    the logging handlers): the interpreter's teardown (freeing every module, array and XLA client;
    about 0.3 CPU s per job, more for the large ones) would only add CPU time that no record
    counts. With :data:`FULL_EXIT_VAR` set to ``1`` it raises ``SystemExit`` instead. A stage that
    raised never gets here: its traceback and status come from the normal exit.
    """
    code = 0 if status is None else int(status)
    if os.environ.get(FULL_EXIT_VAR, "").strip() == "1":
        raise SystemExit(code)
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    """Run ``STAGE`` with the remaining arguments; returns its exit status.

    No stage, ``-h`` or ``--help`` prints the stages (status 0 with ``--help``, 2 without a
    stage); an unknown stage exits with status 2, naming the valid ones.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in STAGES:
        print(f"error: unknown stage {name!r}; valid stages: {', '.join(STAGES)}", file=sys.stderr)
        return 2
    STAGE_PROGS.append(f"python -m pnc.workflow {name}")
    status, failed = None, False
    try:
        status = STAGES[name](rest)
        return status
    except SystemExit as exc:  # argparse errors
        status = exc.code if isinstance(exc.code, int) else 1
        raise
    except BaseException:  # the error's traceback follows the record in the log
        failed = True
        raise
    finally:
        STAGE_PROGS.pop()
        if "-h" not in rest and "--help" not in rest:
            # a stage that returned None exits with status 0 (sys.exit(None))
            code = 0 if status is None and not failed else status
            print(process_line(name, code), file=sys.stderr, flush=True)
