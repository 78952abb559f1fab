"""Metrics, Table 2 and the sweep table of the CIFAR-10 study: ``python -m pnc.workflow.cifar_tables``.

``--threads N``, then the arguments of ``python -m pnc.cifar.cli tables`` (:mod:`pnc.cifar.jobs`);
exits with its status.
"""

from __future__ import annotations

from pnc.workflow import run_library_cli


def main(argv: list[str] | None = None) -> int:
    return run_library_cli(
        "pnc.cifar.cli",
        "Metrics, Table 2 and the sweep table of the CIFAR-10 study (pnc.cifar.cli tables).",
        argv,
        command=("tables",),
    )


if __name__ == "__main__":
    raise SystemExit(main())
