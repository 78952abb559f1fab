"""Concatenate per-environment results into the study's tables: ``python -m pnc.workflow.aggregate``."""

from __future__ import annotations

from pnc.workflow import limit_threads, parser, setup_logging


def main(argv: list[str] | None = None) -> None:
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

    from pnc.study.selection import concatenate_outputs

    sizes = concatenate_outputs(args.all_configs, args.results, args.selection, args.out_dir)
    log.info("wrote %s", sizes)


if __name__ == "__main__":
    main()
