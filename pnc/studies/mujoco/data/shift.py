"""How far the Near / Mid / Far states of an environment's offline data lie from its ID states.

The ID (``expert``) states of one rollout fix a mean ``mu`` and covariance ``S`` (plus a ridge of
``1e-4 x mean(diag S)``, as for the paper's Figure 3B); every other regime's states are measured by
their Mahalanobis distance ``sqrt((s - mu)^T S^-1 (s - mu))`` and summarised by the mean. A
second, independently seeded ``expert`` rollout (``id_heldout``) gives the distance of fresh ID
states, the floor the shifted regimes are compared with.

Command line (prints JSON: per regime the mean and median distance and the return; the seconds
each rollout took)::

    python -m pnc.studies.mujoco.data.shift ENV [--transitions N --seed S --policies DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from pnc.studies.mujoco.data.action_noise import action_noise_for
from pnc.studies.mujoco.data.envs import LEVEL_SPLIT, env_spec
from pnc.studies.mujoco.data.rollout import whole_episode_returns

#: Ridge added to the ID covariance, as a multiple of the mean of its diagonal.
RIDGE = 1e-4


def mahalanobis_to(reference: np.ndarray, states: np.ndarray, ridge: float = RIDGE) -> np.ndarray:
    """Mahalanobis distances ``[M]`` of ``states [M, d]`` to the distribution of
    ``reference [N, d]`` (mean and covariance of ``reference`` plus ``ridge x mean(diag)``)."""
    reference = np.asarray(reference, np.float64)
    states = np.asarray(states, np.float64)
    if reference.ndim != 2 or states.ndim != 2 or reference.shape[1] != states.shape[1]:
        raise ValueError(f"need [N, d] and [M, d] arrays, got {reference.shape}, {states.shape}")
    if reference.shape[0] < 2:
        raise ValueError("need at least two reference states")
    mu = reference.mean(0)
    cov = np.atleast_2d(np.cov(reference, rowvar=False))
    cov = cov + ridge * max(float(np.mean(np.diag(cov))), 1e-12) * np.eye(cov.shape[0])
    chol = np.linalg.cholesky(cov)
    z = np.linalg.solve(chol, (states - mu).T)
    return np.sqrt(np.sum(z**2, axis=0))


def behaviour_shift(
    name: str,
    *,
    transitions: int = 10000,
    seed: int = 0,
    policies: str | Path | None = None,
    action_noise: float | None = None,
) -> dict:
    """Roll out every level of ``name`` and uniform-random actions; measure the shift.

    Returns:
        ``{"env", "transitions", "regimes": {regime: {"mean", "median", "return_mean",
        "seconds"}}}`` with regimes ``id_heldout``, ``near``, ``mid`` (where the environment has
        a ``simple`` level) and ``far``.
    """
    from pnc.studies.mujoco.data.far import collect_random_episodes
    from pnc.studies.mujoco.data.offline import rollout_policy
    from pnc.studies.mujoco.data.policy_checks import load_checked_policies

    spec = env_spec(name)
    loaded, _ = load_checked_policies(spec.name, policies)
    noise = action_noise_for(spec.name) if action_noise is None else float(action_noise)

    def states(episodes) -> np.ndarray:
        return np.concatenate([ep.observations[:-1] for ep in episodes])

    def returns(episodes) -> float:
        return float(np.mean(whole_episode_returns(episodes)))

    def timed(fn):
        start = time.perf_counter()
        eps = fn()
        return eps, time.perf_counter() - start

    def level_rollout(level: str, data_seed: int):
        return timed(
            lambda: rollout_policy(
                spec.name,
                loaded[level],
                seed=data_seed,
                level=level,
                n_transitions=transitions,
                action_noise=noise,
            )
        )

    reference, ref_seconds = level_rollout("expert", seed)
    ref_states = states(reference)
    runs = {"id_heldout": level_rollout("expert", seed + 1)}
    for level in spec.levels[1:]:
        runs[LEVEL_SPLIT[level]] = level_rollout(level, seed)
    runs["far"] = timed(lambda: collect_random_episodes(spec.name, transitions, seed))
    regimes = {"id": {"return_mean": returns(reference), "seconds": round(ref_seconds, 2)}}
    for regime, (eps, seconds) in runs.items():
        d = mahalanobis_to(ref_states, states(eps))
        regimes[regime] = {
            "mean": float(d.mean()),
            "median": float(np.median(d)),
            "return_mean": returns(eps),
            "seconds": round(seconds, 2),
        }
    return {"env": spec.name, "transitions": transitions, "seed": seed, "regimes": regimes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pnc.studies.mujoco.data.shift",
        description="Mean Mahalanobis distance of Near/Mid/Far states to ID states.",
    )
    parser.add_argument("env")
    parser.add_argument("--transitions", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policies", default=None, help="policy root (default: the stored ones)")
    args = parser.parse_args(argv)
    print(f"[pnc.studies.mujoco.data.shift] {args.env}", file=sys.stderr, flush=True)
    result = behaviour_shift(
        args.env, transitions=args.transitions, seed=args.seed, policies=args.policies
    )
    print(json.dumps(result, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
