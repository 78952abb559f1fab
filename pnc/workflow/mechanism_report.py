"""The mechanism figures of one environment or the mechanism table:
``python -m pnc.workflow.mechanism_report figures|table``.

``figures``: :func:`pnc.report.mechanism_figures.write_mechanism_figures`;
``table``: :func:`pnc.report.mechanism_table.write_mechanism_table`.
"""

from __future__ import annotations

from pnc.workflow import limit_threads, parser, setup_logging


def main(argv: list[str] | None = None) -> None:
    p = parser("Mechanism figures (per environment) or the mechanism table.")
    p.add_argument("kind", choices=("figures", "table"))
    p.add_argument("mechanism", nargs="+", help="mechanism parquet files")
    p.add_argument("--all-configs", required=True, help="all_configs.csv (Figure 3A)")
    p.add_argument("--env", help="the environment (figures)")
    p.add_argument("--out", required=True, help="output directory")
    args = p.parse_args(argv)
    limit_threads(args.threads)
    log = setup_logging()
    if args.kind == "figures" and not args.env:
        p.error("figures needs --env")

    if args.kind == "figures":
        from pnc.report.mechanism_figures import write_mechanism_figures

        paths = write_mechanism_figures(args.mechanism, args.all_configs, args.env, args.out)
        log.info("wrote %s", ", ".join(map(str, paths)))
    else:
        from pnc.report.mechanism_table import write_mechanism_table

        stats = write_mechanism_table(args.mechanism, args.all_configs, args.out)
        log.info("mechanism table:\n%s", stats.to_string())


if __name__ == "__main__":
    main()
