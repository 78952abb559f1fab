"""The CIFAR-10 study's stages in the one stage table (:data:`pnc.workflow.commands.STAGES`).

``python -m pnc.workflow cifar_STAGE --threads N ARGS``: each stage parses its arguments, limits its
threads, calls one function of :mod:`pnc.studies.cifar.jobs` (downloads:
:func:`pnc.studies.cifar.fetch.fetch`) and prints that function's JSON summary on stdout.
"""

from __future__ import annotations

import argparse
import json

from pnc.runtime.stage import json_arg, limit_threads, parser, setup_logging


def _print(result: object) -> int:
    """Print a job's summary as one JSON line; the stage's exit status 0."""
    print(json.dumps(result, sort_keys=True, default=str))
    return 0


def _add_id(p: argparse.ArgumentParser) -> None:
    p.add_argument("--id", default="cifar10", help="ID dataset: cifar10 (default) or cifar100")


def _add_seed_job(p: argparse.ArgumentParser) -> None:
    """The options of the jobs of one seed (training, validation, post hoc)."""
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--data", required=True, help="the cifar_data stage's output directory")
    p.add_argument("--out", required=True)
    p.add_argument("--model", type=json_arg, default={})
    p.add_argument("--val-size", type=int, required=True)


def _add_method_job(p: argparse.ArgumentParser) -> None:
    """The options of the jobs of one method on one seed (validation, post hoc)."""
    _add_seed_job(p)
    p.add_argument(
        "--sweep", required=True, help="the method's sweep (results/cifar/sweeps/<method>.json)"
    )
    p.add_argument("--runs", required=True, help="directory of the seed's training runs")
    p.add_argument("--batch-size", type=int, default=500)


def _seed_job(args: argparse.Namespace) -> dict:
    """The keywords of :func:`_add_seed_job`'s options, as the jobs of one seed take them."""
    return dict(
        seed=args.seed, data_dir=args.data, out=args.out, model=args.model, val_size=args.val_size
    )


def _method_job(args: argparse.Namespace) -> dict:
    """The keywords of :func:`_add_method_job`'s options, as the jobs of one method take them."""
    return dict(**_seed_job(args), sweep=args.sweep, runs_dir=args.runs, batch_size=args.batch_size)


def cifar_tiny_data(argv: list[str]) -> int:
    """The generated tiny CIFAR-10 + OpenOOD benchmark in the real file formats (CI scale) (pnc.studies.cifar.jobs.tiny_data)."""
    p = parser("Write the generated tiny benchmark in the real file formats.")
    p.add_argument("root")
    p.add_argument("--options", type=json_arg, default={}, help="write_tiny_benchmark keywords")
    _add_id(p)
    args = p.parse_args(argv)
    limit_threads(args.threads)
    setup_logging()
    from pnc.studies.cifar.jobs import tiny_data

    return _print(tiny_data(args.root, args.options, args.id))


def cifar_fetch(argv: list[str]) -> int:
    """Download the missing CIFAR and OpenOOD v1.5 files, checksums verified (pnc.studies.cifar.fetch.fetch)."""
    p = parser("Download the missing data files, checksums verified.")
    p.add_argument("root")
    p.add_argument("--ood", nargs="+", required=True)
    _add_id(p)
    p.add_argument(
        "--sources", type=json_arg, default={}, help="source overrides (name -> url, md5, sha256)"
    )
    p.add_argument("--summary", default=None, help="also write the JSON summary to this file")
    args = p.parse_args(argv)
    limit_threads(args.threads)
    setup_logging()
    from pnc.runtime.io import write_json
    from pnc.studies.cifar.fetch import fetch

    result = fetch(args.root, args.id, args.ood, overrides=args.sources)
    if args.summary:
        write_json(args.summary, result)
    return _print(result)


def cifar_data(argv: list[str]) -> int:
    """Check the CIFAR-10 and OpenOOD v1.5 files and write their arrays once (pnc.studies.cifar.jobs.prepare_data)."""
    p = parser("Check the data files and write their arrays.")
    p.add_argument("root")
    p.add_argument("--ood", nargs="+", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--limit", type=int, default=None, help="images per OOD dataset (default all)")
    _add_id(p)
    args = p.parse_args(argv)
    limit_threads(args.threads)
    setup_logging()
    from pnc.studies.cifar.jobs import prepare_data

    return _print(prepare_data(args.root, args.ood, args.out, args.limit, args.id))


def cifar_train(argv: list[str]) -> int:
    """One CIFAR-10 training run of one seed, resuming from its last epoch (pnc.studies.cifar.jobs.train_run)."""
    p = parser("One training run of one seed, resuming from its last checkpoint.")
    _add_seed_job(p)
    p.add_argument("--run-id", required=True)
    p.add_argument("--train", type=json_arg, default={})
    p.add_argument("--swag-starts", type=int, nargs="*", default=[])
    p.add_argument(
        "--checkpoint-every", type=int, default=10, help="epochs between checkpoints (default 10)"
    )
    args = p.parse_args(argv)
    limit_threads(args.threads)
    setup_logging()
    from pnc.studies.cifar.jobs import train_run

    return _print(
        train_run(
            **_seed_job(args),
            run_id=args.run_id,
            train_section=args.train,
            swag_starts=args.swag_starts,
            checkpoint_every=args.checkpoint_every,
        )
    )


def cifar_validate(argv: list[str]) -> int:
    """One method on one seed: every configuration it selects from, built and scored on the validation split (pnc.studies.cifar.jobs.validate)."""
    p = parser("One method's sweep on one seed, scored on the validation split.")
    _add_method_job(p)
    args = p.parse_args(argv)
    limit_threads(args.threads)
    setup_logging()
    from pnc.studies.cifar.jobs import MethodJob, validate

    return _print(validate(MethodJob(**_method_job(args))))


def cifar_select(argv: list[str]) -> int:
    """One method's selection by validation NLL from every seed's sweep (pnc.studies.cifar.jobs.select)."""
    p = parser("One method's selection from every seed's sweep.")
    p.add_argument("validation", nargs="+", help="the sweeps (the cifar_validate stage's outputs)")
    p.add_argument(
        "--sweep", required=True, help="the method's sweep (results/cifar/sweeps/<method>.json)"
    )
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    limit_threads(args.threads)
    setup_logging()
    from pnc.studies.cifar.jobs import select

    return _print(select(sweep=args.sweep, validation=args.validation, out=args.out))


def cifar_posthoc(argv: list[str]) -> int:
    """One method on one seed at its selected configuration: the OOD confidences (pnc.studies.cifar.jobs.posthoc)."""
    p = parser("One method on one seed at its selected configuration.")
    _add_method_job(p)
    p.add_argument(
        "--selection", default=None, help="the cifar_select stage's output (default: select here)"
    )
    args = p.parse_args(argv)
    limit_threads(args.threads)
    setup_logging()
    from pnc.studies.cifar.jobs import MethodJob, posthoc

    return _print(posthoc(MethodJob(**_method_job(args)), selection=args.selection))


def cifar_tables(argv: list[str]) -> int:
    """Metrics, Table 2 and the sweep table of the CIFAR-10 study (pnc.studies.cifar.jobs.tables)."""
    p = parser("Metrics, Table 2 and the sweep table.")
    p.add_argument("--scores", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--methods", nargs="+", required=True)
    p.add_argument("--seeds", type=int, nargs="+", required=True)
    p.add_argument("--out", required=True)
    p.add_argument(
        "--report", type=json_arg, default={}, help='protocol options, e.g. {"std": "population"}'
    )
    args = p.parse_args(argv)
    limit_threads(args.threads)
    setup_logging()
    from pnc.studies.cifar.jobs import tables

    table = tables(
        scores_dir=args.scores,
        data_dir=args.data,
        methods=args.methods,
        seeds=args.seeds,
        out=args.out,
        report=args.report,
    )
    return _print({"methods": table["method"].tolist()})


#: The CIFAR-10 stages by name, as :data:`pnc.workflow.commands.STAGES` lists them.
CIFAR_STAGES = {
    "cifar_fetch": cifar_fetch,
    "cifar_tiny_data": cifar_tiny_data,
    "cifar_data": cifar_data,
    "cifar_train": cifar_train,
    "cifar_validate": cifar_validate,
    "cifar_select": cifar_select,
    "cifar_posthoc": cifar_posthoc,
    "cifar_tables": cifar_tables,
}
