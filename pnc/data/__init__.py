"""The data layer of the MuJoCo study: Minari datasets, random-policy Far data, offline behaviour
datasets, and the per-(environment, seed) splits the workflow trains and evaluates on.

Contract::

    pnc.data.ENVS                       # the eleven environment names
    pnc.data.env_spec(name)             # gym_id, Minari ids per level, has_mid, dims
    pnc.data.SPLITS                     # ("train", "val", "id", "near", "mid", "far")
    pnc.data.load_splits(directory)     # -> ({split: (x [N, obs + act], y [N, obs])}, manifest)
"""

from pnc.data.envs import ENVS, LEVELS, EnvSpec, env_spec
from pnc.data.errors import (
    CacheConflictError,
    DatasetMissingError,
    DimensionMismatchError,
    NonFiniteDataError,
    UnknownEnvironmentError,
)
from pnc.data.splits import (
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
