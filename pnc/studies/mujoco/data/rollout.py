"""Seeded episode collection in a Gymnasium environment, shared by the Far and offline datasets."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from pnc.studies.mujoco.data.minari_io import Episode


def collect_episodes(
    env,
    act: Callable[[np.ndarray], np.ndarray],
    reset_rng: np.random.Generator,
    *,
    n_transitions: int | None = None,
    n_episodes: int | None = None,
) -> list[Episode]:
    """Roll ``act`` out in ``env`` until a transition or episode budget is spent.

    Each episode starts from ``env.reset(seed=s)`` with ``s`` drawn from ``reset_rng``; ``act(obs)``
    returns the float32 action (it owns any randomness of its own). With ``n_transitions`` the last
    episode is cut, and marked truncated, to give exactly that many transitions.

    Args:
        env: a Gymnasium environment (not closed here).
        act: policy ``obs [obs_dim] -> action [act_dim]``.
        reset_rng: generator of the reset seeds.
        n_transitions: total number of steps (exclusive with ``n_episodes``).
        n_episodes: number of complete episodes.

    Returns:
        The episodes; observations float64 ``[T + 1, obs]``, actions float32 ``[T, act]``.
    """
    if (n_transitions is None) == (n_episodes is None):
        raise ValueError("give exactly one of n_transitions and n_episodes")
    episodes: list[Episode] = []
    total = 0
    while (total < n_transitions) if n_transitions is not None else (len(episodes) < n_episodes):
        reset_seed = int(reset_rng.integers(2**31 - 1))
        obs, _ = env.reset(seed=reset_seed)
        observations, actions, rewards, terms, truncs = [obs], [], [], [], []
        while True:
            action = act(obs)
            obs, reward, terminated, truncated, _ = env.step(action)
            observations.append(obs)
            actions.append(action)
            rewards.append(reward)
            total += 1
            cut = n_transitions is not None and total >= n_transitions
            terms.append(terminated)
            truncs.append(truncated or (cut and not terminated))
            if terminated or truncated or cut:
                break
        episodes.append(
            Episode(
                np.asarray(observations, np.float64),
                np.asarray(actions, np.float32),
                np.asarray(rewards, np.float64),
                np.asarray(terms, bool),
                np.asarray(truncs, bool),
                seed=reset_seed,
            )
        )
    return episodes


def whole_episode_returns(episodes: Sequence[Episode], *, last_cut: bool = True) -> list[float]:
    """The returns of the episodes that ran to their end.

    With ``last_cut`` (episodes collected under a transition budget, :func:`collect_episodes`) the
    last episode, which the budget may have cut short, is left out unless it is the only one.
    """
    whole = episodes[:-1] if last_cut and len(episodes) > 1 else episodes
    return [ep.episode_return for ep in whole]
