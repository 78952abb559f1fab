"""Check (and with ``--download`` fetch) an env's Minari datasets: ``python -m pnc.workflow.minari_data``.

Writes a JSON record of the dataset ids and episode counts (see :func:`pnc.study.fetch_minari`).
"""

from __future__ import annotations

from pnc.workflow import limit_threads, parser, setup_logging


def main(argv: list[str] | None = None) -> None:
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

    from pnc.io import atomic_path, write_json
    from pnc.study.stages import fetch_minari

    record = fetch_minari(args.env, root=args.minari_root, download=args.download)
    with atomic_path(args.out) as tmp:
        write_json(tmp, record)
    log.info("%s", record)


if __name__ == "__main__":
    main()
