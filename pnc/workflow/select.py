"""Select per (env, method) and write the results tables: ``python -m pnc.workflow.select``.

Reads per-job metric CSVs and writes ``all_configs.csv``, ``results.csv`` and ``selection.json``
(see :mod:`pnc.study.selection`). With ``--methods-json`` (the config's ``methods`` mapping) and
``--calibrations`` every row the grid implies is expected, and missing ones fail the stage naming
them and their table; without, the expectation is derived from the tables themselves.
"""

from __future__ import annotations

from pnc.workflow import json_arg, limit_threads, parser, setup_logging


def main(argv: list[str] | None = None) -> None:
    p = parser(
        "Select the (configuration, calibration) pair with the lowest seed-mean validation NLL "
        "per (env, method)."
    )
    p.add_argument("tables", nargs="+", help="metric CSVs of the evaluation jobs")
    p.add_argument(
        "--seeds", type=int, nargs="+", required=True, help="seeds every config must have"
    )
    p.add_argument(
        "--methods-json",
        type=json_arg,
        help="the config's 'methods' mapping as JSON: every grid point's rows are expected",
    )
    p.add_argument(
        "--calibrations",
        nargs="+",
        metavar="VARIANT",
        help="calibration variants every configuration is scored in (default: all, with "
        "--methods-json; else those in the tables)",
    )
    p.add_argument("--env", action="append", help="environment(s) the tables must cover")
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

    from pnc.study.selection import select_and_write

    selection = select_and_write(
        args.tables,
        seeds=args.seeds,
        all_configs_path=args.all_configs,
        results_path=args.results,
        selection_path=args.selection,
        methods=args.methods_json,
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


if __name__ == "__main__":
    main()
