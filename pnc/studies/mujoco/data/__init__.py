"""The data layer of the MuJoCo study: Minari datasets, random-policy Far data, offline behaviour
datasets, and the per-(environment, seed) splits the workflow trains and evaluates on.

Contract::

    pnc.studies.mujoco.data.ENVS                       # the eleven environment names
    pnc.studies.mujoco.data.env_spec(name)             # gym_id, Minari ids per level, has_mid, dims
    pnc.studies.mujoco.data.SPLITS                     # ("train", "val", "id", "near", "mid", "far")
    pnc.studies.mujoco.data.load_splits(directory)     # -> ({split: (x [N, obs + act], y [N, obs])}, manifest)
"""

from pnc.studies.mujoco.data.envs import ENVS, LEVELS, EnvSpec, env_spec
from pnc.studies.mujoco.data.errors import (
    CacheConflictError,
    DatasetMissingError,
    DimensionMismatchError,
    NonFiniteDataError,
    UnknownEnvironmentError,
)
from pnc.studies.mujoco.data.splits import (
    SOURCES,
    SPLITS,
    TARGETS,
    PoolSizeError,
    SplitConfig,
    build_splits,
    load_splits,
    make_splits,
)

__all__ = [
    "ENVS",
    "LEVELS",
    "SOURCES",
    "SPLITS",
    "TARGETS",
    "CacheConflictError",
    "DatasetMissingError",
    "DimensionMismatchError",
    "EnvSpec",
    "NonFiniteDataError",
    "PoolSizeError",
    "SplitConfig",
    "UnknownEnvironmentError",
    "build_splits",
    "env_spec",
    "load_splits",
    "make_splits",
]
