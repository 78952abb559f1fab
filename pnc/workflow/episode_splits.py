"""Episode splits of one (env, seed): ``python -m pnc.workflow.episode_splits``.

``--threads N``, then the arguments of ``python -m pnc.data`` (:func:`pnc.data.__main__.main`);
writes ``splits.npz`` and ``manifest.json`` and exits with its status.
"""

from __future__ import annotations

from pnc.workflow import run_library_cli


def main(argv: list[str] | None = None) -> int:
    return run_library_cli(
        "pnc.data.__main__",
        "Train/val/id/near/mid/far episode splits of one (env, seed) (pnc.data).",
        argv,
    )


if __name__ == "__main__":
    raise SystemExit(main())
