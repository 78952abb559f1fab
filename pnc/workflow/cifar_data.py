"""Check the CIFAR-10 and OpenOOD v1.5 files and write their arrays once: ``python -m pnc.workflow.cifar_data``.

``--threads N``, then the arguments of ``python -m pnc.cifar.cli prepare`` (:mod:`pnc.cifar.jobs`);
exits with its status.
"""

from __future__ import annotations

from pnc.workflow import run_library_cli


def main(argv: list[str] | None = None) -> int:
    return run_library_cli(
        "pnc.cifar.cli",
        "Check the CIFAR-10 and OpenOOD v1.5 files and write their arrays once (pnc.cifar.cli prepare).",
        argv,
        command=("prepare",),
    )


if __name__ == "__main__":
    raise SystemExit(main())
