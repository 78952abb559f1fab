"""One method on one seed: construction, selection on validation NLL, OOD confidences: ``python -m pnc.workflow.cifar_posthoc``.

``--threads N``, then the arguments of ``python -m pnc.cifar.cli posthoc`` (:mod:`pnc.cifar.jobs`);
exits with its status.
"""

from __future__ import annotations

from pnc.workflow import run_library_cli


def main(argv: list[str] | None = None) -> int:
    return run_library_cli(
        "pnc.cifar.cli",
        "One method on one seed: construction, selection on validation NLL, OOD confidences (pnc.cifar.cli posthoc).",
        argv,
        command=("posthoc",),
    )


if __name__ == "__main__":
    raise SystemExit(main())
