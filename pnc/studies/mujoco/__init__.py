"""The MuJoCo study: results vocabulary, per-job stages, grids, evaluation, metrics, selection."""

from pnc.runtime.extras import require

require(
    "workflow", ("pandas", "yaml", "gymnasium", "mujoco"), "the MuJoCo study (pnc.studies.mujoco)"
)
