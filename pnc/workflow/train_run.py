"""Train one run for (env, seed): ``python -m pnc.workflow.train_run`` (see :func:`pnc.study.train_run`)."""

from __future__ import annotations

import json

from pnc.workflow import json_arg, limit_threads, parser, setup_logging


def main(argv: list[str] | None = None) -> None:
    p = parser("Train one shared training run on the train split of (env, seed).")
    p.add_argument("--env", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--run-id", required=True, help="e.g. base, deep_ensemble-n_members5")
    p.add_argument(
        "--spec", type=json_arg, required=True, help='e.g. {"kind": "base", "options": []}'
    )
    p.add_argument("--splits", required=True, help="directory with splits.npz + manifest.json")
    p.add_argument("--out", required=True, help="directory for run.msgpack + run.json")
    p.add_argument("--model", type=json_arg, default={}, help="config 'model' as JSON")
    p.add_argument("--train", type=json_arg, default={}, help="config 'train' as JSON")
    args = p.parse_args(argv)
    cpus = limit_threads(args.threads)
    log = setup_logging()
    log.info("train %s seed %d run %s on CPUs %s", args.env, args.seed, args.run_id, cpus)

    from pnc.study.stages import spec_from_dict, train_run

    spec = spec_from_dict(args.spec)
    if spec.run_id != args.run_id:
        p.error(f"--spec gives run id {spec.run_id!r}, not --run-id {args.run_id!r}")
    summary = train_run(
        env=args.env,
        seed=args.seed,
        spec=spec,
        splits_dir=args.splits,
        out_dir=args.out,
        model=args.model,
        train=args.train,
    )
    log.info("done: %s", json.dumps(summary))


if __name__ == "__main__":
    main()
