"""Per-point mechanism diagnostics of one (env, seed): ``python -m pnc.workflow.mechanism_diagnostics``.

See :func:`pnc.study.mechanism.mechanism_frame`; writes one parquet file (tidy long table) and a
JSON record of what was measured.
"""

from __future__ import annotations

import json

from pnc.workflow import json_arg, limit_threads, parser, setup_logging


def main(argv: list[str] | None = None) -> None:
    p = parser("Mechanism diagnostics (paper Figures 1 B/C and 3) of one (env, seed).")
    p.add_argument("--env", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--run", required=True, help="directory of the base training run")
    p.add_argument("--splits", required=True, help="directory with splits.npz + manifest.json")
    p.add_argument("--members", required=True, help="directory of the stored P&C members")
    p.add_argument("--selection", required=True, help="the environment's selection.json")
    p.add_argument("--methods-json", type=json_arg, required=True, help="config 'methods' as JSON")
    p.add_argument("--settings", type=json_arg, default={}, help="config 'mechanism' as JSON")
    p.add_argument("--out", required=True, help="output parquet file")
    p.add_argument("--info", required=True, help="output JSON record")
    args = p.parse_args(argv)
    cpus = limit_threads(args.threads)
    log = setup_logging()
    log.info("mechanism diagnostics of %s seed %d (CPUs %s)", args.env, args.seed, cpus)

    from pnc.io import read_json, write_json
    from pnc.study.mechanism import MechanismSettings, mechanism_frame, write_mechanism

    settings = {k: v for k, v in args.settings.items() if k not in ("enabled", "seeds")}
    frame, info = mechanism_frame(
        env=args.env,
        seed=args.seed,
        run_dir=args.run,
        splits_dir=args.splits,
        members_dir=args.members,
        selection=read_json(args.selection),
        methods_entry=args.methods_json,
        settings=MechanismSettings(**settings),
    )
    write_mechanism(frame, args.out)
    write_json(args.info, info)
    log.info("wrote %d rows to %s: %s", len(frame), args.out, json.dumps(info))


if __name__ == "__main__":
    main()
