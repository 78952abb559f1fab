"""The kinds of behaviour policy the store holds, behind one interface.

A behaviour policy maps an observation to an action before clipping (``policy(obs) -> [act]``)
and may carry its own Gaussian action noise ``action_noise`` (a fraction of half the action
range). Two kinds are stored:

- ``"linear"``: an ARS linear policy (:class:`pnc.studies.mujoco.data.ars.LinearPolicy`, no noise of its own);
- ``"controller"``: a scripted controller (:class:`pnc.studies.mujoco.data.controllers.ScriptedController`).

``policies.json`` names the kind of an environment's levels; :func:`load_policy` reads a level's
file as that kind and refuses a file of another kind. Every rollout of a policy adds its own noise
in quadrature to the data's (:func:`total_action_noise`), so the datasets, the evaluations and
the level selection all see the same behaviour.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pnc.studies.mujoco.data.ars import LinearPolicy
from pnc.studies.mujoco.data.controllers import ScriptedController
from pnc.studies.mujoco.data.envs import env_spec
from pnc.studies.mujoco.data.rng import numpy_rng

#: Policy kinds and their classes (each has ``save(path)`` and ``load(path)``).
POLICY_KINDS: dict[str, type] = {"linear": LinearPolicy, "controller": ScriptedController}


def policy_kind(policy) -> str:
    """The kind of ``policy`` (a key of :data:`POLICY_KINDS`)."""
    for kind, cls in POLICY_KINDS.items():
        if isinstance(policy, cls):
            return kind
    raise TypeError(f"not a behaviour policy: {type(policy).__name__}")


def load_policy(path: str | Path, kind: str = "linear"):
    """Read a policy file of ``kind``.

    Raises:
        ValueError: ``kind`` is unknown, or the file holds a policy of another kind.
    """
    if kind not in POLICY_KINDS:
        raise ValueError(f"unknown policy kind {kind!r}; expected one of {', '.join(POLICY_KINDS)}")
    with np.load(path, allow_pickle=False) as z:
        stored = str(z["kind"]) if "kind" in z.files else "linear"
    if stored != kind:
        raise ValueError(f"{path} holds a {stored!r} policy, expected {kind!r}")
    return POLICY_KINDS[kind].load(path)


def total_action_noise(policy, data_noise: float) -> float:
    """The Gaussian action noise a rollout of ``policy`` uses: the data's noise and the policy's
    own, added in quadrature (exactly ``data_noise`` for a policy without noise of its own)."""
    if data_noise < 0:
        raise ValueError(f"action noise must be non-negative, got {data_noise}")
    return float(np.hypot(data_noise, getattr(policy, "action_noise", 0.0)))


def evaluate_policy(
    name: str,
    policy,
    *,
    seed: int,
    purpose: str,
    episodes: int,
    action_noise: float,
) -> np.ndarray:
    """True returns ``[episodes]`` of any kind of ``policy`` under ``action_noise`` (plus the
    policy's own, :func:`total_action_noise`), one episode after another, from reset seeds and
    noise drawn from streams named ``(env, seed, "policy-eval", purpose)``: equal names give
    equal episodes, so policies evaluated under one ``purpose`` are compared on the same resets.
    """
    import gymnasium as gym

    from pnc.studies.mujoco.data.rollout import collect_episodes

    spec = env_spec(name)
    env = gym.make(spec.gym_id)
    low, high = env.action_space.low, env.action_space.high
    scale = total_action_noise(policy, action_noise) * (high - low) / 2.0
    noise_rng = numpy_rng(spec.name, seed, "policy-eval", purpose, "noise")

    def act(obs: np.ndarray) -> np.ndarray:
        action = policy(obs) + scale * noise_rng.standard_normal(len(low))
        return np.clip(action, low, high).astype(np.float32)

    try:
        eps = collect_episodes(
            env,
            act,
            numpy_rng(spec.name, seed, "policy-eval", purpose, "reset"),
            n_episodes=episodes,
        )
    finally:
        env.close()
    return np.array([ep.episode_return for ep in eps])
