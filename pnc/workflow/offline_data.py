"""Roll the behaviour policies out into offline datasets: ``python -m pnc.workflow.offline_data``.

``--threads N``, then the arguments of ``python -m pnc.data.offline`` (:func:`pnc.data.offline.main`);
prints its JSON summary and exits with its status.
"""

from __future__ import annotations

from pnc.workflow import run_library_cli


def main(argv: list[str] | None = None) -> int:
    return run_library_cli(
        "pnc.data.offline",
        "Offline behaviour datasets of one environment (pnc.data.offline).",
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
