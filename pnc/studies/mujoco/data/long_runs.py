"""Long, resumable ARS runs for the two Humanoid environments, and the store of their levels.

Humanoid and HumanoidStandup have the largest observation spaces of the study (348 dimensions)
and the most expensive steps, so their behaviour policies come from small ARS runs
(:data:`pnc.studies.mujoco.data.behaviour_settings.DEFAULT_CONFIGS`) that continue, one niced worker each, for as
long as idle CPU allows. Unlike the other locomotion tasks
(:data:`pnc.studies.mujoco.data.behaviour_settings.REWARD_SHIFT`) their training reward keeps the per-step alive
bonus (:data:`TRAIN_REWARD_SHIFT`): within a budget of a few CPU hours, staying up longer is the
fastest way to a higher return, and the returns that order the levels are the true returns either
way.

Every run keeps, in ``STATE_DIR/{Env}/`` (:data:`pnc.studies.mujoco.data.policy_store.STATE_DIR`):

- ``state.npz``: the resumable ARS training state (:func:`pnc.studies.mujoco.data.ars.train_ars`);
- ``progress.json``: one entry per training piece (iterations, CPU and wall seconds), because the
  state records wall-clock time only;
- ``learning_curve.csv``: iteration, timesteps, evaluated return mean and std of every checkpoint
  (written by :func:`write_learning_curve`).

Command line::

    python -m pnc.studies.mujoco.data.long_runs train ENV [--iterations K] [--workers W] [--state FILE]
    python -m pnc.studies.mujoco.data.long_runs curve ENV [--state FILE]
    python -m pnc.studies.mujoco.data.long_runs store ENV [--iterations K] [--out DIR] [--force] [--state FILE]

``train`` starts the run or resumes it from its state file (``--iterations`` extends it);
``store`` selects the levels from the checkpoints of the state (those up to iteration ``K``), or,
for an environment of :data:`pnc.studies.mujoco.data.behaviour_settings.GAIN_LEVELS`, derives them from one
checkpoint at several gains, or, for one of
:data:`pnc.studies.mujoco.data.behaviour_settings.CHECKPOINT_LEVELS`, takes each from its named checkpoint at its
gain; it evaluates them afresh under the data's action noise and writes
them only when their returns are ordered ``simple < medium < expert`` (:class:`LevelOrderError`
otherwise, exit status 2).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime
import json
import resource
import sys
import time
from pathlib import Path

from pnc.studies.mujoco.data.action_noise import action_noise_for
from pnc.studies.mujoco.data.ars import (
    RESUMABLE_FIELDS,
    load_training_state,
    save_checkpoints,
    train_ars,
)
from pnc.studies.mujoco.data.behaviour_settings import (
    CHECKPOINT_LEVELS,
    DEFAULT_CONFIGS,
    GAIN_LEVELS,
)
from pnc.studies.mujoco.data.envs import env_spec
from pnc.studies.mujoco.data.errors import CacheConflictError
from pnc.studies.mujoco.data.level_selection import (
    checkpoint_levels,
    gain_levels,
    level_evaluation,
    select_levels,
)
from pnc.studies.mujoco.data.minari_io import file_sha256
from pnc.studies.mujoco.data.policy_store import POLICY_DIR, STATE_DIR, write_record

#: The environments run here, and the per-step reward shift of their training reward (0: the
#: alive bonus is kept).
TRAIN_REWARD_SHIFT: dict[str, float] = {"Humanoid": 0.0, "HumanoidStandup": 0.0}


def _long_env(name: str) -> str:
    spec = env_spec(name)
    if spec.name not in TRAIN_REWARD_SHIFT:
        raise ValueError(
            f"{spec.name} has no long run here (only {', '.join(TRAIN_REWARD_SHIFT)}); "
            f"train it with `python -m pnc.studies.mujoco.data.behaviour {spec.name}`"
        )
    return spec.name


def run_dir(name: str) -> Path:
    """``STATE_DIR/{Env}``: where the run of ``name`` keeps its state, progress and curve."""
    return STATE_DIR / _long_env(name)


def _cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class _Progress:
    """``progress.json``: the pieces of a run, rewritten atomically as the current one advances."""

    def __init__(self, path: Path, start_iteration: int) -> None:
        self.path = path
        self.data = json.loads(path.read_text()) if path.exists() else {"pieces": []}
        self.cpu0, self.wall0 = _cpu_seconds(), time.perf_counter()
        self.piece = {
            "started_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "from_iteration": int(start_iteration),
            "last_checkpoint_iteration": int(start_iteration),
            "cpu_seconds": 0.0,
            "wall_seconds": 0.0,
        }
        self.data["pieces"].append(self.piece)

    def update(self, iteration: int | None = None) -> None:
        if iteration is not None:
            self.piece["last_checkpoint_iteration"] = int(iteration)
        self.piece["cpu_seconds"] = round(_cpu_seconds() - self.cpu0, 1)
        self.piece["wall_seconds"] = round(time.perf_counter() - self.wall0, 1)
        self.data["cpu_seconds_total"] = round(
            sum(p["cpu_seconds"] for p in self.data["pieces"]), 1
        )
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps(self.data, indent=2) + "\n")
        tmp.replace(self.path)


def train_long_run(
    name: str,
    *,
    iterations: int | None = None,
    workers: int = 1,
    state_path: str | Path | None = None,
    save_every: int = 5,
    seed: int = 0,
    log=None,
) -> dict:
    """Train (or resume) the ARS run of ``name`` with its settings of
    :data:`pnc.studies.mujoco.data.behaviour_settings.DEFAULT_CONFIGS` and reward shift
    :data:`TRAIN_REWARD_SHIFT`.

    The state is written to ``state_path`` (default ``run_dir(name)/state.npz``) every
    ``save_every`` iterations; CPU and wall time of this piece go to ``progress.json`` beside it
    at every checkpoint, and the learning curve to ``learning_curve.csv`` at the end.

    Returns:
        ``info`` of :func:`pnc.studies.mujoco.data.ars.train_ars` plus this piece's CPU seconds.
    """
    name = _long_env(name)
    state_path = Path(state_path) if state_path is not None else run_dir(name) / "state.npz"
    state_path.parent.mkdir(parents=True, exist_ok=True)
    config = DEFAULT_CONFIGS[name]
    if iterations is not None:
        config = dataclasses.replace(config, iterations=int(iterations))
    start = load_training_state(state_path).iteration if state_path.exists() else 0
    progress = _Progress(state_path.parent / "progress.json", start)
    progress.update()

    def on_log(message: str) -> None:
        words = message.split()
        progress.update(int(words[1]) if words[:1] == ["iter"] else None)
        if log is not None:
            log(message)

    checkpoints, info = train_ars(
        name,
        config,
        seed,
        action_noise=action_noise_for(name),
        reward_shift=TRAIN_REWARD_SHIFT[name],
        log=on_log,
        state_path=state_path,
        save_every=save_every,
        workers=workers,
    )
    progress.update(info["iterations"])
    write_learning_curve(name, state_path)
    return dict(info, cpu_seconds=progress.piece["cpu_seconds"])


def write_learning_curve(name: str, state_path: str | Path | None = None) -> Path:
    """Write ``learning_curve.csv`` (iteration, timesteps, return_mean, return_std of every
    evaluated checkpoint) beside the state of ``name``'s run and return its path."""
    state_path = Path(state_path) if state_path is not None else run_dir(name) / "state.npz"
    state = load_training_state(state_path)
    path = state_path.parent / "learning_curve.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["iteration", "timesteps", "return_mean", "return_std"])
        for c in state.checkpoints:
            writer.writerow([c.iteration, c.timesteps, f"{c.eval_return:.3f}", f"{c.eval_std:.3f}"])
    return path


class LevelOrderError(ValueError):
    """Levels whose returns are not ordered ``simple < medium < expert``."""


def check_level_order(returns: dict[str, float]) -> None:
    """Refuse levels whose mean returns are not strictly ordered ``simple < medium < expert``.

    Args:
        returns: ``{level: mean return}`` for ``expert`` and any of ``medium`` / ``simple``.

    Raises:
        LevelOrderError: a level does not lie strictly between its neighbours; the message names
            it and gives every return.
    """
    order = [lvl for lvl in ("simple", "medium", "expert") if lvl in returns]
    if "expert" not in returns or len(order) != len(returns):
        raise ValueError(f"expected expert and optionally medium / simple, got {sorted(returns)}")
    for low, high in zip(order, order[1:], strict=False):
        if not returns[low] < returns[high]:
            shown = ", ".join(f"{lvl} {returns[lvl]:.2f}" for lvl in order)
            raise LevelOrderError(
                f"the {low} level's return is not below the {high} level's ({shown}); "
                "levels are stored only when ordered simple < medium < expert: train longer"
            )


def store_long_run(
    name: str,
    out: str | Path | None = None,
    *,
    up_to: int | None = None,
    state_path: str | Path | None = None,
    final_eval_episodes: int = 10,
    force: bool = False,
    log=None,
) -> dict:
    """Select ``name``'s levels from the checkpoints of its run and store them when ordered.

    The levels are picked by :func:`pnc.studies.mujoco.data.level_selection.select_levels` among the checkpoints
    up to iteration ``up_to`` (default: all) or, where ``name`` has an entry in
    :data:`pnc.studies.mujoco.data.behaviour_settings.GAIN_LEVELS`, derived from that entry's checkpoint at its
    gains (:func:`pnc.studies.mujoco.data.level_selection.gain_levels`), or, where it has an entry in
    :data:`pnc.studies.mujoco.data.behaviour_settings.CHECKPOINT_LEVELS`, each level taken from its own
    checkpoint at its own gain (:func:`pnc.studies.mujoco.data.level_selection.checkpoint_levels`); each level's
    record then holds its ``gain``, and ``train_eval_return`` / ``train_eval_std`` are the
    unscaled checkpoint's;
    evaluated afresh over ``final_eval_episodes`` episodes under the data's action noise (and
    without noise), and written to ``out/{Env}/`` (default
    :data:`pnc.studies.mujoco.data.policy_store.POLICY_DIR`) as ``{level}.npz``, ``checkpoints.npz`` and
    ``policies.json`` in the format of :func:`pnc.studies.mujoco.data.ars_levels.train_behaviour_policies`, plus
    the run's CPU seconds. Nothing is written unless the fresh returns are ordered.

    Returns:
        The record written to ``policies.json``.

    Raises:
        LevelOrderError: the fresh returns are not ordered (nothing is written).
        CacheConflictError: ``out/{Env}/policies.json`` exists and ``force`` is false.
    """
    import gymnasium
    import mujoco

    name = _long_env(name)
    spec = env_spec(name)
    state_path = Path(state_path) if state_path is not None else run_dir(name) / "state.npz"
    state = load_training_state(state_path)
    checkpoints = [c for c in state.checkpoints if up_to is None or c.iteration <= up_to]
    directory = Path(out if out is not None else POLICY_DIR) / name
    record_path = directory / "policies.json"
    if record_path.exists() and not force:
        raise CacheConflictError(f"{record_path} exists; pass --force to replace it")
    config = DEFAULT_CONFIGS[name]
    stored_ars = state.settings.get("ars", {})
    if any(
        stored_ars.get(k) != v
        for k, v in dataclasses.asdict(config).items()
        if k not in RESUMABLE_FIELDS
    ):
        raise ValueError(
            f"{state_path} was trained with other settings than DEFAULT_CONFIGS[{name!r}]"
        )
    noise = action_noise_for(name)
    seed = int(state.settings["seed"])
    base_iteration, gains = GAIN_LEVELS.get(name, (None, None))
    picks = CHECKPOINT_LEVELS.get(name)
    if gains is not None and picks is not None:
        raise ValueError(f"{name} has both GAIN_LEVELS and CHECKPOINT_LEVELS; give one")
    if picks is not None:
        if set(picks) != set(spec.levels):
            raise ValueError(
                f"CHECKPOINT_LEVELS[{name!r}] gives checkpoints for {sorted(picks)}, not for "
                f"the levels {list(spec.levels)}"
            )
        chosen = checkpoint_levels(checkpoints, picks)
        gains = {lvl: float(gain) for lvl, (_, gain) in picks.items()}
        how = (
            "levels taken by checkpoint_levels: each level the checkpoint of its iteration "
            "with its matrix multiplied by its gain (same observation normalisation)"
        )
    elif gains is None:
        chosen = select_levels(checkpoints, spec.levels, config)
        how = "levels selected by select_levels from the checkpoints' returns"
    else:
        if set(gains) != set(spec.levels):
            raise ValueError(
                f"GAIN_LEVELS[{name!r}] gives gains for {sorted(gains)}, not for "
                f"the levels {list(spec.levels)}"
            )
        chosen = gain_levels(checkpoints, base_iteration, gains)
        how = (
            f"levels derived by gain_levels: the checkpoint of iteration {base_iteration} "
            "with its matrix multiplied by each level's gain (same observation normalisation)"
        )
    levels = {}
    for level, ck in chosen.items():
        levels[level] = {
            "file": f"{level}.npz",
            **level_evaluation(
                name,
                ck,
                seed=seed,
                episodes=final_eval_episodes,
                action_noise=noise,
                horizon=config.horizon,
            ),
        }
        if gains is not None:
            levels[level]["gain"] = float(gains[level])
        if log is not None:
            log(f"{level}: iteration {ck.iteration}, return {levels[level]['return_mean']:.2f}")
    check_level_order({lvl: info["return_mean"] for lvl, info in levels.items()})
    directory.mkdir(parents=True, exist_ok=True)
    for level, ck in chosen.items():
        ck.policy.save(directory / f"{level}.npz")
        levels[level]["sha256"] = file_sha256(directory / f"{level}.npz")
    ck_path = directory / "checkpoints.npz"
    save_checkpoints(ck_path, checkpoints)
    progress_path = state_path.parent / "progress.json"
    progress = json.loads(progress_path.read_text()) if progress_path.exists() else {}
    record = {
        "request": {
            "env": name,
            "gym_id": spec.gym_id,
            "seed": seed,
            "ars": dict(dataclasses.asdict(config), iterations=int(state.iteration)),
            "action_noise": float(noise),
            "final_eval_episodes": int(final_eval_episodes),
            "up_to_iteration": up_to,
            "gain_levels": (
                None
                if base_iteration is None
                else {"iteration": int(base_iteration), "gains": dict(gains)}
            ),
            "checkpoint_levels": (
                None
                if picks is None
                else {
                    lvl: {"iteration": int(it), "gain": float(gain)}
                    for lvl, (it, gain) in picks.items()
                }
            ),
        },
        "algorithm": (
            "ARS V2-t (Mania et al., 2018), linear policy on normalised observations; training "
            f"reward shift {TRAIN_REWARD_SHIFT[name]} (alive bonus kept), pnc.studies.mujoco.data.long_runs"
        ),
        "selection": (
            how + f"; evaluated under Gaussian action noise {noise} x half the action range; "
            "return_mean/return_std over "
            "final_eval_episodes fresh episodes with that noise, deterministic_return_mean over "
            "the same resets without noise; stored only when ordered simple < medium < expert"
        ),
        "levels": levels,
        "ordered_by_return": True,
        "checkpoints": {"file": ck_path.name, "sha256": file_sha256(ck_path)},
        "learning_curve": [
            [c.iteration, c.timesteps, round(c.eval_return, 3), round(c.eval_std, 3)]
            for c in checkpoints
        ],
        "versions": {"gymnasium": gymnasium.__version__, "mujoco": mujoco.__version__},
        "timesteps": int(state.timesteps),
        "train_seconds": round(float(state.seconds), 2),
        "train_cpu_seconds": progress.get("cpu_seconds_total"),
        "iterations_done": int(state.iteration),
    }
    write_record(record_path, record)
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pnc.studies.mujoco.data.long_runs",
        description="Resumable ARS runs and level store for Humanoid and HumanoidStandup.",
    )
    parser.add_argument("command", choices=("train", "curve", "store"))
    parser.add_argument("env", help=f"one of {', '.join(TRAIN_REWARD_SHIFT)}")
    parser.add_argument("--iterations", type=int, default=None, help="extend the run to K")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--save-every", type=int, default=5)
    parser.add_argument("--state", default=None, help="state file (default STATE_DIR/{Env})")
    parser.add_argument("--out", default=None, help="store: policy root (default POLICY_DIR)")
    parser.add_argument("--force", action="store_true", help="store: replace stored levels")
    args = parser.parse_args(argv)
    name = _long_env(args.env)

    def log(m: str) -> None:
        print(f"[pnc.studies.mujoco.data.long_runs] {name} {m}", file=sys.stderr, flush=True)

    if args.command == "train":
        info = train_long_run(
            name,
            iterations=args.iterations,
            workers=args.workers,
            state_path=args.state,
            save_every=args.save_every,
            log=log,
        )
        print(json.dumps(info, indent=2, sort_keys=True))
    elif args.command == "store":
        try:
            record = store_long_run(
                name,
                args.out,
                up_to=args.iterations,
                state_path=args.state,
                force=args.force,
                log=log,
            )
        except LevelOrderError as err:
            log(str(err))
            return 2
        print(json.dumps(record["levels"], indent=2, sort_keys=True))
    else:
        print(write_learning_curve(name, args.state))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
