"""Command line of the CIFAR-10 study: ``python -m pnc.studies.cifar.cli COMMAND ...`` (one job each).

Commands: ``tiny-data ROOT``, ``fetch ROOT`` (:mod:`pnc.studies.cifar.fetch`), ``prepare ROOT --out
DIR``, ``train``, ``validate``, ``select``, ``posthoc``, ``tables`` (:mod:`pnc.studies.cifar.jobs`). Each prints a JSON summary on stdout. The workflow runs them through
``python -m pnc.workflow cifar_STAGE --threads N ...``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from pnc.studies.cifar import jobs


def _json(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"not valid JSON: {err}") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pnc.studies.cifar.cli", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser("tiny-data", help="write the generated tiny benchmark")
    t.add_argument("root")
    t.add_argument("--options", type=_json, default={}, help="write_tiny_benchmark keywords")
    t.add_argument("--id", default="cifar10", help="ID dataset: cifar10 (default) or cifar100")

    f = sub.add_parser("fetch", help="download the missing data files, checksums verified")
    f.add_argument("root")
    f.add_argument("--ood", nargs="+", required=True)
    f.add_argument("--id", default="cifar10", help="ID dataset: cifar10 (default) or cifar100")
    f.add_argument(
        "--sources", type=_json, default={}, help="source overrides (name -> url, md5, sha256)"
    )
    f.add_argument("--summary", default=None, help="also write the JSON summary to this file")

    d = sub.add_parser("prepare", help="check the data files and write the arrays")
    d.add_argument("root")
    d.add_argument("--ood", nargs="+", required=True)
    d.add_argument("--out", required=True)
    d.add_argument("--limit", type=int, default=None, help="images per OOD dataset (default all)")
    d.add_argument("--id", default="cifar10", help="ID dataset: cifar10 (default) or cifar100")

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--seed", type=int, required=True)
    common.add_argument("--data", required=True, help="the prepare stage's output directory")
    common.add_argument("--out", required=True)
    common.add_argument("--model", type=_json, default={})
    common.add_argument("--val-size", type=int, required=True)

    r = sub.add_parser("train", parents=[common], help="one training run")
    r.add_argument("--run-id", required=True)
    r.add_argument("--train", type=_json, default={})
    r.add_argument("--swag-starts", type=int, nargs="*", default=[])
    r.add_argument(
        "--checkpoint-every", type=int, default=10, help="epochs between checkpoints (default 10)"
    )

    one = argparse.ArgumentParser(add_help=False)  # one method on one seed
    one.add_argument(
        "--sweep", required=True, help="the method's sweep (results/cifar/sweeps/<method>.json)"
    )
    one.add_argument("--runs", required=True, help="directory of the seed's training runs")
    one.add_argument("--batch-size", type=int, default=500)

    sub.add_parser("validate", parents=[common, one], help="one method's sweep on one seed")

    c = sub.add_parser("select", help="one method's selection from every seed's sweep")
    c.add_argument("validation", nargs="+", help="the sweeps (the validate command's outputs)")
    c.add_argument(
        "--sweep", required=True, help="the method's sweep (results/cifar/sweeps/<method>.json)"
    )
    c.add_argument("--out", required=True)

    h = sub.add_parser("posthoc", parents=[common, one], help="one method on one seed")
    h.add_argument(
        "--selection", default=None, help="the select command's output (default: select here)"
    )

    s = sub.add_parser("tables", help="metrics, Table 2 and the sweep table")
    s.add_argument("--scores", required=True)
    s.add_argument("--data", required=True)
    s.add_argument("--methods", nargs="+", required=True)
    s.add_argument("--seeds", type=int, nargs="+", required=True)
    s.add_argument("--out", required=True)
    s.add_argument(
        "--report", type=_json, default={}, help='protocol options, e.g. {"std": "population"}'
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr
    )
    if args.command == "tiny-data":
        result = jobs.tiny_data(args.root, args.options, args.id)
    elif args.command == "fetch":
        from pnc.studies.cifar.fetch import fetch

        result = fetch(args.root, args.id, args.ood, overrides=args.sources)
        if args.summary:
            from pnc.runtime.io import write_json

            write_json(args.summary, result)
    elif args.command == "prepare":
        result = jobs.prepare_data(args.root, args.ood, args.out, args.limit, args.id)
    elif args.command == "train":
        result = jobs.train_run(
            seed=args.seed,
            run_id=args.run_id,
            data_dir=args.data,
            out=args.out,
            model=args.model,
            train_section=args.train,
            val_size=args.val_size,
            swag_starts=args.swag_starts,
            checkpoint_every=args.checkpoint_every,
        )
    elif args.command == "select":
        result = jobs.select(sweep=args.sweep, validation=args.validation, out=args.out)
    elif args.command in ("validate", "posthoc"):
        job = dict(
            seed=args.seed,
            sweep=args.sweep,
            data_dir=args.data,
            runs_dir=args.runs,
            out=args.out,
            model=args.model,
            val_size=args.val_size,
            batch_size=args.batch_size,
        )
        if args.command == "validate":
            result = jobs.validate(**job)
        else:
            result = jobs.posthoc(**job, selection=args.selection)
    else:
        table = jobs.tables(
            scores_dir=args.scores,
            data_dir=args.data,
            methods=args.methods,
            seeds=args.seeds,
            out=args.out,
            report=args.report,
        )
        result = {"methods": table["method"].tolist()}
    print(json.dumps(result, sort_keys=True, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
