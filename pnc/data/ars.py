"""Augmented Random Search, ARS V2-t (Mania et al., 2018), for linear policies.

A policy is linear on normalised observations, ``a = clip(M (s - mu) / sigma, low, high)``. One ARS
iteration draws ``N`` directions ``delta_k`` (i.i.d. standard normal ``[act, obs]``), rolls out
``M +/- nu delta_k``, keeps the ``b`` directions with the largest ``max(r+, r-)`` and steps

    M <- M + alpha / (b sigma_R) * sum_k (r+_k - r-_k) delta_k,

with ``sigma_R`` the standard deviation of the ``2b`` kept returns (the "-t" and V1 scaling). V2
normalises observations with the running mean/std of every state visited during training (frozen
within an iteration). A per-step reward shift (the alive bonus of locomotion tasks, as in the
paper) can be subtracted from the training reward; evaluation always reports the true return.

The ``2N`` perturbed policies of one iteration are rolled out in lockstep, one environment each,
with one batched matrix product per step. Every ``eval_every`` iterations the current policy is
evaluated as a :class:`Checkpoint`, optionally with Gaussian action noise, on episodes drawn from
streams named after the environment and seed, so checkpoints are compared on the same episodes
(:func:`evaluate_noisy`). The checkpoints of a run are written to and read back from one ``.npz``
(:func:`save_checkpoints`, :func:`load_checkpoints`), so they can be re-evaluated without training
again. Which settings each environment uses and how checkpoints become behaviour levels is
:mod:`pnc.data.behaviour`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pnc.data.envs import env_spec
from pnc.data.rng import numpy_rng


@dataclasses.dataclass(frozen=True)
class ARSConfig:
    """ARS V2-t settings.

    Attributes:
        iterations: number of ARS updates.
        n_directions: ``N``, directions sampled per iteration (``2N`` rollouts).
        top_directions: ``b``, directions kept for the update.
        step_size: ``alpha``.
        noise: ``nu``, exploration scale of the perturbations.
        horizon: maximum rollout length ``H`` (the environment's own time limit also applies).
        eval_every: evaluate a checkpoint every this many iterations (and after the last).
        eval_episodes: episodes per checkpoint evaluation.
        medium_fraction: the ``medium`` behaviour level targets ``R0 + f (R_expert - R0)``
            (used by :func:`pnc.data.behaviour.select_levels`).
        simple_fraction: ``simple`` targets the same with this (smaller) fraction.
        stop_return: stop once a checkpoint's evaluated return reaches this (``None``: never).
    """

    iterations: int = 100
    n_directions: int = 16
    top_directions: int = 8
    step_size: float = 0.02
    noise: float = 0.03
    horizon: int = 1000
    eval_every: int = 5
    eval_episodes: int = 10
    medium_fraction: float = 0.35
    simple_fraction: float = 0.15
    stop_return: float | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.top_directions <= self.n_directions:
            raise ValueError(f"need 1 <= top_directions <= n_directions, got {self}")
        if min(self.iterations, self.horizon, self.eval_every, self.eval_episodes) < 1:
            raise ValueError(
                f"iterations, horizon, eval_every and eval_episodes must be positive, got {self}"
            )
        if not 0 < self.simple_fraction < self.medium_fraction < 1:
            raise ValueError("need 0 < simple_fraction < medium_fraction < 1")


@dataclasses.dataclass(frozen=True)
class LinearPolicy:
    """``a = clip(matrix (s - obs_mean) / obs_std, low, high)``.

    Attributes:
        matrix: ``[act, obs]``.
        obs_mean: ``[obs]``.
        obs_std: ``[obs]`` (positive).
    """

    matrix: np.ndarray
    obs_mean: np.ndarray
    obs_std: np.ndarray

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return self.matrix @ ((np.asarray(obs, np.float64) - self.obs_mean) / self.obs_std)

    def save(self, path: str | Path) -> None:
        """Write a compressed ``.npz`` (never pickled)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as f:
            np.savez_compressed(f, matrix=self.matrix, obs_mean=self.obs_mean, obs_std=self.obs_std)

    @classmethod
    def load(cls, path: str | Path) -> LinearPolicy:
        with np.load(path, allow_pickle=False) as z:
            return cls(z["matrix"], z["obs_mean"], z["obs_std"])


class _RunningStats:
    """Welford-style running mean/variance of visited states (ARS V2 normalisation)."""

    def __init__(self, dim: int) -> None:
        self.count = 0
        self.total = np.zeros(dim)
        self.total_sq = np.zeros(dim)

    def add(self, count: int, total: np.ndarray, total_sq: np.ndarray) -> None:
        self.count += count
        self.total += total
        self.total_sq += total_sq

    def mean_std(self) -> tuple[np.ndarray, np.ndarray]:
        if self.count < 2:
            return np.zeros_like(self.total), np.ones_like(self.total)
        mean = self.total / self.count
        var = np.maximum(self.total_sq / self.count - mean**2, 0.0)
        std = np.sqrt(var)
        return mean, np.where(std < 1e-8, 1.0, std)


def _make_envs(gym_id: str, n: int) -> list:
    import gymnasium as gym

    return [gym.make(gym_id, disable_env_checker=True) for _ in range(n)]


def batched_rollouts(
    envs: Sequence,
    matrices: np.ndarray,
    obs_mean: np.ndarray,
    obs_std: np.ndarray,
    seeds: Sequence[int],
    *,
    horizon: int,
    reward_shift: float = 0.0,
    action_noise: float = 0.0,
    noise_rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, np.ndarray, tuple[int, np.ndarray, np.ndarray]]:
    """Roll out one linear policy per environment, in lockstep, for one episode each.

    Args:
        envs: ``P`` Gymnasium environments.
        matrices: ``[P, act, obs]`` policy matrices.
        obs_mean, obs_std: ``[obs]`` normalisation shared by all policies.
        seeds: ``P`` reset seeds.
        horizon: maximum steps per episode.
        reward_shift: subtracted from every reward (alive-bonus removal during training).
        action_noise: Gaussian action noise std as a fraction of half the action range, added
            before clipping to the bounds (as in :func:`pnc.data.offline.rollout_policy`).
        noise_rng: generator of the action noise (required when ``action_noise > 0``).

    Returns:
        ``returns [P]`` (shifted), ``lengths [P]`` and the visited-state statistics
        ``(count, sum [obs], sum of squares [obs])``.
    """
    if action_noise < 0:
        raise ValueError(f"action_noise must be non-negative, got {action_noise}")
    if action_noise > 0 and noise_rng is None:
        raise ValueError("action_noise > 0 needs a noise_rng")
    p = len(envs)
    low = envs[0].action_space.low
    high = envs[0].action_space.high
    scale = action_noise * (high - low) / 2.0
    obs = np.stack([env.reset(seed=int(s))[0] for env, s in zip(envs, seeds, strict=True)])
    alive = np.ones(p, bool)
    returns = np.zeros(p)
    lengths = np.zeros(p, int)
    count, total, total_sq = 0, np.zeros(obs.shape[1]), np.zeros(obs.shape[1])
    for _ in range(horizon):
        idx = np.flatnonzero(alive)
        if idx.size == 0:
            break
        live_obs = obs[idx]
        count += idx.size
        total += live_obs.sum(0)
        total_sq += (live_obs**2).sum(0)
        actions = np.einsum("pao,po->pa", matrices[idx], (live_obs - obs_mean) / obs_std)
        if action_noise > 0:
            actions = actions + scale * noise_rng.standard_normal(actions.shape)
        actions = np.clip(actions, low, high)
        for j, i in enumerate(idx):
            o, r, terminated, truncated, _ = envs[i].step(actions[j].astype(np.float32))
            obs[i] = o
            returns[i] += r - reward_shift
            lengths[i] += 1
            if terminated or truncated:
                alive[i] = False
    return returns, lengths, (count, total, total_sq)


def evaluate(
    gym_id: str,
    policy: LinearPolicy,
    seeds: Sequence[int],
    *,
    horizon: int = 1000,
    envs=None,
    action_noise: float = 0.0,
    noise_rng: np.random.Generator | None = None,
) -> np.ndarray:
    """True (unshifted) returns of ``policy`` from each reset seed ``[len(seeds)]``.

    With ``action_noise > 0`` the actions carry Gaussian noise (std as a fraction of half the
    action range), drawn from ``noise_rng``; with ``0`` the policy is deterministic.
    """
    own = envs is None
    envs = _make_envs(gym_id, len(seeds)) if own else envs
    mats = np.broadcast_to(policy.matrix, (len(seeds), *policy.matrix.shape))
    try:
        returns, _, _ = batched_rollouts(
            envs[: len(seeds)],
            mats,
            policy.obs_mean,
            policy.obs_std,
            seeds,
            horizon=horizon,
            action_noise=action_noise,
            noise_rng=noise_rng,
        )
    finally:
        if own:
            for env in envs:
                env.close()
    return returns


def _eval_seeds(name: str, seed: int, purpose: str, n: int) -> list[int]:
    return [int(s) for s in numpy_rng(name, seed, "ars", purpose).integers(2**31 - 1, size=n)]


def evaluate_noisy(
    name: str,
    policy: LinearPolicy,
    *,
    seed: int,
    purpose: str,
    episodes: int,
    action_noise: float,
    horizon: int = 1000,
    envs=None,
) -> np.ndarray:
    """Returns ``[episodes]`` of ``policy`` under ``action_noise``, from streams named after
    ``(env, seed, "ars", purpose)``: equal names give equal reset seeds and noise (common random
    numbers), so checkpoints evaluated under one ``purpose`` are compared on the same episodes."""
    spec = env_spec(name)
    return evaluate(
        spec.gym_id,
        policy,
        _eval_seeds(spec.name, seed, purpose, episodes),
        horizon=horizon,
        envs=envs,
        action_noise=action_noise,
        noise_rng=numpy_rng(spec.name, seed, "ars", purpose, "noise"),
    )


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """One evaluated policy of an ARS run.

    Attributes:
        iteration: ARS iteration (0 = the untrained zero policy).
        timesteps: environment steps spent on training up to here.
        eval_return: mean return of the checkpoint evaluation.
        policy: the policy.
        eval_std: standard deviation of the evaluation returns.
    """

    iteration: int
    timesteps: int
    eval_return: float
    policy: LinearPolicy
    eval_std: float = 0.0


def train_ars(
    name: str,
    config: ARSConfig,
    seed: int,
    *,
    action_noise: float,
    reward_shift: float = 0.0,
    log=None,
) -> tuple[list[Checkpoint], dict]:
    """Run ARS V2-t on ``name`` and return the evaluated checkpoints (iteration 0 = zero policy).

    Args:
        name: environment name.
        config: ARS settings.
        seed: training seed (directions, resets and evaluation streams are named after it).
        action_noise: Gaussian action noise (std as a fraction of half the action range) of the
            checkpoint evaluations; training rollouts are never noised, so the checkpoints
            themselves do not depend on it.
        reward_shift: subtracted from every training reward (the per-step alive bonus of
            locomotion tasks); evaluation returns are never shifted.
        log: optional ``callable(str)`` for progress lines.

    Returns:
        ``(checkpoints, info)`` with ``info`` holding the timesteps and wall-clock seconds.
    """
    spec = env_spec(name)
    action_noise = float(action_noise)
    rng = numpy_rng(spec.name, seed, "ars", "directions")
    seed_rng = numpy_rng(spec.name, seed, "ars", "resets")
    n, b = config.n_directions, config.top_directions
    envs = _make_envs(spec.gym_id, max(2 * n, config.eval_episodes))
    obs_dim = envs[0].observation_space.shape[0]
    act_dim = envs[0].action_space.shape[0]
    matrix = np.zeros((act_dim, obs_dim))
    stats = _RunningStats(obs_dim)
    timesteps = 0
    start = time.perf_counter()
    checkpoints: list[Checkpoint] = []

    def checkpoint(iteration: int) -> None:
        mean, std = stats.mean_std()
        policy = LinearPolicy(matrix.copy(), mean, std)
        rets = evaluate_noisy(
            spec.name,
            policy,
            seed=seed,
            purpose="eval",
            episodes=config.eval_episodes,
            action_noise=action_noise,
            horizon=config.horizon,
            envs=envs,
        )
        ret = float(np.mean(rets))
        checkpoints.append(Checkpoint(iteration, timesteps, ret, policy, float(np.std(rets))))
        if log is not None:
            log(
                f"iter {iteration:4d}  steps {timesteps:9d}  return {ret:10.2f}  "
                f"({time.perf_counter() - start:7.1f} s)"
            )

    checkpoint(0)
    for it in range(1, config.iterations + 1):
        mean, std = stats.mean_std()
        deltas = rng.standard_normal((n, act_dim, obs_dim))
        mats = np.concatenate([matrix + config.noise * deltas, matrix - config.noise * deltas])
        seeds = seed_rng.integers(2**31 - 1, size=n)
        # the +/- pair of a direction starts from the same state
        returns, lengths, visited = batched_rollouts(
            envs[: 2 * n],
            mats,
            mean,
            std,
            np.concatenate([seeds, seeds]),
            horizon=config.horizon,
            reward_shift=reward_shift,
        )
        timesteps += int(lengths.sum())
        stats.add(*visited)
        r_plus, r_minus = returns[:n], returns[n:]
        top = np.argsort(-np.maximum(r_plus, r_minus), kind="stable")[:b]
        sigma_r = np.std(np.concatenate([r_plus[top], r_minus[top]]))
        sigma_r = sigma_r if sigma_r > 1e-8 else 1.0
        step = np.einsum("k,kao->ao", r_plus[top] - r_minus[top], deltas[top])
        matrix = matrix + config.step_size / (b * sigma_r) * step
        if it % config.eval_every == 0 or it == config.iterations:
            checkpoint(it)
            if config.stop_return is not None and checkpoints[-1].eval_return >= config.stop_return:
                break
    for env in envs:
        env.close()
    return checkpoints, {"timesteps": timesteps, "seconds": time.perf_counter() - start}


def save_checkpoints(path: str | Path, checkpoints: Sequence[Checkpoint]) -> None:
    """Write every evaluated checkpoint to one compressed ``.npz`` (never pickled).

    Arrays: ``iterations [K]``, ``timesteps [K]``, ``eval_returns [K]``, ``eval_stds [K]``,
    ``matrices [K, act, obs]``, ``obs_means [K, obs]``, ``obs_stds [K, obs]``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        np.savez_compressed(
            f,
            iterations=np.array([c.iteration for c in checkpoints], np.int64),
            timesteps=np.array([c.timesteps for c in checkpoints], np.int64),
            eval_returns=np.array([c.eval_return for c in checkpoints], np.float64),
            eval_stds=np.array([c.eval_std for c in checkpoints], np.float64),
            matrices=np.stack([c.policy.matrix for c in checkpoints]),
            obs_means=np.stack([c.policy.obs_mean for c in checkpoints]),
            obs_stds=np.stack([c.policy.obs_std for c in checkpoints]),
        )


def load_checkpoints(path: str | Path) -> list[Checkpoint]:
    """Read the checkpoints written by :func:`save_checkpoints` (``eval_std`` 0 where not stored)."""
    with np.load(path, allow_pickle=False) as z:
        stds = z["eval_stds"] if "eval_stds" in z.files else np.zeros(len(z["iterations"]))
        return [
            Checkpoint(int(it), int(ts), float(r), LinearPolicy(m, mu, sd), float(e))
            for it, ts, r, m, mu, sd, e in zip(
                z["iterations"],
                z["timesteps"],
                z["eval_returns"],
                z["matrices"],
                z["obs_means"],
                z["obs_stds"],
                stds,
                strict=True,
            )
        ]
