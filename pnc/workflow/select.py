"""Select per (env, method) and write the results tables: ``python -m pnc.workflow.select``.

Reads per-job metric CSVs and writes ``all_configs.csv``, ``results.csv`` and ``selection.json``
(see :mod:`pnc.study.selection`).
"""

from __future__ import annotations

from pnc.workflow import limit_threads, parser, setup_logging


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
    )
    for env, by_method in selection.items():
        for method, rec in by_method.items():
            log.info(
                "%s %s: %s, %s (val NLL %.4g)",
                env,
                method,
                rec["config"],
                rec["calibration"],
                rec["val_nll"],
            )


if __name__ == "__main__":
    main()
