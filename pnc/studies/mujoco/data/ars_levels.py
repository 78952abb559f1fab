"""ARS behaviour levels: train ARS on an environment, select the ``expert`` / ``medium`` /
``simple`` levels among its checkpoints and write them to a policy store.

:func:`train_behaviour_policies` trains one ARS run (:mod:`pnc.studies.mujoco.data.ars`, settings
:data:`pnc.studies.mujoco.data.behaviour_settings.DEFAULT_CONFIGS`) whose checkpoints are evaluated under the
data's action noise (:mod:`pnc.studies.mujoco.data.action_noise`), selects the levels
(:func:`pnc.studies.mujoco.data.level_selection.select_levels`), evaluates them afresh and writes
``{Env}/{level}.npz``, ``{Env}/checkpoints.npz`` and ``{Env}/policies.json``
(:mod:`pnc.studies.mujoco.data.policy_store`). Every evaluated checkpoint is kept in ``checkpoints.npz``, so the
levels can be re-selected (for another action noise, say) by re-evaluation alone, without training
again (:func:`reselect_behaviour_policies`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from pnc.studies.mujoco.data.action_noise import action_noise_for
from pnc.studies.mujoco.data.ars import (
    ARSConfig,
    Checkpoint,
    evaluate_noisy,
    load_checkpoints,
    save_checkpoints,
    train_ars,
)
from pnc.studies.mujoco.data.behaviour_settings import (
    DEFAULT_CONFIGS,
    REWARD_SHIFT,
    SELECTION_FIELDS,
)
from pnc.studies.mujoco.data.envs import env_spec
from pnc.studies.mujoco.data.level_selection import level_evaluation, select_levels
from pnc.studies.mujoco.data.minari_io import file_sha256
from pnc.studies.mujoco.data.policy_store import reuse_record, write_record


def _request(spec, seed: int, config: ARSConfig, final_eval_episodes: int, noise: float) -> dict:
    return {
        "env": spec.name,
        "gym_id": spec.gym_id,
        "seed": int(seed),
        "ars": dataclasses.asdict(config),
        "action_noise": float(noise),
        "final_eval_episodes": int(final_eval_episodes),
    }


def _write_levels(
    spec, directory: Path, checkpoints: list[Checkpoint], request: dict, config: ARSConfig, extra
) -> dict:
    """Select the levels from ``checkpoints``, evaluate them afresh and write files + record."""
    import gymnasium
    import mujoco

    noise = request["action_noise"]
    chosen = select_levels(checkpoints, spec.levels, config)
    directory.mkdir(parents=True, exist_ok=True)
    ck_path = directory / "checkpoints.npz"
    save_checkpoints(ck_path, checkpoints)
    levels = {}
    for level, ck in chosen.items():
        path = directory / f"{level}.npz"
        ck.policy.save(path)
        levels[level] = {
            "file": path.name,
            "sha256": file_sha256(path),
            **level_evaluation(
                spec.name,
                ck,
                seed=request["seed"],
                episodes=request["final_eval_episodes"],
                action_noise=noise,
                horizon=config.horizon,
            ),
        }
    order = [lvl for lvl in ("simple", "medium", "expert") if lvl in levels]
    means = [levels[lvl]["return_mean"] for lvl in order]
    record = {
        "request": request,
        "algorithm": "ARS V2-t (Mania et al., 2018), linear policy on normalised observations",
        "selection": (
            "levels selected by select_levels from the mean and std of the returns over "
            f"eval_episodes episodes with Gaussian action noise {noise} x half the action range "
            "(the offline datasets' noise); learning_curve rows: iteration, timesteps, mean, std; "
            "return_mean/"
            "return_std over final_eval_episodes fresh episodes with that noise, "
            "deterministic_return_mean over the same resets without noise"
        ),
        "levels": levels,
        "ordered_by_return": bool(all(a < b for a, b in zip(means, means[1:], strict=False))),
        "checkpoints": {"file": ck_path.name, "sha256": file_sha256(ck_path)},
        "learning_curve": [
            [c.iteration, c.timesteps, round(c.eval_return, 3), round(c.eval_std, 3)]
            for c in checkpoints
        ],
        "versions": {"gymnasium": gymnasium.__version__, "mujoco": mujoco.__version__},
        **extra,
    }
    write_record(directory / "policies.json", record)
    return record


def train_behaviour_policies(
    name: str,
    out: str | Path,
    *,
    seed: int = 0,
    config: ARSConfig | None = None,
    action_noise: float | None = None,
    final_eval_episodes: int = 10,
    force: bool = False,
    log=None,
    state_path: str | Path | None = None,
    save_every: int = 10,
    workers: int = 1,
) -> dict:
    """Train ARS on ``name`` and write ``out/{Env}/{level}.npz``, ``checkpoints.npz`` and
    ``policies.json``.

    The levels are selected, and their final returns measured over ``final_eval_episodes`` fresh
    episodes, under ``action_noise`` (default :func:`action_noise_for`: the offline datasets'
    noise). An existing ``policies.json`` made with the same request is reused; one made
    differently is replaced only with ``force``. With ``state_path`` the run checkpoints its
    training state there every ``save_every`` iterations and resumes from it
    (:func:`pnc.studies.mujoco.data.ars.train_ars`); ``workers`` processes share the training rollouts.

    Returns:
        The JSON record (also written to ``policies.json``) plus ``status``.

    Raises:
        CacheConflictError: policies made differently exist and ``force`` is false.
    """
    spec = env_spec(name)
    config = config or DEFAULT_CONFIGS[spec.name]
    noise = action_noise_for(spec.name) if action_noise is None else float(action_noise)
    directory = Path(out) / spec.name
    request = _request(spec, seed, config, final_eval_episodes, noise)
    record_path = directory / "policies.json"
    reused = reuse_record(record_path, request, force)
    if reused is not None:
        return reused
    checkpoints, info = train_ars(
        spec.name,
        config,
        seed,
        action_noise=noise,
        reward_shift=REWARD_SHIFT.get(spec.name, 0.0),
        log=log,
        state_path=state_path,
        save_every=save_every,
        workers=workers,
    )
    extra = {
        "timesteps": info["timesteps"],
        "train_seconds": round(info["seconds"], 2),
        "iterations_done": info["iterations"],
    }
    record = _write_levels(spec, directory, checkpoints, request, config, extra)
    return dict(record, status="trained")


def reselect_behaviour_policies(
    name: str,
    out: str | Path,
    *,
    config: ARSConfig | None = None,
    action_noise: float | None = None,
    final_eval_episodes: int | None = None,
    log=None,
) -> dict:
    """Re-evaluate the stored checkpoints of ``name`` under ``action_noise`` and re-select the levels.

    No training: the checkpoints come from ``out/{Env}/checkpoints.npz`` (checked against the
    SHA-256 in ``policies.json``) and are evaluated exactly as :func:`pnc.studies.mujoco.data.ars.train_ars` would
    have, so the result equals training again with ``config`` and that noise. ``config`` (default:
    the stored one) may differ from the stored settings only in :data:`SELECTION_FIELDS`. Training
    time and timesteps are carried over.

    Returns:
        The new record plus ``status`` (``"reselected"``).

    Raises:
        ValueError: ``config`` changes a training setting, or the checkpoints were tampered with.
    """
    spec = env_spec(name)
    directory = Path(out) / spec.name
    record_path = directory / "policies.json"
    if not record_path.exists():
        raise FileNotFoundError(f"no policies.json in {directory}")
    old = json.loads(record_path.read_text())
    if old.get("kind", "linear") != "linear":
        raise ValueError(
            f"{record_path} holds {old['kind']} policies; only ARS levels are re-selected"
        )
    if "checkpoints" not in old:
        raise FileNotFoundError(
            f"{record_path} keeps no checkpoints; re-selection needs training again "
            f"(`python -m pnc.studies.mujoco.data.behaviour {spec.name} --out {Path(out)} --force`)"
        )
    ck_path = directory / old["checkpoints"]["file"]
    if file_sha256(ck_path) != old["checkpoints"]["sha256"]:
        raise ValueError(f"{ck_path} does not match the SHA-256 recorded in {record_path}")
    trained = ARSConfig(**old["request"]["ars"])
    config = trained if config is None else config
    changed = {
        k for k, v in dataclasses.asdict(config).items() if dataclasses.asdict(trained)[k] != v
    }
    if changed - SELECTION_FIELDS:
        raise ValueError(
            f"re-selection cannot change training settings {sorted(changed - SELECTION_FIELDS)}; "
            "train again instead"
        )
    seed = old["request"]["seed"]
    noise = action_noise_for(spec.name) if action_noise is None else float(action_noise)
    episodes = final_eval_episodes or old["request"]["final_eval_episodes"]
    checkpoints = []
    for ck in load_checkpoints(ck_path):
        rets = evaluate_noisy(
            spec.name,
            ck.policy,
            seed=seed,
            purpose="eval",
            episodes=config.eval_episodes,
            action_noise=noise,
            horizon=config.horizon,
        )
        checkpoints.append(
            dataclasses.replace(ck, eval_return=float(np.mean(rets)), eval_std=float(np.std(rets)))
        )
        if log is not None:
            log(f"iter {ck.iteration:4d}  return {checkpoints[-1].eval_return:10.2f}")
    request = _request(spec, seed, config, episodes, noise)
    extra = {
        "timesteps": old["timesteps"],
        "train_seconds": old["train_seconds"],
        # the checkpoints were trained under an earlier request that differs at most in
        # selection settings; keep every earlier one
        "reselected_from": [*old.get("reselected_from", []), old["request"]],
    }
    record = _write_levels(spec, directory, checkpoints, request, config, extra)
    return dict(record, status="reselected")
