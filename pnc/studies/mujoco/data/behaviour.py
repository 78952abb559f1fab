"""Command line of the behaviour policies: train (or build) one environment's levels into a store.

Command line (writes ``OUT/{Env}/{level}.npz``, ``OUT/{Env}/checkpoints.npz`` and
``OUT/{Env}/policies.json``; exits with status 2 when the levels' returns are not ordered)::

    python -m pnc.studies.mujoco.data.behaviour ENV --out DIR [--seed S --iterations K --action-noise F --force]
        [--state FILE --save-every N --workers W]
    python -m pnc.studies.mujoco.data.behaviour ENV --out DIR --reselect [--action-noise F]

For an environment of :data:`CONTROLLER_LEVELS` the first form builds the controller levels
(``--seed``, ``--action-noise`` and ``--force`` apply; the ARS options do not).

The behaviour policies are made and kept by one module per concern; import their names from
there:

- :mod:`pnc.studies.mujoco.data.behaviour_settings`: ARS settings per environment (``DEFAULT_CONFIGS``,
  ``REWARD_SHIFT``, ``SELECTION_FIELDS``) and the controller levels (``CONTROLLER_LEVELS``,
  ``CONTROLLER_ALGORITHMS``);
- :mod:`pnc.studies.mujoco.data.level_selection`: ``select_levels``, ``level_evaluation``;
- :mod:`pnc.studies.mujoco.data.ars_levels`: ``train_behaviour_policies``, ``reselect_behaviour_policies``;
- :mod:`pnc.studies.mujoco.data.controller_levels`: ``build_controller_policies``;
- :mod:`pnc.studies.mujoco.data.policy_store`: ``POLICY_DIR``, ``STATE_DIR``, ``load_policies``;
- :mod:`pnc.studies.mujoco.data.action_noise`: the data's action noise the levels are selected under.

This module holds only the command line (:func:`main`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from pnc.studies.mujoco.data.action_noise import FALLBACK_ACTION_NOISE
from pnc.studies.mujoco.data.ars_levels import reselect_behaviour_policies, train_behaviour_policies
from pnc.studies.mujoco.data.behaviour_settings import CONTROLLER_LEVELS, DEFAULT_CONFIGS
from pnc.studies.mujoco.data.controller_levels import build_controller_policies
from pnc.studies.mujoco.data.envs import ENVS, env_spec
from pnc.studies.mujoco.data.policy_store import STATE_DIR

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pnc.studies.mujoco.data.behaviour",
        description="Train ARS behaviour policies for one environment (exit 2: levels unordered).",
    )
    parser.add_argument("env", help=f"one of {', '.join(ENVS)}")
    parser.add_argument("--out", required=True, help="policy root; writes OUT/{Env}/...")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iterations", "--budget", type=int, default=None, help="ARS iterations")
    parser.add_argument("--eval-every", type=int, default=None)
    parser.add_argument(
        "--action-noise",
        type=float,
        default=None,
        help=f"action noise the levels are selected under (default {FALLBACK_ACTION_NOISE}, "
        "or the environment's entry in DEFAULT_ACTION_NOISE)",
    )
    parser.add_argument(
        "--reselect",
        action="store_true",
        help="re-evaluate the stored checkpoints and re-select the levels (no training)",
    )
    parser.add_argument(
        "--default-selection",
        action="store_true",
        help="with --reselect: use DEFAULT_CONFIGS' selection settings instead of the stored ones",
    )
    parser.add_argument("--force", action="store_true", help="replace policies trained differently")
    parser.add_argument(
        "--state",
        default=None,
        help="resumable training state (.npz): written every --save-every iterations, resumed "
        f"from when it exists (long runs keep theirs in {STATE_DIR}/{{Env}}/state.npz)",
    )
    parser.add_argument("--save-every", type=int, default=10)
    parser.add_argument(
        "--workers", type=int, default=1, help="processes for the training rollouts"
    )
    parser.add_argument("--minari-root", default=None, help="unused; accepted for uniformity")
    args = parser.parse_args(argv)
    spec = env_spec(args.env)

    def log(m: str) -> None:
        print(f"[pnc.studies.mujoco.data.behaviour] {spec.name} {m}", file=sys.stderr, flush=True)

    if spec.name in CONTROLLER_LEVELS and not args.reselect:
        record = build_controller_policies(
            spec.name,
            args.out,
            seed=args.seed,
            action_noise=args.action_noise,
            force=args.force,
            log=log,
        )
    elif args.reselect:
        record = reselect_behaviour_policies(
            spec.name,
            args.out,
            config=DEFAULT_CONFIGS[spec.name] if args.default_selection else None,
            action_noise=args.action_noise,
            log=log,
        )
    else:
        config = DEFAULT_CONFIGS[spec.name]
        overrides = {}
        if args.iterations is not None:
            overrides["iterations"] = args.iterations
        if args.eval_every is not None:
            overrides["eval_every"] = args.eval_every
        config = dataclasses.replace(config, **overrides)
        log(f"{config}")
        record = train_behaviour_policies(
            spec.name,
            args.out,
            seed=args.seed,
            config=config,
            action_noise=args.action_noise,
            force=args.force,
            log=log,
            state_path=args.state,
            save_every=args.save_every,
            workers=args.workers,
        )
    summary = {
        k: record[k]
        for k in ("status", "levels", "ordered_by_return", "timesteps", "train_seconds")
        if k in record
    }
    summary["action_noise"] = record["request"]["action_noise"]
    print(json.dumps(summary, indent=2, sort_keys=True))
    if not record["ordered_by_return"]:
        log("the levels' returns are not ordered simple < medium < expert")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
