"""Download the missing CIFAR and OpenOOD v1.5 files, checksums verified: ``python -m pnc.workflow.cifar_fetch``.

``--threads N``, then the arguments of ``python -m pnc.cifar.cli fetch`` (:mod:`pnc.cifar.fetch`);
exits with its status.
"""

from __future__ import annotations

from pnc.workflow import run_library_cli


def main(argv: list[str] | None = None) -> int:
    return run_library_cli(
        "pnc.cifar.cli",
        "Download the missing CIFAR and OpenOOD v1.5 files, checksums verified (pnc.cifar.cli fetch).",
        argv,
        command=("fetch",),
    )


if __name__ == "__main__":
    raise SystemExit(main())
