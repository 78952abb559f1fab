"""Store the selected P&C configuration's members of one (env, seed): ``python -m pnc.workflow.pnc_members``.

See :func:`pnc.study.mechanism.write_pnc_members`; writes ``OUT/members.msgpack`` and
``OUT/members.json``.
"""

from __future__ import annotations

from pnc.workflow import json_arg, limit_threads, parser, setup_logging


def main(argv: list[str] | None = None) -> None:
    p = parser("Build and store the selected P&C members of one (env, seed).")
    p.add_argument("--env", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--run", required=True, help="directory of the base training run")
    p.add_argument("--splits", required=True, help="directory with splits.npz + manifest.json")
    p.add_argument("--selection", required=True, help="the environment's selection.json")
    p.add_argument("--grid", type=json_arg, required=True, help="config 'methods.pnc' as JSON")
    p.add_argument("--out", required=True, help="output directory")
    args = p.parse_args(argv)
    cpus = limit_threads(args.threads)
    log = setup_logging()
    log.info("P&C members of %s seed %d (CPUs %s)", args.env, args.seed, cpus)

    from pnc.io import read_json
    from pnc.study.mechanism import write_pnc_members

    record = write_pnc_members(
        env=args.env,
        seed=args.seed,
        run_dir=args.run,
        splits_dir=args.splits,
        selection=read_json(args.selection),
        method_entry=args.grid,
        out_dir=args.out,
    )
    log.info(
        "%s: %d members, %d bytes (%.0f per member), built in %.1f s",
        record["config_id"],
        record["n_members"],
        record["bytes"],
        record["bytes_per_member"],
        record["build_s"],
    )


if __name__ == "__main__":
    main()
