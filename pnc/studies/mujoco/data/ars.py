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
again. Which settings each environment uses is :mod:`pnc.studies.mujoco.data.behaviour_settings`; how
checkpoints become behaviour levels is :mod:`pnc.studies.mujoco.data.level_selection` and
:mod:`pnc.studies.mujoco.data.ars_levels`.

Long runs are resumable: given a state file, :func:`train_ars` writes the whole training state
(policy, normaliser statistics, random-generator states, iteration, evaluated checkpoints;
:class:`TrainingState`) atomically every ``save_every`` iterations, and a run started on an existing
state continues from it and ends exactly where an uninterrupted run would; a state made with other
settings is refused (:class:`StateMismatchError`), except for a longer ``iterations`` (or another
``stop_return``), which extends the run. The training rollouts of an iteration can be shared among
``workers`` processes; the result does not depend on their number.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pnc.studies.mujoco.data.envs import env_spec
from pnc.studies.mujoco.data.rng import numpy_rng


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
            (used by :func:`pnc.studies.mujoco.data.level_selection.select_levels`).
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
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Roll out one linear policy per environment, in lockstep, for one episode each.

    Args:
        envs: ``P`` Gymnasium environments.
        matrices: ``[P, act, obs]`` policy matrices.
        obs_mean, obs_std: ``[obs]`` normalisation shared by all policies.
        seeds: ``P`` reset seeds.
        horizon: maximum steps per episode.
        reward_shift: subtracted from every reward (alive-bonus removal during training).
        action_noise: Gaussian action noise std as a fraction of half the action range, added
            before clipping to the bounds (as in :func:`pnc.studies.mujoco.data.offline.rollout_policy`).
        noise_rng: generator of the action noise (required when ``action_noise > 0``).

    Returns:
        ``returns [P]`` (shifted), ``lengths [P]`` and the visited-state statistics *per rollout*
        ``(counts [P], sums [P, obs], sums of squares [P, obs])``: summed in rollout order by the
        caller, they do not depend on how the rollouts were split across workers.
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
    sums, sums_sq = np.zeros_like(obs, dtype=np.float64), np.zeros_like(obs, dtype=np.float64)
    for _ in range(horizon):
        idx = np.flatnonzero(alive)
        if idx.size == 0:
            break
        live_obs = obs[idx]
        sums[idx] += live_obs
        sums_sq[idx] += live_obs**2
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
    return returns, lengths, (lengths.copy(), sums, sums_sq)


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


#: ARS settings a resumed run may change: extending ``iterations`` (or moving ``stop_return``)
#: continues the same run, so resuming gives what one longer uninterrupted run would have; the
#: level-selection fractions never enter training.
RESUMABLE_FIELDS = frozenset({"iterations", "stop_return", "medium_fraction", "simple_fraction"})

#: Format tag of the training-state files written by :func:`save_training_state`.
STATE_FORMAT = "pnc-ars-state-v1"


class StateMismatchError(ValueError):
    """A training-state file was made with other settings than the run asked to resume it."""


@dataclasses.dataclass
class TrainingState:
    """Everything an ARS run needs to continue exactly where it stopped.

    Attributes:
        settings: what the run is (environment, seed, ARS settings, action noise, reward shift);
            a resumed run must match it outside :data:`RESUMABLE_FIELDS`.
        iteration: ARS iterations done.
        timesteps: training environment steps spent.
        matrix: current policy matrix ``[act, obs]``.
        stats_count, stats_sum, stats_sum_sq: running statistics of the visited states
            (``[]``, ``[obs]``, ``[obs]``).
        rng_states: the bit-generator states of the direction and reset streams.
        checkpoints: the evaluated checkpoints so far.
        seconds: wall-clock seconds spent training, summed over pieces.
    """

    settings: dict
    iteration: int
    timesteps: int
    matrix: np.ndarray
    stats_count: int
    stats_sum: np.ndarray
    stats_sum_sq: np.ndarray
    rng_states: dict
    checkpoints: list[Checkpoint]
    seconds: float = 0.0


def save_training_state(path: str | Path, state: TrainingState) -> None:
    """Write ``state`` to one compressed ``.npz`` atomically (temporary file, fsync, rename).

    Scalars, settings and random-generator states go into a JSON string stored as a unicode
    array, so the file is read back without pickle.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "format": STATE_FORMAT,
        "settings": state.settings,
        "iteration": int(state.iteration),
        "timesteps": int(state.timesteps),
        "stats_count": int(state.stats_count),
        "rng_states": state.rng_states,
        "seconds": float(state.seconds),
    }
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as f:
        np.savez_compressed(
            f,
            meta=np.array(json.dumps(meta, sort_keys=True)),
            matrix=state.matrix,
            stats_sum=state.stats_sum,
            stats_sum_sq=state.stats_sum_sq,
            **_checkpoint_arrays(state.checkpoints, _STATE_CHECKPOINT_KEYS),
        )
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_training_state(path: str | Path) -> TrainingState:
    """Read a state written by :func:`save_training_state`.

    Raises:
        ValueError: the file is not an ARS training state of this format.
    """
    with np.load(path, allow_pickle=False) as z:
        if "meta" not in z.files:
            raise ValueError(f"{path} is not an ARS training state (no 'meta')")
        meta = json.loads(str(z["meta"]))
        if meta.get("format") != STATE_FORMAT:
            raise ValueError(f"{path} has format {meta.get('format')!r}, expected {STATE_FORMAT!r}")
        checkpoints = _read_checkpoints(z, _STATE_CHECKPOINT_KEYS)
        return TrainingState(
            settings=meta["settings"],
            iteration=meta["iteration"],
            timesteps=meta["timesteps"],
            matrix=z["matrix"],
            stats_count=meta["stats_count"],
            stats_sum=z["stats_sum"],
            stats_sum_sq=z["stats_sum_sq"],
            rng_states=meta["rng_states"],
            checkpoints=checkpoints,
            seconds=meta["seconds"],
        )


def _check_resumable(path: Path, stored: dict, wanted: dict, iteration: int) -> None:
    """Refuse to resume a state made with other settings (outside :data:`RESUMABLE_FIELDS`)."""
    diffs = []
    for key in sorted(set(stored) | set(wanted)):
        if key == "ars":
            continue
        if stored.get(key) != wanted.get(key):
            diffs.append(f"{key}: stored {stored.get(key)!r}, asked {wanted.get(key)!r}")
    s_ars, w_ars = stored.get("ars", {}), wanted.get("ars", {})
    for key in sorted(set(s_ars) | set(w_ars)):
        if key not in RESUMABLE_FIELDS and s_ars.get(key) != w_ars.get(key):
            diffs.append(f"ars.{key}: stored {s_ars.get(key)!r}, asked {w_ars.get(key)!r}")
    if diffs:
        raise StateMismatchError(
            f"{path} holds an ARS run made with other settings ({'; '.join(diffs)}); "
            "resume it with the same settings, or move the file away to start a new run"
        )
    if w_ars["iterations"] < iteration:
        raise StateMismatchError(
            f"{path} is already at iteration {iteration}, past the {w_ars['iterations']} asked for"
        )


# -- rollout workers -------------------------------------------------------------------------

_WORKER_ENVS: list = []


def _worker_init(gym_id: str, n_envs: int) -> None:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    _WORKER_ENVS[:] = _make_envs(gym_id, n_envs)


def _worker_rollouts(args):
    matrices, obs_mean, obs_std, seeds, horizon, reward_shift = args
    return batched_rollouts(
        _WORKER_ENVS[: len(seeds)],
        matrices,
        obs_mean,
        obs_std,
        seeds,
        horizon=horizon,
        reward_shift=reward_shift,
    )


class _Rollouts:
    """The training rollouts of one iteration, in this process or split over ``workers``
    processes (each rolls out a contiguous block of the ``2N`` policies in lockstep). The result
    does not depend on ``workers``: every rollout has its own reset seed and no action noise, and
    the visited-state statistics are summed per rollout."""

    def __init__(self, gym_id: str, n_policies: int, workers: int, envs: list) -> None:
        self.workers = max(1, min(int(workers), n_policies))
        self.envs = envs
        self.pool = None
        if self.workers > 1:
            import multiprocessing as mp

            per = -(-n_policies // self.workers)
            self.pool = mp.get_context("spawn").Pool(
                self.workers, initializer=_worker_init, initargs=(gym_id, per)
            )
            self.blocks = np.array_split(np.arange(n_policies), self.workers)

    def __call__(self, mats, mean, std, seeds, horizon, reward_shift):
        if self.pool is None:
            return batched_rollouts(
                self.envs[: len(seeds)],
                mats,
                mean,
                std,
                seeds,
                horizon=horizon,
                reward_shift=reward_shift,
            )
        parts = self.pool.map(
            _worker_rollouts,
            [(mats[b], mean, std, seeds[b], horizon, reward_shift) for b in self.blocks],
        )
        return (
            np.concatenate([p[0] for p in parts]),
            np.concatenate([p[1] for p in parts]),
            tuple(np.concatenate([p[2][k] for p in parts]) for k in range(3)),
        )

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool.join()


def train_ars(
    name: str,
    config: ARSConfig,
    seed: int,
    *,
    action_noise: float,
    reward_shift: float = 0.0,
    log=None,
    state_path: str | Path | None = None,
    save_every: int = 10,
    workers: int = 1,
) -> tuple[list[Checkpoint], dict]:
    """Run ARS V2-t on ``name`` and return the evaluated checkpoints (iteration 0 = zero policy).

    With ``state_path`` the run is resumable: the full training state (policy, normaliser
    statistics, random-generator states, iteration, evaluated checkpoints) is written there
    atomically every ``save_every`` iterations and at the end, and a run started with an existing
    state continues from it, giving exactly the checkpoints an uninterrupted run would have.

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
        state_path: training-state ``.npz`` to resume from and checkpoint to (``None``: none).
        save_every: write the state every this many iterations.
        workers: processes for the training rollouts (1: in this process); the result does not
            depend on it.

    Returns:
        ``(checkpoints, info)`` with ``info`` holding the timesteps, the wall-clock seconds
        (summed over resumed pieces), the iterations done and whether the run was resumed.

    Raises:
        StateMismatchError: ``state_path`` holds a run made with other settings.
    """
    if save_every < 1 or workers < 1:
        raise ValueError(f"save_every and workers must be positive, got {save_every}, {workers}")
    spec = env_spec(name)
    action_noise = float(action_noise)
    settings = {
        "env": spec.name,
        "seed": int(seed),
        "ars": dataclasses.asdict(config),
        "action_noise": action_noise,
        "reward_shift": float(reward_shift),
    }
    rng = numpy_rng(spec.name, seed, "ars", "directions")
    seed_rng = numpy_rng(spec.name, seed, "ars", "resets")
    n, b = config.n_directions, config.top_directions
    envs = _make_envs(
        spec.gym_id, config.eval_episodes if workers > 1 else max(2 * n, config.eval_episodes)
    )
    obs_dim = envs[0].observation_space.shape[0]
    act_dim = envs[0].action_space.shape[0]
    matrix = np.zeros((act_dim, obs_dim))
    stats = _RunningStats(obs_dim)
    timesteps, first, spent = 0, 1, 0.0
    checkpoints: list[Checkpoint] = []
    state_path = Path(state_path) if state_path is not None else None
    resumed = state_path is not None and state_path.exists()
    if resumed:
        state = load_training_state(state_path)
        _check_resumable(state_path, state.settings, settings, state.iteration)
        matrix = state.matrix.copy()
        stats.add(state.stats_count, state.stats_sum, state.stats_sum_sq)
        rng.bit_generator.state = state.rng_states["directions"]
        seed_rng.bit_generator.state = state.rng_states["resets"]
        timesteps, first, spent = state.timesteps, state.iteration + 1, state.seconds
        checkpoints = list(state.checkpoints)
        if log is not None:
            log(f"resumed {state_path} at iteration {state.iteration} ({timesteps} steps)")
    start = time.perf_counter()

    def save(iteration: int) -> None:
        if state_path is None:
            return
        save_training_state(
            state_path,
            TrainingState(
                settings=settings,
                iteration=iteration,
                timesteps=timesteps,
                matrix=matrix,
                stats_count=stats.count,
                stats_sum=stats.total,
                stats_sum_sq=stats.total_sq,
                rng_states={
                    "directions": rng.bit_generator.state,
                    "resets": seed_rng.bit_generator.state,
                },
                checkpoints=checkpoints,
                seconds=spent + time.perf_counter() - start,
            ),
        )

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
                f"({spent + time.perf_counter() - start:7.1f} s)"
            )

    def stopped() -> bool:
        return config.stop_return is not None and checkpoints[-1].eval_return >= config.stop_return

    rollouts = _Rollouts(spec.gym_id, 2 * n, workers, envs)
    try:
        if not resumed:
            checkpoint(0)
            save(0)
        it = first - 1
        if not (resumed and stopped() and checkpoints[-1].iteration == it):
            for it in range(first, config.iterations + 1):
                mean, std = stats.mean_std()
                deltas = rng.standard_normal((n, act_dim, obs_dim))
                mats = np.concatenate(
                    [matrix + config.noise * deltas, matrix - config.noise * deltas]
                )
                seeds = seed_rng.integers(2**31 - 1, size=n)
                # the +/- pair of a direction starts from the same state
                returns, lengths, (counts, sums, sums_sq) = rollouts(
                    mats, mean, std, np.concatenate([seeds, seeds]), config.horizon, reward_shift
                )
                timesteps += int(lengths.sum())
                stats.add(int(counts.sum()), sums.sum(0), sums_sq.sum(0))
                r_plus, r_minus = returns[:n], returns[n:]
                top = np.argsort(-np.maximum(r_plus, r_minus), kind="stable")[:b]
                sigma_r = np.std(np.concatenate([r_plus[top], r_minus[top]]))
                sigma_r = sigma_r if sigma_r > 1e-8 else 1.0
                step = np.einsum("k,kao->ao", r_plus[top] - r_minus[top], deltas[top])
                matrix = matrix + config.step_size / (b * sigma_r) * step
                done = it == config.iterations
                if it % config.eval_every == 0 or done:
                    checkpoint(it)
                    done = done or stopped()
                if done or it % save_every == 0:
                    save(it)
                if done:
                    break
    finally:
        rollouts.close()
        for env in envs:
            env.close()
    info = {
        "timesteps": timesteps,
        "seconds": spent + time.perf_counter() - start,
        "iterations": it,
        "resumed": resumed,
    }
    return checkpoints, info


def save_checkpoints(path: str | Path, checkpoints: Sequence[Checkpoint]) -> None:
    """Write every evaluated checkpoint to one compressed ``.npz`` (never pickled).

    Arrays: ``iterations [K]``, ``timesteps [K]``, ``eval_returns [K]``, ``eval_stds [K]``,
    ``matrices [K, act, obs]``, ``obs_means [K, obs]``, ``obs_stds [K, obs]``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        np.savez_compressed(f, **_checkpoint_arrays(checkpoints, _CHECKPOINT_KEYS))


def load_checkpoints(path: str | Path) -> list[Checkpoint]:
    """Read the checkpoints written by :func:`save_checkpoints` (``eval_std`` 0 where not stored)."""
    with np.load(path, allow_pickle=False) as z:
        return _read_checkpoints(z, _CHECKPOINT_KEYS)


#: The names of the checkpoint arrays (iterations, timesteps, evaluated returns and their standard
#: deviations, matrices, observation means and standard deviations) in a checkpoints file
#: (:func:`save_checkpoints`) and in a training state (:func:`save_training_state`).
_CHECKPOINT_KEYS = (
    "iterations",
    "timesteps",
    "eval_returns",
    "eval_stds",
    "matrices",
    "obs_means",
    "obs_stds",
)
_STATE_CHECKPOINT_KEYS = (
    "ck_iterations",
    "ck_timesteps",
    "ck_returns",
    "ck_stds",
    "ck_matrices",
    "ck_obs_means",
    "ck_obs_stds",
)


def _checkpoint_arrays(checkpoints: Sequence[Checkpoint], keys: tuple[str, ...]) -> dict:
    """The checkpoints as seven arrays (``[K]`` each, then ``[K, act, obs]``, ``[K, obs]`` twice),
    named by ``keys`` in that order."""
    arrays = (
        np.array([c.iteration for c in checkpoints], np.int64),
        np.array([c.timesteps for c in checkpoints], np.int64),
        np.array([c.eval_return for c in checkpoints], np.float64),
        np.array([c.eval_std for c in checkpoints], np.float64),
        np.stack([c.policy.matrix for c in checkpoints]),
        np.stack([c.policy.obs_mean for c in checkpoints]),
        np.stack([c.policy.obs_std for c in checkpoints]),
    )
    return dict(zip(keys, arrays, strict=True))


def _read_checkpoints(z, keys: tuple[str, ...]) -> list[Checkpoint]:
    """Inverse of :func:`_checkpoint_arrays` on an open ``.npz`` (``eval_std`` 0 where a file
    predates the stored standard deviations)."""
    iterations, timesteps, returns, stds, matrices, obs_means, obs_stds = keys
    std = z[stds] if stds in z.files else np.zeros(len(z[iterations]))
    return [
        Checkpoint(int(it), int(ts), float(r), LinearPolicy(m, mu, sd), float(e))
        for it, ts, r, e, m, mu, sd in zip(
            z[iterations],
            z[timesteps],
            z[returns],
            std,
            z[matrices],
            z[obs_means],
            z[obs_stds],
            strict=True,
        )
    ]
