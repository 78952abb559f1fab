"""Offline behaviour datasets: the stored behaviour policies rolled out into Minari datasets.

These stand in for Minari's ``expert`` / ``medium`` / ``simple`` datasets when Minari's remote
storage cannot be reached. Each level's policy (an ARS linear policy or a scripted controller, see
:mod:`pnc.studies.mujoco.data.policy_store` and :mod:`pnc.studies.mujoco.data.policy`) is rolled out with small Gaussian action
noise (``action_noise`` times half the action range, clipped to the bounds; default
:func:`pnc.studies.mujoco.data.action_noise.action_noise_for`, the noise the levels were selected under, so the
data's returns are ordered ``simple < medium < expert``; a policy with noise of its own adds it in
quadrature, :func:`pnc.studies.mujoco.data.policy.total_action_noise`) from reset seeds named after
``(env, seed, level)`` and written as ``pnc-offline/{env}/{level}-v0``.
The dataset metadata records the policy file hash, how the policy was made, the seeds and the
returns.

Command line::

    python -m pnc.studies.mujoco.data.offline ENV --minari-root DIR (--transitions N | --episodes E) --seed S
        [--policies DIR] [--action-noise F] [--force]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from pnc.studies.mujoco.data import minari_io
from pnc.studies.mujoco.data.action_noise import (
    DEFAULT_ACTION_NOISE,
    FALLBACK_ACTION_NOISE,
    action_noise_for,
)
from pnc.studies.mujoco.data.envs import env_spec
from pnc.studies.mujoco.data.minari_io import Episode
from pnc.studies.mujoco.data.policy import total_action_noise
from pnc.studies.mujoco.data.policy_checks import load_checked_policies
from pnc.studies.mujoco.data.policy_store import POLICY_DIR
from pnc.studies.mujoco.data.rng import numpy_rng
from pnc.studies.mujoco.data.rollout import collect_episodes, whole_episode_returns

__all__ = [
    "make_offline_datasets",
    "rollout_policy",
    # re-exported from pnc.studies.mujoco.data.action_noise, where they live, for imports from here
    "DEFAULT_ACTION_NOISE",
    "FALLBACK_ACTION_NOISE",
    "action_noise_for",
]


def rollout_policy(
    name: str,
    policy,
    *,
    seed: int,
    level: str,
    n_transitions: int | None = None,
    n_episodes: int | None = None,
    action_noise: float = 0.1,
) -> list[Episode]:
    """Roll ``policy`` out for ``n_transitions`` steps (last episode cut) or ``n_episodes`` episodes.

    Args:
        name: environment name.
        policy: the behaviour policy (any kind of :data:`pnc.studies.mujoco.data.policy.POLICY_KINDS`).
        seed: data seed; reset seeds and action noise come from generators named
            ``(env, seed, "offline", level, ...)``.
        level: the behaviour level (only used to name the random streams).
        n_transitions: total steps (exclusive with ``n_episodes``).
        n_episodes: number of complete episodes.
        action_noise: the data's Gaussian noise std as a fraction of half the action range; the
            policy's own noise is added in quadrature.

    Returns:
        The episodes; observations float64 ``[T + 1, obs]``, actions float32 ``[T, act]``.
    """
    import gymnasium as gym

    if (n_transitions is None) == (n_episodes is None):
        raise ValueError("give exactly one of n_transitions and n_episodes")
    budget = n_transitions if n_transitions is not None else n_episodes
    if budget < 1:
        raise ValueError(f"the rollout budget must be positive, got {budget}")
    if action_noise < 0:
        raise ValueError(f"action_noise must be non-negative, got {action_noise}")
    spec = env_spec(name)
    env = gym.make(spec.gym_id)
    low, high = env.action_space.low, env.action_space.high
    scale = total_action_noise(policy, action_noise) * (high - low) / 2.0
    reset_rng = numpy_rng(spec.name, seed, "offline", level, "reset")
    noise_rng = numpy_rng(spec.name, seed, "offline", level, "noise")

    def act(obs: np.ndarray) -> np.ndarray:
        action = policy(obs) + scale * noise_rng.standard_normal(len(low))
        return np.clip(action, low, high).astype(np.float32)

    try:
        return collect_episodes(
            env, act, reset_rng, n_transitions=n_transitions, n_episodes=n_episodes
        )
    finally:
        env.close()


def make_offline_datasets(
    name: str,
    *,
    root,
    seed: int,
    n_transitions: int | None = None,
    n_episodes: int | None = None,
    policies: str | Path | None = None,
    action_noise: float | None = None,
    force: bool = False,
    log=None,
) -> dict:
    """Write ``pnc-offline/{env}/{level}-v0`` for every level ``name`` has (reusing identical ones).

    Returns:
        A JSON-serialisable summary with, per level, the dataset id, status, counts and returns.

    Raises:
        CacheConflictError: a dataset exists with different content and ``force`` is false.
    """
    import gymnasium
    import mujoco

    spec = env_spec(name)
    if action_noise is None:
        action_noise = action_noise_for(spec.name)
    policy_dir = Path(policies) if policies is not None else POLICY_DIR
    loaded, record = load_checked_policies(spec.name, policy_dir)
    selected_noise = record["request"].get("action_noise")
    if log is not None and selected_noise != action_noise:
        log(
            f"warning: the {spec.name} levels were selected under action noise {selected_noise}, "
            f"the data use {action_noise}; their returns may not be ordered"
        )
    summary = {
        "env": spec.name,
        "seed": int(seed),
        "minari_root": str(minari_io.resolve_root(root)),
    }
    levels = {}
    for level in spec.levels:
        dataset_id = spec.offline_ids[level]
        info = record["levels"][level]
        request = {
            "kind": "offline",
            "env": spec.name,
            "gym_id": spec.gym_id,
            "level": level,
            "seed": int(seed),
            "n_transitions": n_transitions,
            "n_episodes": n_episodes,
            "action_noise": float(action_noise),
            "policy_sha256": info["sha256"],
        }
        start = time.perf_counter()
        old = minari_io.read_provenance(dataset_id, root)
        if old is not None and old.get("request") == request:
            status, n_eps, n_steps, returns = (
                "reused",
                old["n_episodes"],
                old["n_transitions"],
                old["episode_returns"],
            )
        else:
            episodes = rollout_policy(
                spec.name,
                loaded[level],
                seed=seed,
                level=level,
                n_transitions=n_transitions,
                n_episodes=n_episodes,
                action_noise=action_noise,
            )
            n_eps, n_steps = len(episodes), int(sum(len(ep) for ep in episodes))
            complete = whole_episode_returns(episodes, last_cut=n_transitions is not None)
            returns = {
                "mean": float(np.mean(complete)),
                "std": float(np.std(complete)),
                "min": float(np.min(complete)),
                "max": float(np.max(complete)),
            }
            provenance = {
                "source": "offline",
                "request": request,
                "policy": {
                    "file": str(policy_dir / spec.name / info["file"]),
                    "sha256": info["sha256"],
                    "kind": record.get("kind", "linear"),
                    "algorithm": record["algorithm"],
                    "request": record["request"],
                    "iteration": info.get("iteration"),
                    "timesteps": info.get("timesteps"),
                    "selection_action_noise": selected_noise,
                    "return_mean": info["return_mean"],
                },
                "n_episodes": n_eps,
                "n_transitions": n_steps,
                "episode_returns": returns,
                "versions": {"gymnasium": gymnasium.__version__, "mujoco": mujoco.__version__},
            }
            _, status = minari_io.write_dataset(
                dataset_id,
                episodes,
                gym_id=spec.gym_id,
                root=root,
                provenance=provenance,
                algorithm_name=record["algorithm"],
                description=(
                    f"{level} behaviour data for {spec.gym_id}: {record['algorithm']} "
                    f"({level} level) with Gaussian action noise {action_noise}."
                ),
                force=force,
            )
        levels[level] = {
            "dataset_id": dataset_id,
            "status": status,
            "episodes": n_eps,
            "transitions": n_steps,
            "episode_returns": returns,
            "seconds": round(time.perf_counter() - start, 3),
        }
        if log is not None:
            log(f"{status} {dataset_id}: {n_steps} transitions, mean return {returns['mean']:.1f}")
    summary["levels"] = levels
    summary["action_noise"] = float(action_noise)
    means = [levels[lvl]["episode_returns"]["mean"] for lvl in reversed(spec.levels)]
    summary["ordered_by_return"] = bool(all(a < b for a, b in zip(means, means[1:], strict=False)))
    if log is not None and not summary["ordered_by_return"]:
        log(f"warning: {spec.name} data returns are not ordered simple < medium < expert: {means}")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pnc.studies.mujoco.data.offline",
        description="Roll the stored behaviour policies out into offline Minari datasets.",
    )
    parser.add_argument("env", help="environment name, e.g. HalfCheetah")
    parser.add_argument(
        "--minari-root", default=None, help="Minari root (default $MINARI_DATASETS_PATH)"
    )
    budget = parser.add_mutually_exclusive_group(required=True)
    budget.add_argument("--transitions", type=int, help="transitions per level")
    budget.add_argument("--episodes", type=int, help="episodes per level")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policies", default=None, help=f"policy root (default {POLICY_DIR})")
    parser.add_argument(
        "--action-noise",
        type=float,
        default=None,
        help="Gaussian action noise / half range (default: the noise the levels were selected "
        f"under, {FALLBACK_ACTION_NOISE} unless pnc.studies.mujoco.data.action_noise.DEFAULT_ACTION_NOISE says otherwise)",
    )
    parser.add_argument("--force", action="store_true", help="replace datasets made differently")
    args = parser.parse_args(argv)
    summary = make_offline_datasets(
        args.env,
        root=args.minari_root,
        seed=args.seed,
        n_transitions=args.transitions,
        n_episodes=args.episodes,
        policies=args.policies,
        action_noise=args.action_noise,
        force=args.force,
        log=lambda m: print(f"[pnc.studies.mujoco.data.offline] {m}", file=sys.stderr, flush=True),
    )
    print(json.dumps(summary, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
