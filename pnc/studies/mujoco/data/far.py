"""Far data: uniform-random actions in the Gymnasium environment (paper, Section 5.3).

Minari has no random-policy dataset, so the Far split is generated here, fresh for every seed as
the authors did, and written as a Minari dataset ``pnc/{env}/random-seed{S}-v0``. Reset seeds and actions come from generators named after
``(env, seed)``, so the same arguments give the same data.

Command line::

    python -m pnc.studies.mujoco.data.far ENV --minari-root DIR --transitions N --seed S [--force]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from pnc.studies.mujoco.data import minari_io
from pnc.studies.mujoco.data.envs import env_spec
from pnc.studies.mujoco.data.minari_io import Episode
from pnc.studies.mujoco.data.rng import numpy_rng
from pnc.studies.mujoco.data.rollout import collect_episodes


def collect_random_episodes(
    name: str, n_transitions: int, seed: int, *, max_episode_steps: int | None = None
) -> list[Episode]:
    """Roll out uniform-random actions until ``n_transitions`` steps are collected.

    Each episode starts from ``env.reset(seed=s_i)`` with ``s_i`` drawn from a generator named
    ``(env, seed, "far", "reset")``; actions are ``U[low, high]`` per coordinate from a generator named
    ``(env, seed, "far", "action")``. The last episode is cut (marked truncated) to give exactly
    ``n_transitions`` transitions.

    Args:
        name: environment name (see :data:`pnc.studies.mujoco.data.ENVS`).
        n_transitions: total number of steps to collect.
        seed: data seed.
        max_episode_steps: optional episode length cap (default: the environment's time limit).

    Returns:
        The episodes; observations float64 ``[T + 1, obs]``, actions float32 ``[T, act]``.
    """
    import gymnasium as gym

    if n_transitions < 1:
        raise ValueError(f"n_transitions must be positive, got {n_transitions}")
    spec = env_spec(name)
    kwargs = {} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}
    env = gym.make(spec.gym_id, **kwargs)
    low = env.action_space.low.astype(np.float64)
    high = env.action_space.high.astype(np.float64)
    reset_rng = numpy_rng(spec.name, seed, "far", "reset")
    action_rng = numpy_rng(spec.name, seed, "far", "action")
    try:
        return collect_episodes(
            env,
            lambda obs: action_rng.uniform(low, high).astype(np.float32),
            reset_rng,
            n_transitions=n_transitions,
        )
    finally:
        env.close()


def make_far_dataset(
    name: str,
    *,
    root,
    n_transitions: int,
    seed: int,
    max_episode_steps: int | None = None,
    force: bool = False,
) -> dict:
    """Generate (or reuse) the Far dataset ``pnc/{env}/random-seed{seed}-v0`` under ``root``.

    An existing dataset made with the same request is reused without rolling out again; one made
    differently is replaced only with ``force``.

    Returns:
        A JSON-serialisable summary (dataset id, status, counts, seconds).
    """
    import gymnasium
    import mujoco

    spec = env_spec(name)
    request = {
        "kind": "far",
        "env": spec.name,
        "gym_id": spec.gym_id,
        "policy": "uniform random actions",
        "n_transitions": int(n_transitions),
        "seed": int(seed),
        "max_episode_steps": max_episode_steps,
    }
    old = minari_io.read_provenance(spec.far_id(seed), root)
    start = time.perf_counter()
    if old is not None and old.get("request") == request:
        status = "reused"
        n_episodes = old.get("n_episodes")
    else:
        episodes = collect_random_episodes(
            spec.name, n_transitions, seed, max_episode_steps=max_episode_steps
        )
        n_episodes = len(episodes)
        provenance = {
            "source": "far",
            "request": request,
            "n_episodes": n_episodes,
            "mean_return": float(np.mean([ep.episode_return for ep in episodes])),
            "versions": {"gymnasium": gymnasium.__version__, "mujoco": mujoco.__version__},
        }
        _, status = minari_io.write_dataset(
            spec.far_id(seed),
            episodes,
            gym_id=spec.gym_id,
            root=root,
            provenance=provenance,
            algorithm_name="uniform-random",
            description=f"Uniform-random actions in {spec.gym_id} (Far shift), seed {seed}.",
            force=force,
        )
    return {
        "dataset_id": spec.far_id(seed),
        "status": status,
        "env": spec.name,
        "transitions": int(n_transitions),
        "episodes": n_episodes,
        "seed": int(seed),
        "seconds": round(time.perf_counter() - start, 3),
        "minari_root": str(minari_io.resolve_root(root)),
    }


def main(argv: list[str] | None = None) -> int:
    import json

    parser = argparse.ArgumentParser(
        prog="python -m pnc.studies.mujoco.data.far", description="Generate the uniform-random (Far) dataset."
    )
    parser.add_argument("env", help="environment name, e.g. HalfCheetah")
    parser.add_argument(
        "--minari-root", default=None, help="Minari root (default $MINARI_DATASETS_PATH)"
    )
    parser.add_argument("--transitions", type=int, required=True, help="number of transitions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-episode-steps", type=int, default=None)
    parser.add_argument("--force", action="store_true", help="replace a dataset made differently")
    args = parser.parse_args(argv)
    print(f"[pnc.studies.mujoco.data.far] {args.env}: {args.transitions} random transitions", file=sys.stderr)
    summary = make_far_dataset(
        args.env,
        root=args.minari_root,
        n_transitions=args.transitions,
        seed=args.seed,
        max_episode_steps=args.max_episode_steps,
        force=args.force,
    )
    print(f"[pnc.studies.mujoco.data.far] {summary['status']} {summary['dataset_id']}", file=sys.stderr)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
