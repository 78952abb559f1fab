"""Evaluate every configuration of one (env, seed, method, run): ``python -m pnc.workflow.evaluate_run``.

See :func:`pnc.study.stages.evaluate_run`; writes one long CSV of metric rows, one block per
configuration and calibration variant (``--calibrations``, default ``raw vcal``).
"""

from __future__ import annotations

import json

from pnc.workflow import json_arg, limit_threads, parser, setup_logging


def main(argv: list[str] | None = None) -> None:
    p = parser("Post-hoc construction, prediction and metrics for one method on one training run.")
    p.add_argument("--env", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--method", required=True)
    p.add_argument("--run-id", required=True)
    p.add_argument("--run", required=True, help="directory of the training run")
    p.add_argument("--splits", required=True, help="directory with splits.npz + manifest.json")
    p.add_argument("--grid", type=json_arg, required=True, help="config 'methods.<method>' as JSON")
    p.add_argument(
        "--calibrations",
        nargs="+",
        metavar="VARIANT",
        help="calibration variants to score (pnc.study.results.CALIBRATIONS): raw (as "
        "constructed), vcal (variance scaled on val); default: all",
    )
    p.add_argument("--out", required=True, help="metric table (CSV)")
    args = p.parse_args(argv)
    cpus = limit_threads(args.threads)
    log = setup_logging()
    log.info(
        "evaluate %s seed %d %s on run %s (CPUs %s)",
        args.env,
        args.seed,
        args.method,
        args.run_id,
        cpus,
    )

    from pnc.io import write_csv
    from pnc.study.results import CALIBRATIONS
    from pnc.study.stages import evaluate_run

    calibrations = CALIBRATIONS if args.calibrations is None else tuple(args.calibrations)
    frame, timings = evaluate_run(
        env=args.env,
        seed=args.seed,
        method_id=args.method,
        run_id=args.run_id,
        run_dir=args.run,
        splits_dir=args.splits,
        method_entry=args.grid,
        calibrations=calibrations,
    )
    for t in timings:
        log.info("timing %s", json.dumps(t))
    write_csv(frame, args.out)
    log.info(
        "wrote %d rows for %d configurations (%s) to %s",
        len(frame),
        len(timings),
        ", ".join(calibrations),
        args.out,
    )


if __name__ == "__main__":
    main()
