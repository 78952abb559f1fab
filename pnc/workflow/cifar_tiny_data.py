"""The generated tiny CIFAR-10 + OpenOOD benchmark in the real file formats (CI scale): ``python -m pnc.workflow.cifar_tiny_data``.

``--threads N``, then the arguments of ``python -m pnc.cifar.cli tiny-data`` (:mod:`pnc.cifar.jobs`);
exits with its status.
"""

from __future__ import annotations

from pnc.workflow import run_library_cli


def main(argv: list[str] | None = None) -> int:
    return run_library_cli(
        "pnc.cifar.cli",
        "The generated tiny CIFAR-10 + OpenOOD benchmark in the real file formats (CI scale) (pnc.cifar.cli tiny-data).",
        argv,
        command=("tiny-data",),
    )


if __name__ == "__main__":
    raise SystemExit(main())
