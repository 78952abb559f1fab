"""``python -m pnc.data ENV --source minari|offline --seed S --out DIR``: build or reuse the splits.

Writes ``DIR/splits.npz`` and ``DIR/manifest.json`` and prints the source, dataset ids, dims and
transition counts per split as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys

from pnc.data.envs import ENVS
from pnc.data.splits import SOURCES, SplitConfig, build_splits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pnc.data", description="Build the train/val/id/near/mid/far splits."
    )
    parser.add_argument("env", help=f"one of {', '.join(ENVS)}")
    parser.add_argument("--source", choices=SOURCES, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", required=True, help="directory for splits.npz + manifest.json")
    parser.add_argument(
        "--minari-root", default=None, help="Minari root (default $MINARI_DATASETS_PATH)"
    )
    parser.add_argument("--download", action="store_true", help="download missing Minari datasets")
    parser.add_argument("--val-fraction", type=float, default=0.1)
    parser.add_argument("--id-fraction", type=float, default=0.1)
    parser.add_argument("--max-train", type=int, default=None, help="cap on train transitions")
    parser.add_argument("--max-val", type=int, default=None, help="cap on val (default --max-eval)")
    parser.add_argument("--max-eval", type=int, default=None, help="cap on id/near/mid/far")
    parser.add_argument(
        "--force", action="store_true", help="replace splits with different content"
    )
    args = parser.parse_args(argv)
    config = SplitConfig(
        val_fraction=args.val_fraction,
        id_fraction=args.id_fraction,
        max_train=args.max_train,
        max_val=args.max_val,
        max_eval=args.max_eval,
    )
    print(
        f"[pnc.data] {args.env} seed {args.seed} from {args.source} -> {args.out}", file=sys.stderr
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
    print(f"[pnc.data] {manifest['status']} {args.out}", file=sys.stderr)
    keys = ("status", "env", "seed", "data_source", "dataset_ids", "dims", "counts", "episodes")
    print(json.dumps({k: manifest[k] for k in keys}, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
