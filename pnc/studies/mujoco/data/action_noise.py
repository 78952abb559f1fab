"""The Gaussian action noise of the offline datasets, per environment.

The offline datasets (:mod:`pnc.studies.mujoco.data.offline`) are rolled out with Gaussian action noise of
standard deviation ``action_noise`` times half the action range, and the behaviour levels are
selected under that same noise (:mod:`pnc.studies.mujoco.data.ars_levels`, :mod:`pnc.studies.mujoco.data.controller_levels`), so
the returns that order the levels are the returns of the data. Both read the default here.
"""

from __future__ import annotations

from pnc.studies.mujoco.data.envs import env_spec

#: Gaussian action noise (std as a fraction of half the action range) of the offline datasets,
#: per environment where it differs from :data:`FALLBACK_ACTION_NOISE`. The behaviour policies'
#: checkpoints are evaluated and their levels selected under this same noise. HalfCheetah's linear
#: gaits flip over under larger noise, which scrambles the returns of the intermediate checkpoints;
#: at 0.01 the stored levels' returns are ordered.
DEFAULT_ACTION_NOISE: dict[str, float] = {"HalfCheetah": 0.01}
FALLBACK_ACTION_NOISE = 0.1


def action_noise_for(name: str) -> float:
    """The default action-noise fraction of the offline datasets of ``name``."""
    return DEFAULT_ACTION_NOISE.get(env_spec(name).name, FALLBACK_ACTION_NOISE)
