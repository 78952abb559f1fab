"""One CIFAR-10 training run of one seed, resuming from its last epoch: ``python -m pnc.workflow.cifar_train``.

``--threads N``, then the arguments of ``python -m pnc.cifar.cli train`` (:mod:`pnc.cifar.jobs`);
exits with its status.
"""

from __future__ import annotations

from pnc.workflow import run_library_cli


def main(argv: list[str] | None = None) -> int:
    return run_library_cli(
        "pnc.cifar.cli",
        "One CIFAR-10 training run of one seed, resuming from its last epoch (pnc.cifar.cli train).",
        argv,
        command=("train",),
    )


if __name__ == "__main__":
    raise SystemExit(main())
