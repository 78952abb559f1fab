"""Ranks, Wilcoxon-Holm tests and the paper's tables: ``python -m pnc.workflow.report_tables``.

``--threads N``, then the arguments of ``python -m pnc.report tables`` (:func:`pnc.report.__main__.main`);
exits with its status.
"""

from __future__ import annotations

from pnc.workflow import run_library_cli


def main(argv: list[str] | None = None) -> int:
    return run_library_cli(
        "pnc.report.__main__",
        "The study's tables and stats.json from results.csv (pnc.report tables).",
        argv,
        command=("tables",),
    )


if __name__ == "__main__":
    raise SystemExit(main())
