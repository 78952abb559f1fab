"""Train the ARS behaviour policies of one environment: ``python -m pnc.workflow.behaviour_policies``.

``--threads N``, then the arguments of ``python -m pnc.data.behaviour`` (:func:`pnc.data.behaviour.main`);
exits with its status (2: the levels' returns are not ordered).
"""

from __future__ import annotations

from pnc.workflow import run_library_cli


def main(argv: list[str] | None = None) -> int:
    return run_library_cli(
        "pnc.data.behaviour",
        "Train the behaviour policies of one environment (pnc.data.behaviour).",
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
