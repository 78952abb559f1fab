"""Scripted-controller behaviour levels: the levels of the environments ARS does not learn
(Reacher, Pusher), written to a policy store.

Scripted controllers have no training run: each level is a set of controller parameters and an
own action noise (degraded gains, an aim error and more noise below ``expert``,
:data:`pnc.studies.mujoco.data.behaviour_settings.CONTROLLER_LEVELS`), evaluated under the data's action noise
(:mod:`pnc.studies.mujoco.data.action_noise`) like the ARS levels (:func:`build_controller_policies`), and
stored as ``{Env}/{level}.npz`` and ``{Env}/policies.json`` (:mod:`pnc.studies.mujoco.data.policy_store`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pnc.studies.mujoco.data.action_noise import action_noise_for
from pnc.studies.mujoco.data.behaviour_settings import CONTROLLER_ALGORITHMS, CONTROLLER_LEVELS
from pnc.studies.mujoco.data.controllers import ScriptedController
from pnc.studies.mujoco.data.envs import env_spec
from pnc.studies.mujoco.data.minari_io import file_sha256
from pnc.studies.mujoco.data.policy import evaluate_policy
from pnc.studies.mujoco.data.policy_store import reuse_record, write_record


def build_controller_policies(
    name: str,
    out: str | Path,
    *,
    seed: int = 0,
    levels: dict[str, tuple[dict[str, float], float]] | None = None,
    action_noise: float | None = None,
    final_eval_episodes: int = 50,
    force: bool = False,
    log=None,
) -> dict:
    """Write the scripted-controller levels of ``name`` to ``out/{Env}/{level}.npz`` and
    ``policies.json``.

    Each level (default :data:`CONTROLLER_LEVELS`) is evaluated over ``final_eval_episodes``
    episodes under ``action_noise`` (default :func:`action_noise_for`, the data's noise) plus its
    own, on the same resets for every level (:func:`pnc.studies.mujoco.data.policy.evaluate_policy`), and without
    noise; the record also holds the zero policy's return on those resets. An existing record made
    with the same request is reused; one made differently is replaced only with ``force``.

    Returns:
        The JSON record plus ``status``.

    Raises:
        CacheConflictError: policies made differently exist and ``force`` is false.
        ValueError: ``name`` has no controller levels.
    """
    import gymnasium
    import mujoco

    spec = env_spec(name)
    levels = levels if levels is not None else CONTROLLER_LEVELS.get(spec.name)
    if not levels or "expert" not in levels:
        raise ValueError(f"no scripted-controller levels (with an expert) for {spec.name}")
    noise = action_noise_for(spec.name) if action_noise is None else float(action_noise)
    request = {
        "env": spec.name,
        "gym_id": spec.gym_id,
        "seed": int(seed),
        "controller_levels": {
            lvl: {"params": dict(params), "action_noise": float(own)}
            for lvl, (params, own) in levels.items()
        },
        "action_noise": noise,
        "final_eval_episodes": int(final_eval_episodes),
    }
    directory = Path(out) / spec.name
    record_path = directory / "policies.json"
    reused = reuse_record(record_path, request, force)
    if reused is not None:
        return reused
    directory.mkdir(parents=True, exist_ok=True)

    def returns(policy, data_noise: float) -> np.ndarray:
        return evaluate_policy(
            spec.name,
            policy,
            seed=seed,
            purpose="final-eval",
            episodes=final_eval_episodes,
            action_noise=data_noise,
        )

    made = {}
    for level, (params, own) in levels.items():
        policy = ScriptedController.from_dict(spec.name, params, own)
        path = directory / f"{level}.npz"
        policy.save(path)
        rets = returns(policy, noise)
        made[level] = {
            "file": path.name,
            "sha256": file_sha256(path),
            "params": policy.as_dict(),
            "own_action_noise": policy.action_noise,
            "return_mean": float(np.mean(rets)),
            "return_std": float(np.std(rets)),
            "deterministic_return_mean": float(
                np.mean(returns(ScriptedController(policy.env, policy.params), 0.0))
            ),
        }
        if log is not None:
            log(
                f"{level}: return {made[level]['return_mean']:.2f} +- {made[level]['return_std']:.2f}"
            )
    zero = ScriptedController.from_dict(spec.name, {k: 0.0 for k in levels["expert"][0]})
    order = [lvl for lvl in ("simple", "medium", "expert") if lvl in made]
    means = [made[lvl]["return_mean"] for lvl in order]
    record = {
        "kind": "controller",
        "request": request,
        "algorithm": CONTROLLER_ALGORITHMS.get(
            spec.name, "scripted controller (pnc.studies.mujoco.data.controllers)"
        ),
        "selection": (
            "levels are fixed parameter sets (CONTROLLER_LEVELS): weaker levels scale the expert's "
            "gains down, aim off the target and add their own action noise; return_mean/return_std "
            f"over final_eval_episodes episodes with Gaussian action noise {noise} x half the "
            "action range added in quadrature to the level's own, on the same resets for every "
            "level; deterministic_return_mean: the level's gains without any noise"
        ),
        "levels": made,
        "zero_policy_return_mean": float(np.mean(returns(zero, noise))),
        "ordered_by_return": bool(all(a < b for a, b in zip(means, means[1:], strict=False))),
        "versions": {"gymnasium": gymnasium.__version__, "mujoco": mujoco.__version__},
    }
    write_record(record_path, record)
    return dict(record, status="built")
