"""``python -m pnc.studies.mujoco.data ENV --source minari|offline --seed S --out DIR``: build or reuse the splits.

Writes ``DIR/splits.npz`` and ``DIR/manifest.json`` and prints the source, dataset ids, dims and
transition counts per split as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys

from pnc.studies.mujoco.data.envs import ENVS
from pnc.studies.mujoco.data.splits import SOURCES, TARGETS, SplitConfig, build_splits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pnc.studies.mujoco.data", description="Build the train/val/id/near/mid/far splits."
    )
    parser.add_argument("env", help=f"one of {', '.join(ENVS)}")
    parser.add_argument("--source", choices=SOURCES, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", required=True, help="directory for splits.npz + manifest.json")
    parser.add_argument(
        "--minari-root", default=None, help="Minari root (default $MINARI_DATASETS_PATH)"
    )
    parser.add_argument("--download", action="store_true", help="download missing Minari datasets")
    parser.add_argument(
        "--transitions-per-regime",
        type=int,
        default=SplitConfig.transitions_per_regime,
        help="rows of each regime's pool (ID train+val, Near, Mid, Far)",
    )
    parser.add_argument(
        "--val-fraction", type=float, default=0.1, help="fraction of the ID pool held out as val"
    )
    parser.add_argument(
        "--id-transitions",
        type=int,
        default=None,
        help="rows of the episode-disjoint ID evaluation split (default: the pool size)",
    )
    parser.add_argument("--target", choices=TARGETS, default="next_state")
    parser.add_argument(
        "--force", action="store_true", help="replace splits with different content"
    )
    args = parser.parse_args(argv)
    config = SplitConfig(
        transitions_per_regime=args.transitions_per_regime,
        val_fraction=args.val_fraction,
        id_transitions=args.id_transitions,
        target=args.target,
    )
    print(
        f"[pnc.studies.mujoco.data] {args.env} seed {args.seed} from {args.source} -> {args.out}", file=sys.stderr
    )
    manifest = build_splits(
        args.env,
        args.out,
        source=args.source,
        seed=args.seed,
        root=args.minari_root,
        download=args.download,
        config=config,
        force=args.force,
    )
    print(f"[pnc.studies.mujoco.data] {manifest['status']} {args.out}", file=sys.stderr)
    keys = ("status", "env", "seed", "data_source", "dataset_ids", "dims", "counts", "episodes")
    print(json.dumps({k: manifest[k] for k in keys}, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
