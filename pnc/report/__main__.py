"""Command line of the study's report: tables, statistics and figures from the results CSVs.

::

    python -m pnc.report tables results/results.csv --out results/tables
    python -m pnc.report tables results/results.csv --out DIR --substitute deep_ensemble=deep_ensemble_mixture
    python -m pnc.report frontier results/all_configs.csv --out figures/frontier/Ant-v5 --env Ant-v5
    python -m pnc.report metrics results/results.csv --out figures/metrics/Ant-v5 --env Ant-v5
    python -m pnc.report costs benchmarks --envs 11 --seeds 10 --cores 2 8 32 [--markdown F] [--markdown-into DOC]
    python -m pnc.report export STUDY_DIR --out docs/results/offline [--force]
    python -m pnc.report check docs/results/offline --paper docs/results/paper
    python -m pnc.report compare docs/results/offline --paper docs/results/paper
    python -m pnc.report piece ENV SEED FILE... --out results/pieces/ENV/seedS.json
    python -m pnc.report store-piece results/pieces/ENV/seedS.json --store docs/results/offline/pieces
    python -m pnc.report restore-pieces docs/results/offline/pieces --study STUDY_DIR [--skip-methods M...]
    python -m pnc.report variant-config VARIANT.yaml --reference REF.yaml --reuse STORE --out FILE
    python -m pnc.report verify-piece ENV SEED --study STUDY_DIR [--store DIR] [--out F]

``tables`` writes ``DIR/{name}.tex|.md|.csv`` for every table of :mod:`pnc.report.tables` and the
statistics of :func:`pnc.report.stats.compute_statistics` as ``DIR/stats.json``. ``frontier`` and
``metrics`` write ``STEM.pdf`` and ``STEM.png`` (:mod:`pnc.report.figures`); ``--env`` may repeat,
and omitted means every environment (``metrics`` needs exactly one). ``costs`` prints the measured
CPU time per (env, seed) and the projected cost of an ``--envs x --seeds`` protocol as JSON
(:mod:`pnc.report.costs`), and with ``--markdown``/``--markdown-into`` also a per-environment
table of it. ``export`` turns a finished study's directory into a reference folder (its data, cost
summary, tables and PNG figures) and ``check`` rebuilds such a folder's tables from
its ``results.csv`` and exits with status 1 when any differs (:mod:`pnc.report.export`);
``compare`` writes the folder's ``comparison.md``, its Table 1 beside the paper's
(:mod:`pnc.report.compare`), which ``check --paper`` rebuilds too.
``piece``, ``store-piece`` and ``restore-pieces`` list, store and restore one (env, seed)'s small
outputs of a long study (:mod:`pnc.report.pieces`); ``variant-config`` writes the config of a
variant's own pieces (the methods it changes against its reference) and prints those methods
(:mod:`pnc.report.variant`). ``verify-piece`` compares a re-run (env, seed) with the stored one, to
the byte and against the stored seeds' spread, and exits 1 when it lies outside
(:mod:`pnc.report.verify`). A malformed or missing input table exits with status 2 and a message
naming the problem.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pnc.runtime.io import write_json

# Each subcommand imports its own module when it runs: listing or storing a piece needs neither
# pandas nor JAX, and a figure needs no statistics.


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pnc.report",
        description="Tables, statistics and figures of the MuJoCo study from its results CSVs.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    tb = sub.add_parser(
        "tables",
        help="ranks, Wilcoxon-Holm tests and the paper's tables from results.csv",
        description="Ranks, Wilcoxon-Holm tests and the paper's tables from a long-format "
        "results CSV.",
    )
    tb.add_argument(
        "results", help="long-format CSV (env, method, seed, split, metric, value, ...)"
    )
    tb.add_argument("--out", required=True, help="directory for the tables and stats.json")
    tb.add_argument(
        "--alpha", type=float, default=None,
        help="Holm family-wise level (default: pnc.report.stats.ALPHA)",
    )  # fmt: skip
    tb.add_argument(
        "--substitute",
        action="append",
        default=[],
        metavar="TARGET=SOURCE",
        help="show SOURCE's rows as TARGET (repeatable), e.g. "
        "deep_ensemble=deep_ensemble_mixture ranks the Deep Ensemble's mixture reading",
    )
    fr = sub.add_parser("frontier", help="ID/OOD frontier from all_configs.csv")
    fr.add_argument(
        "table",
        help="all_configs.csv (needs a boolean 'selected' column; its val rows choose each "
        "configuration's calibration variant)",
    )
    me = sub.add_parser("metrics", help="one environment's headline metrics from results.csv")
    me.add_argument("table", help="results.csv")
    for p in (fr, me):
        p.add_argument("--out", required=True, help="output stem: writes STEM.pdf and STEM.png")
        p.add_argument("--env", action="append", help="environment (repeatable; default: all)")
    co = sub.add_parser(
        "costs", help="measured cost per (env, seed) and projected protocol cost (JSON)"
    )
    co.add_argument("benchmarks", help="the workflow's benchmarks/ directory")
    co.add_argument(
        "--logs",
        default=None,
        help="the workflow's logs/ directory: exact CPU time and peak memory from each job's log "
        "where it holds the job's process record (default: the sampled benchmark values only)",
    )
    co.add_argument("--envs", type=int, default=11, help="environments to project (paper: 11)")
    co.add_argument("--seeds", type=int, default=10, help="seeds to project (paper: 10)")
    co.add_argument("--cores", type=int, nargs="+", default=[2, 8, 32], help="machine sizes")
    co.add_argument("--out", default=None, help="also write the JSON here")
    co.add_argument(
        "--markdown",
        default=None,
        help="also write the per-environment table and the projection here (markdown)",
    )
    co.add_argument(
        "--markdown-into",
        default=None,
        help="replace the per-environment table between the cost markers of this markdown file "
        "(pnc.report.costs.BLOCK_BEGIN ... BLOCK_END)",
    )
    ex = sub.add_parser(
        "export", help="a finished study's data, costs, tables and figures as a reference folder"
    )
    ex.add_argument(
        "study", help="the directory the study ran in (results/, figures/, benchmarks/)"
    )
    ex.add_argument("--out", required=True, help="the reference folder to write")
    ex.add_argument("--force", action="store_true", help="replace the files of a non-empty folder")
    ex.add_argument("--envs", type=int, default=11, help="environments to project (paper: 11)")
    ex.add_argument("--seeds", type=int, default=10, help="seeds to project (paper: 10)")
    ch = sub.add_parser(
        "check", help="rebuild a reference folder's tables and compare with the committed ones"
    )
    ch.add_argument("folder", help="reference folder (results.csv and tables/)")
    ch.add_argument("--paper", help="the paper's folder, to check the folder's comparison.md")
    cp = sub.add_parser("compare", help="a reference folder's Table 1 beside the paper's")
    cp.add_argument("folder", help="reference folder (results.csv)")
    cp.add_argument(
        "--paper", required=True, help="the paper's folder (results.csv, table1_printed.csv)"
    )
    cp.add_argument("--out", help="file to write (default: FOLDER/comparison.md)")
    pc = sub.add_parser("piece", help="list one (env, seed)'s output files with their hashes")
    pc.add_argument("env")
    pc.add_argument("seed", type=int)
    pc.add_argument("files", nargs="+", help="the (env, seed)'s output files")
    pc.add_argument("--out", required=True, help="the manifest JSON to write")
    pc.add_argument("--study", default=".", help="the study directory (paths are relative to it)")
    sp = sub.add_parser("store-piece", help="copy one (env, seed)'s listed outputs into a store")
    sp.add_argument("manifest", help="results/pieces/{env}/seed{S}.json")
    sp.add_argument("--study", default=".", help="the study directory")
    sp.add_argument("--store", required=True, help="e.g. docs/results/offline/pieces")
    rp = sub.add_parser("restore-pieces", help="copy a store's pieces back into a study directory")
    rp.add_argument("store")
    rp.add_argument("--study", required=True, help="the study directory to fill")
    rp.add_argument(
        "--skip-methods",
        nargs="*",
        default=[],
        help="leave out these methods' tables and evaluation benchmarks (a variant's own)",
    )
    va = sub.add_parser(
        "variant-config",
        help="the config of a variant's own pieces: the methods it changes against its reference",
    )
    va.add_argument("variant", help="the variant's study config")
    va.add_argument("--reference", required=True, help="the reference's study config")
    va.add_argument("--reuse", required=True, help="the reference's piece store")
    va.add_argument("--out", required=True, help="the config file to write")
    vp = sub.add_parser(
        "verify-piece",
        help="a re-run (env, seed) against the stored piece: bytes, selection, seeds' spread",
    )
    vp.add_argument("env")
    vp.add_argument("seed", type=int)
    vp.add_argument("--study", required=True, help="the re-run's study directory")
    vp.add_argument(
        "--store", default="docs/results/offline/pieces", help="the reference's pieces store"
    )
    vp.add_argument(
        "--alpha", type=float, default=None,
        help="family-wise level of the metric check (default: pnc.report.verify.ALPHA)",
    )  # fmt: skip
    vp.add_argument("--out", help="write the full report (every row checked) as JSON")
    vp.add_argument(
        "--partial",
        action="store_true",
        help="check only the methods the re-run has tables of (the others are listed)",
    )
    return parser


def _verify(args: argparse.Namespace) -> int:
    from pnc.report import verify

    if args.alpha is None:
        args.alpha = verify.ALPHA
    if not 0.0 < args.alpha < 1.0:
        raise ValueError(f"--alpha must lie in (0, 1), got {args.alpha}")
    report = verify.verify_piece(
        args.study, args.store, args.env, args.seed, alpha=args.alpha, partial=args.partial
    )
    if args.out:
        write_json(Path(args.out), report)
    for line in verify.summary(report):
        print(line)
    return 0 if report["verdict"] != "outside the seeds' spread" else 1


def _export(args: argparse.Namespace) -> int:
    from pnc.report import export

    written = export.export_study(
        args.study, args.out, n_envs=args.envs, n_seeds=args.seeds, force=args.force
    )
    print(f"{len(written)} file(s) written to {args.out}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from pnc.report import export

    problems = export.check_folder(args.folder, args.paper)
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        return 1
    print(f"{args.folder}: every table equals the one rebuilt from results.csv")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from pnc.report import compare

    path = compare.write_comparison(args.folder, args.paper, args.out)
    print(f"wrote {path}")
    return 0


def _pieces(args: argparse.Namespace) -> int:
    from pnc.report import pieces

    if args.command == "piece":
        manifest = pieces.write_manifest(
            args.env, args.seed, args.files, args.out, study_dir=args.study
        )
        print(f"{args.out}: {len(manifest['files'])} file(s) of ({args.env}, seed {args.seed})")
    elif args.command == "store-piece":
        written = pieces.store_piece(args.manifest, args.study, args.store)
        print(f"{len(written)} file(s) stored in {args.store}")
    else:
        written = pieces.restore_pieces(args.store, args.study, skip=args.skip_methods)
        print(f"{len(written)} file(s) restored into {args.study}")
    return 0


def _variant_config(args: argparse.Namespace) -> int:
    from pnc.report import variant

    changed = variant.write_study_config(args.variant, args.reference, args.reuse, args.out)
    print(" ".join(changed))
    return 0


def _costs(args: argparse.Namespace) -> int:
    from pnc.report import costs

    summary = costs.summarize(
        costs.read_benchmarks(args.benchmarks, args.logs),
        n_envs=args.envs,
        n_seeds=args.seeds,
        cores=args.cores,
    )
    block = costs.render_markdown(summary)
    # the document is checked for its markers before anything is written
    into = Path(args.markdown_into) if args.markdown_into else None
    document = costs.replace_block(into.read_text(), block) if into else None
    if args.out:
        write_json(Path(args.out), summary)
    if args.markdown:
        Path(args.markdown).write_text(block)
    if into:
        into.write_text(document)
    print(json.dumps(summary, indent=2, sort_keys=True))
    return 0


def _substitutions(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        target, sep, source = pair.partition("=")
        if not sep or not target or not source:
            raise ValueError(f"--substitute takes TARGET=SOURCE, got {pair!r}")
        if target in out:
            raise ValueError(f"--substitute names {target!r} twice")
        out[target] = source
    return out


def _tables(args: argparse.Namespace) -> int:
    from pnc.report.tables import write_tables_and_stats

    result = write_tables_and_stats(
        args.results, args.out, alpha=args.alpha, substitutions=_substitutions(args.substitute)
    )
    print(
        f"{len(result['envs'])} env(s), methods {result['methods']}: tables and stats.json "
        f"written to {args.out}"
    )
    return 0


def _figure(args: argparse.Namespace) -> int:
    from pnc.report import figures
    from pnc.studies.mujoco.results_table import load

    if args.command == "frontier":
        # the val rows choose each configuration's calibration variant; a non-finite value of
        # a drawn point is rejected by the figure itself
        df = load(args.table, require_selected=True, drop_selection_split=False, finite=False)
        fig = figures.frontier_figure(df, args.env)
    else:
        df = load(args.table)
        envs = figures.check_envs(df, args.env)
        if len(envs) != 1:
            raise figures.FigureError(f"the metrics figure needs exactly one --env; got {envs}")
        fig = figures.metrics_figure(df, envs[0])
    for path in figures.save(fig, args.out):
        print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; returns the exit status (2 on a malformed or missing input table)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "tables":
        if args.alpha is None:
            from pnc.report.stats import ALPHA

            args.alpha = ALPHA
        if not 0.0 < args.alpha < 1.0:
            parser.error(f"--alpha must lie in (0, 1), got {args.alpha}")
    commands = {
        "tables": _tables,
        "costs": _costs,
        "export": _export,
        "check": _check,
        "compare": _compare,
        "piece": _pieces,
        "store-piece": _pieces,
        "restore-pieces": _pieces,
        "verify-piece": _verify,
        "variant-config": _variant_config,
    }
    try:
        return commands.get(args.command, _figure)(args)
    # a malformed input: the report's own errors (ResultsError, FigureError, BenchmarkError,
    # PieceError, ArtifactError) are all ValueErrors
    except (FileNotFoundError, FileExistsError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
