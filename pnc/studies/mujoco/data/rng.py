"""Named NumPy random streams: data generation is a pure function of (env, seed, purpose).

Environment rollouts run on the CPU in NumPy/MuJoCo, so the data layer seeds NumPy generators the
way :func:`pnc.core.keys.derive_key` seeds JAX keys: from a SHA-256 of the joined names.
"""

from __future__ import annotations

import hashlib

import numpy as np


def seed_from(*parts: object) -> int:
    """A 63-bit integer seed that is a pure function of ``parts`` (joined with ``"/"``)."""
    text = "/".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little") >> 1


def numpy_rng(*parts: object) -> np.random.Generator:
    """A NumPy generator seeded by :func:`seed_from`, e.g. ``numpy_rng("Hopper", 3, "far")``."""
    return np.random.default_rng(seed_from(*parts))
