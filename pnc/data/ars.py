"""Behaviour policies for the offline datasets: Augmented Random Search, ARS V2-t (Mania et al., 2018).

A policy is linear on normalised observations, ``a = clip(M (s - mu) / sigma, low, high)``. One ARS
iteration draws ``N`` directions ``delta_k`` (i.i.d. standard normal ``[act, obs]``), rolls out
``M +/- nu delta_k``, keeps the ``b`` directions with the largest ``max(r+, r-)`` and steps

    M <- M + alpha / (b sigma_R) * sum_k (r+_k - r-_k) delta_k,

with ``sigma_R`` the standard deviation of the ``2b`` kept returns (the "-t" and V1 scaling). V2
normalises observations with the running mean/std of every state visited during training (frozen
within an iteration). For locomotion tasks with an alive bonus the bonus is subtracted from the
training reward, as in the paper; evaluation always reports the true return.

The ``2N`` perturbed policies of one iteration are rolled out in lockstep, one environment each,
with one batched matrix product per step. Checkpoints are evaluated during training; ``expert`` is
the best one, ``medium`` / ``simple`` the earlier ones whose returns are nearest to fixed
fractions of the way from the initial to the expert return, so ``simple < medium < expert``.

Command line (writes ``OUT/{Env}/{level}.npz`` and ``OUT/{Env}/policies.json``)::

    python -m pnc.data.ars ENV --out DIR [--seed S --iterations K --force]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pnc.data.envs import ENVS, env_spec
from pnc.data.errors import CacheConflictError
from pnc.data.rng import numpy_rng

#: Where the repository's trained policies live (``{Env}/{level}.npz`` + ``{Env}/policies.json``).
POLICY_DIR = Path(__file__).parent / "policies"

#: Per-step alive bonus removed from the training reward (Mania et al., 2018, Section 4).
_REWARD_SHIFT = {"Hopper": 1.0, "Walker2d": 1.0, "Ant": 1.0, "Humanoid": 5.0}


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
        eval_episodes: deterministic episodes per checkpoint evaluation.
        medium_fraction: ``medium`` targets ``R0 + f (R_expert - R0)``.
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
    eval_episodes: int = 5
    medium_fraction: float = 0.35
    simple_fraction: float = 0.15
    stop_return: float | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.top_directions <= self.n_directions:
            raise ValueError(f"need 1 <= top_directions <= n_directions, got {self}")
        if self.iterations < 1 or self.horizon < 1 or self.eval_every < 1:
            raise ValueError(f"iterations, horizon and eval_every must be positive, got {self}")
        if not 0 < self.simple_fraction < self.medium_fraction < 1:
            raise ValueError("need 0 < simple_fraction < medium_fraction < 1")


#: Settings per environment, after the values Mania et al. (2018, Table 9) report for the
#: locomotion tasks; the pendulums, Reacher and Pusher use small, quick settings.
DEFAULT_CONFIGS: dict[str, ARSConfig] = {
    "InvertedPendulum": ARSConfig(
        iterations=100,
        n_directions=4,
        top_directions=2,
        step_size=0.03,
        noise=0.1,
        eval_every=2,
        stop_return=1000.0,
    ),
    "InvertedDoublePendulum": ARSConfig(
        iterations=60, n_directions=8, top_directions=4, step_size=0.02, noise=0.03, eval_every=2
    ),
    "Swimmer": ARSConfig(
        iterations=100, n_directions=2, top_directions=1, step_size=0.02, noise=0.01
    ),
    "Hopper": ARSConfig(
        iterations=200, n_directions=8, top_directions=4, step_size=0.01, noise=0.025
    ),
    "HalfCheetah": ARSConfig(
        iterations=120, n_directions=32, top_directions=4, step_size=0.02, noise=0.03
    ),
    "Walker2d": ARSConfig(
        iterations=300, n_directions=40, top_directions=30, step_size=0.025, noise=0.01
    ),
    "Ant": ARSConfig(
        iterations=300, n_directions=60, top_directions=20, step_size=0.015, noise=0.025
    ),
    "Humanoid": ARSConfig(
        iterations=300, n_directions=230, top_directions=230, step_size=0.02, noise=0.0075
    ),
    "HumanoidStandup": ARSConfig(
        iterations=200, n_directions=60, top_directions=20, step_size=0.02, noise=0.0075
    ),
    "Reacher": ARSConfig(
        iterations=100, n_directions=16, top_directions=8, step_size=0.02, noise=0.03
    ),
    "Pusher": ARSConfig(
        iterations=100, n_directions=16, top_directions=8, step_size=0.02, noise=0.03
    ),
}


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
) -> tuple[np.ndarray, np.ndarray, tuple[int, np.ndarray, np.ndarray]]:
    """Roll out one linear policy per environment, in lockstep, for one episode each.

    Args:
        envs: ``P`` Gymnasium environments.
        matrices: ``[P, act, obs]`` policy matrices.
        obs_mean, obs_std: ``[obs]`` normalisation shared by all policies.
        seeds: ``P`` reset seeds.
        horizon: maximum steps per episode.
        reward_shift: subtracted from every reward (alive-bonus removal during training).

    Returns:
        ``returns [P]`` (shifted), ``lengths [P]`` and the visited-state statistics
        ``(count, sum [obs], sum of squares [obs])``.
    """
    p = len(envs)
    low = envs[0].action_space.low
    high = envs[0].action_space.high
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
    gym_id: str, policy: LinearPolicy, seeds: Sequence[int], *, horizon: int = 1000, envs=None
) -> np.ndarray:
    """True (unshifted) returns of the deterministic ``policy`` from each reset seed ``[len(seeds)]``."""
    envs = envs if envs is not None else _make_envs(gym_id, len(seeds))
    mats = np.broadcast_to(policy.matrix, (len(seeds), *policy.matrix.shape))
    returns, _, _ = batched_rollouts(
        envs[: len(seeds)], mats, policy.obs_mean, policy.obs_std, seeds, horizon=horizon
    )
    return returns


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    iteration: int
    timesteps: int
    eval_return: float
    policy: LinearPolicy


def train_ars(
    name: str, config: ARSConfig, seed: int, *, log=None
) -> tuple[list[Checkpoint], dict]:
    """Run ARS V2-t on ``name`` and return the evaluated checkpoints (iteration 0 = zero policy).

    Returns:
        ``(checkpoints, info)`` with ``info`` holding the timesteps and wall-clock seconds.
    """
    spec = env_spec(name)
    rng = numpy_rng(spec.name, seed, "ars", "directions")
    seed_rng = numpy_rng(spec.name, seed, "ars", "resets")
    eval_seeds = [
        int(s)
        for s in numpy_rng(spec.name, seed, "ars", "eval").integers(
            2**31 - 1, size=config.eval_episodes
        )
    ]
    shift = _REWARD_SHIFT.get(spec.name, 0.0)
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
        ret = float(
            np.mean(evaluate(spec.gym_id, policy, eval_seeds, horizon=config.horizon, envs=envs))
        )
        checkpoints.append(Checkpoint(iteration, timesteps, ret, policy))
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
            reward_shift=shift,
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


def select_levels(
    checkpoints: Sequence[Checkpoint], levels: Sequence[str], config: ARSConfig
) -> dict[str, Checkpoint]:
    """Pick ``expert`` (best return) and, among earlier checkpoints, ``medium`` / ``simple``.

    ``medium`` (``simple``) is the checkpoint before the expert whose return is nearest to
    ``R0 + f (R_expert - R0)`` with ``f = medium_fraction`` (``simple_fraction``), ``R0`` the initial
    return; ``simple`` is searched only before ``medium``, so training budgets increase with level.
    """
    best = max(range(len(checkpoints)), key=lambda i: (checkpoints[i].eval_return, -i))
    chosen = {"expert": checkpoints[best]}
    r0, r_max = checkpoints[0].eval_return, checkpoints[best].eval_return
    limit = best
    for level, frac in (("medium", config.medium_fraction), ("simple", config.simple_fraction)):
        if level not in levels:
            continue
        if limit == 0:
            raise RuntimeError(
                f"cannot pick a {level} checkpoint: no evaluated checkpoint precedes the next level; "
                "train longer or evaluate more often (--eval-every)"
            )
        target = r0 + frac * (r_max - r0)
        i = min(range(limit), key=lambda j: (abs(checkpoints[j].eval_return - target), -j))
        chosen[level] = checkpoints[i]
        limit = i
    return chosen


def train_behaviour_policies(
    name: str,
    out: str | Path,
    *,
    seed: int = 0,
    config: ARSConfig | None = None,
    final_eval_episodes: int = 10,
    force: bool = False,
    log=None,
) -> dict:
    """Train ARS on ``name`` and write ``out/{Env}/{level}.npz`` plus ``out/{Env}/policies.json``.

    An existing ``policies.json`` made with the same request is reused; one made differently is
    replaced only with ``force``. Returns the JSON record (also written to ``policies.json``), with
    the final returns of each level over ``final_eval_episodes`` fresh episodes.

    Raises:
        CacheConflictError: policies made differently exist and ``force`` is false.
    """
    import gymnasium
    import mujoco

    from pnc.data.minari_io import file_sha256

    spec = env_spec(name)
    config = config or DEFAULT_CONFIGS[spec.name]
    directory = Path(out) / spec.name
    request = {
        "env": spec.name,
        "gym_id": spec.gym_id,
        "seed": int(seed),
        "ars": dataclasses.asdict(config),
        "final_eval_episodes": int(final_eval_episodes),
    }
    record_path = directory / "policies.json"
    if record_path.exists():
        old = json.loads(record_path.read_text())
        if old.get("request") == request:
            return dict(old, status="reused")
        if not force:
            raise CacheConflictError(
                f"{record_path} holds policies trained with different settings; "
                "pass --force to replace them"
            )
    checkpoints, info = train_ars(spec.name, config, seed, log=log)
    chosen = select_levels(checkpoints, spec.levels, config)
    final_seeds = [
        int(s)
        for s in numpy_rng(spec.name, seed, "ars", "final-eval").integers(
            2**31 - 1, size=final_eval_episodes
        )
    ]
    levels = {}
    for level, ck in chosen.items():
        path = directory / f"{level}.npz"
        ck.policy.save(path)
        rets = evaluate(spec.gym_id, ck.policy, final_seeds, horizon=config.horizon)
        levels[level] = {
            "file": path.name,
            "sha256": file_sha256(path),
            "iteration": ck.iteration,
            "timesteps": ck.timesteps,
            "train_eval_return": ck.eval_return,
            "return_mean": float(np.mean(rets)),
            "return_std": float(np.std(rets)),
        }
    order = [lvl for lvl in ("simple", "medium", "expert") if lvl in levels]
    means = [levels[lvl]["return_mean"] for lvl in order]
    record = {
        "request": request,
        "algorithm": "ARS V2-t (Mania et al., 2018), linear policy on normalised observations",
        "levels": levels,
        "ordered_by_return": bool(all(a < b for a, b in zip(means, means[1:], strict=False))),
        "timesteps": info["timesteps"],
        "train_seconds": round(info["seconds"], 2),
        "learning_curve": [
            [c.iteration, c.timesteps, round(c.eval_return, 3)] for c in checkpoints
        ],
        "versions": {"gymnasium": gymnasium.__version__, "mujoco": mujoco.__version__},
    }
    directory.mkdir(parents=True, exist_ok=True)
    record_path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return dict(record, status="trained")


def load_policies(
    name: str, policies: str | Path | None = None
) -> tuple[dict[str, LinearPolicy], dict]:
    """Load the stored behaviour policies of ``name`` (default: the repository's copies).

    Returns:
        ``({level: policy}, record)`` where ``record`` is ``policies.json``; every file is checked
        against the SHA-256 recorded there.
    """
    from pnc.data.minari_io import file_sha256

    spec = env_spec(name)
    directory = Path(policies if policies is not None else POLICY_DIR) / spec.name
    record_path = directory / "policies.json"
    if not record_path.exists():
        raise FileNotFoundError(
            f"no behaviour policies for {spec.name} in {directory}; train them with "
            f"`python -m pnc.data.ars {spec.name} --out {directory.parent}`"
        )
    record = json.loads(record_path.read_text())
    out = {}
    for level in spec.levels:
        info = record["levels"].get(level)
        if info is None:
            raise FileNotFoundError(f"{record_path} has no {level!r} policy")
        path = directory / info["file"]
        if file_sha256(path) != info["sha256"]:
            raise ValueError(f"{path} does not match the SHA-256 recorded in {record_path}")
        out[level] = LinearPolicy.load(path)
    return out, record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pnc.data.ars",
        description="Train ARS behaviour policies for one environment.",
    )
    parser.add_argument("env", help=f"one of {', '.join(ENVS)}")
    parser.add_argument("--out", required=True, help="policy root; writes OUT/{Env}/...")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iterations", "--budget", type=int, default=None, help="ARS iterations")
    parser.add_argument("--eval-every", type=int, default=None)
    parser.add_argument("--force", action="store_true", help="replace policies trained differently")
    parser.add_argument("--minari-root", default=None, help="unused; accepted for uniformity")
    args = parser.parse_args(argv)
    spec = env_spec(args.env)
    config = DEFAULT_CONFIGS[spec.name]
    overrides = {}
    if args.iterations is not None:
        overrides["iterations"] = args.iterations
    if args.eval_every is not None:
        overrides["eval_every"] = args.eval_every
    config = dataclasses.replace(config, **overrides)
    print(f"[pnc.data.ars] {spec.name}: {config}", file=sys.stderr)
    record = train_behaviour_policies(
        spec.name,
        args.out,
        seed=args.seed,
        config=config,
        force=args.force,
        log=lambda m: print(f"[pnc.data.ars] {spec.name} {m}", file=sys.stderr, flush=True),
    )
    summary = {
        k: record[k]
        for k in ("status", "levels", "ordered_by_return", "timesteps", "train_seconds")
    }
    print(json.dumps(summary, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
