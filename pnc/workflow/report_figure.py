"""One figure of the study (PDF and PNG): ``python -m pnc.workflow.report_figure``.

``--threads N``, then ``frontier`` or ``metrics`` and the arguments of that command of
``python -m pnc.report`` (:func:`pnc.report.__main__.main`); exits with its status.
"""

from __future__ import annotations

from pnc.workflow import forwarding_parser, limit_threads


def main(argv: list[str] | None = None) -> int:
    p = forwarding_parser("The ID/OOD frontier or headline-metrics figure (pnc.report).")
    p.add_argument("kind", choices=("frontier", "metrics"), help="which figure")
    args, rest = p.parse_known_args(argv)
    limit_threads(args.threads)

    from pnc.report.__main__ import main as report_main

    return report_main([args.kind, *rest])


if __name__ == "__main__":
    raise SystemExit(main())
