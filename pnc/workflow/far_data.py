"""Uniform-random-action (Far) rollouts of one environment: ``python -m pnc.workflow.far_data``.

``--threads N``, then the arguments of ``python -m pnc.data.far`` (:func:`pnc.data.far.main`); prints
its JSON summary and exits with its status.
"""

from __future__ import annotations

from pnc.workflow import run_library_cli


def main(argv: list[str] | None = None) -> int:
    return run_library_cli(
        "pnc.data.far",
        "Far (uniform-random-action) dataset of one environment (pnc.data.far).",
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
