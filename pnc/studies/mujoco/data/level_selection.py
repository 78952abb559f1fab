"""Level selection: which checkpoints of an ARS run become the ``expert`` / ``medium`` / ``simple``
behaviour levels, and the final evaluation recorded for each.

Checkpoints are evaluated during training *with the Gaussian action noise the offline datasets are
rolled out with* (:func:`pnc.studies.mujoco.data.action_noise.action_noise_for`), so the returns that order the
levels are the returns of the data: ``expert`` is the best checkpoint, ``medium`` / ``simple`` the
earlier trained ones whose returns are nearest to fixed fractions of the way from the initial to the
expert return, so ``simple < medium < expert`` (:func:`select_levels`). Where an environment's
checkpoints make poor levels, the levels are instead one checkpoint at several gains
(:func:`gain_levels`, :data:`pnc.studies.mujoco.data.behaviour_settings.GAIN_LEVELS`) or named checkpoints, each at
its own gain (:func:`checkpoint_levels`, :data:`pnc.studies.mujoco.data.behaviour_settings.CHECKPOINT_LEVELS`).
Used by
:mod:`pnc.studies.mujoco.data.ars_levels` and :mod:`pnc.studies.mujoco.data.long_runs`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from pnc.studies.mujoco.data.ars import ARSConfig, Checkpoint, LinearPolicy, evaluate_noisy


def select_levels(
    checkpoints: Sequence[Checkpoint], levels: Sequence[str], config: ARSConfig
) -> dict[str, Checkpoint]:
    """Pick ``expert`` and, among earlier trained checkpoints, ``medium`` / ``simple``.

    With ``m`` / ``s`` a checkpoint's evaluation mean / standard deviation, ``expert`` maximises
    ``m - s`` (the best return it reliably achieves) and ``medium`` (``simple``) is the checkpoint
    after iteration 0 and before the expert that minimises ``|m - target| + s`` with
    ``target = R0 + f (R_expert - R0)``, ``f = medium_fraction`` (``simple_fraction``), ``R0`` the
    initial (untrained) and ``R_expert`` the expert's mean return. The ``s`` terms prefer policies
    whose returns are consistently at their level: a gait that sometimes falls over has an
    intermediate mean but yields a mixture of expert-like and failed episodes. ``simple`` is
    searched only before ``medium``, so training budgets increase with level. The returns are
    whatever the checkpoints were evaluated with: under the data's action noise
    (:func:`pnc.studies.mujoco.data.ars_levels.train_behaviour_policies`) they are the data's returns.

    Raises:
        RuntimeError: no trained checkpoint precedes the next level.
    """
    best = max(
        range(len(checkpoints)),
        key=lambda i: (checkpoints[i].eval_return - checkpoints[i].eval_std, -i),
    )
    chosen = {"expert": checkpoints[best]}
    r0, r_max = checkpoints[0].eval_return, checkpoints[best].eval_return
    limit = best
    for level, frac in (("medium", config.medium_fraction), ("simple", config.simple_fraction)):
        if level not in levels:
            continue
        if limit <= 1:
            raise RuntimeError(
                f"cannot pick a {level} checkpoint: no trained checkpoint precedes the next level; "
                "train longer or evaluate more often (--eval-every)"
            )
        target = r0 + frac * (r_max - r0)
        i = min(
            range(1, limit),
            key=lambda j: (abs(checkpoints[j].eval_return - target) + checkpoints[j].eval_std, -j),
        )
        chosen[level] = checkpoints[i]
        limit = i
    return chosen


def scale_gains(policy: LinearPolicy, gain: float) -> LinearPolicy:
    """``policy`` with its matrix multiplied by ``gain`` and the same observation normalisation:
    ``a = gain * matrix (s - obs_mean) / obs_std``. Deterministic; ``gain`` 1 gives an equal policy.

    Raises:
        ValueError: ``gain`` is not a finite number in ``(0, 1]``.
    """
    gain = float(gain)
    if not (0.0 < gain <= 1.0):
        raise ValueError(f"a gain must lie in (0, 1], got {gain}")
    return LinearPolicy(
        np.asarray(policy.matrix, np.float64) * gain,
        np.array(policy.obs_mean, np.float64),
        np.array(policy.obs_std, np.float64),
    )


def gain_levels(
    checkpoints: Sequence[Checkpoint], iteration: int, gains: Mapping[str, float]
) -> dict[str, Checkpoint]:
    """The levels as one checkpoint at several gains (:func:`scale_gains`).

    Args:
        checkpoints: the run's checkpoints.
        iteration: the iteration of the checkpoint every level derives from.
        gains: ``{level: gain}`` for ``expert`` and any of ``medium`` / ``simple``; the gains must
            decrease from ``expert`` to ``simple``.

    Returns:
        ``{level: checkpoint}``: the base checkpoint (iteration, timesteps and training evaluation
        of the unscaled policy) with its policy scaled by the level's gain.

    Raises:
        ValueError: no checkpoint at ``iteration``, or the gains do not decrease with the level.
    """
    base = [c for c in checkpoints if c.iteration == iteration]
    if not base:
        raise ValueError(f"no checkpoint at iteration {iteration}")
    order = [lvl for lvl in ("expert", "medium", "simple") if lvl in gains]
    if "expert" not in gains or len(order) != len(gains):
        raise ValueError(f"expected gains for expert and optionally medium / simple, got {gains}")
    if any(not gains[hi] > gains[lo] for hi, lo in zip(order, order[1:], strict=False)):
        raise ValueError(f"the gains must decrease from expert to simple, got {gains}")
    return {
        lvl: dataclasses.replace(base[0], policy=scale_gains(base[0].policy, gains[lvl]))
        for lvl in order
    }


def checkpoint_levels(
    checkpoints: Sequence[Checkpoint], picks: Mapping[str, tuple[int, float]]
) -> dict[str, Checkpoint]:
    """The levels as named checkpoints, each at its own gain (:func:`scale_gains`).

    Args:
        checkpoints: the run's checkpoints.
        picks: ``{level: (iteration, gain)}`` for ``expert`` and any of ``medium`` / ``simple``;
            the iterations must increase from ``simple`` to ``expert`` (a higher level has had
            more training), iteration 0 (the untrained zero policy) is not a level.

    Returns:
        ``{level: checkpoint}``: the checkpoint of the level's iteration (iteration, timesteps and
        training evaluation of the unscaled policy) with its policy scaled by the level's gain.

    Raises:
        ValueError: a level's iteration has no checkpoint or is 0, or the iterations do not
            increase with the level.
    """
    order = [lvl for lvl in ("expert", "medium", "simple") if lvl in picks]
    if "expert" not in picks or len(order) != len(picks):
        raise ValueError(f"expected expert and optionally medium / simple, got {sorted(picks)}")
    iterations = {lvl: int(picks[lvl][0]) for lvl in order}
    if any(it <= 0 for it in iterations.values()):
        raise ValueError(f"a level needs a trained checkpoint (iteration > 0), got {iterations}")
    if any(not iterations[hi] > iterations[lo] for hi, lo in zip(order, order[1:], strict=False)):
        raise ValueError(f"the iterations must increase from simple to expert, got {iterations}")
    by_iteration = {c.iteration: c for c in checkpoints}
    missing = sorted(it for it in iterations.values() if it not in by_iteration)
    if missing:
        raise ValueError(f"no checkpoint at iteration {', '.join(map(str, missing))}")
    return {
        lvl: dataclasses.replace(
            by_iteration[iterations[lvl]],
            policy=scale_gains(by_iteration[iterations[lvl]].policy, picks[lvl][1]),
        )
        for lvl in order
    }


def level_evaluation(
    env: str, ck: Checkpoint, *, seed: int, episodes: int, action_noise: float, horizon: int
) -> dict:
    """The record of one selected level: its training checkpoint and its final evaluation, the
    returns of ``episodes`` episodes under ``action_noise`` and without noise (same seeds)."""
    kwargs = dict(seed=seed, purpose="final-eval", episodes=episodes, horizon=horizon)
    rets = evaluate_noisy(env, ck.policy, action_noise=action_noise, **kwargs)
    det = evaluate_noisy(env, ck.policy, action_noise=0.0, **kwargs)
    return {
        "iteration": ck.iteration,
        "timesteps": ck.timesteps,
        "train_eval_return": ck.eval_return,
        "train_eval_std": ck.eval_std,
        "return_mean": float(np.mean(rets)),
        "return_std": float(np.std(rets)),
        "deterministic_return_mean": float(np.mean(det)),
    }
