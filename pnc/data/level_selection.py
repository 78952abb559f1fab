"""Level selection: which checkpoints of an ARS run become the ``expert`` / ``medium`` / ``simple``
behaviour levels, and the final evaluation recorded for each.

Checkpoints are evaluated during training *with the Gaussian action noise the offline datasets are
rolled out with* (:func:`pnc.data.action_noise.action_noise_for`), so the returns that order the
levels are the returns of the data: ``expert`` is the best checkpoint, ``medium`` / ``simple`` the
earlier trained ones whose returns are nearest to fixed fractions of the way from the initial to the
expert return, so ``simple < medium < expert`` (:func:`select_levels`). Used by
:mod:`pnc.data.ars_levels` and :mod:`pnc.data.long_runs`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pnc.data.ars import ARSConfig, Checkpoint, evaluate_noisy


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
    (:func:`pnc.data.ars_levels.train_behaviour_policies`) they are the data's returns.

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
