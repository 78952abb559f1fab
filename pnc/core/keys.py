"""Deterministic PRNG keys derived from names, so every artifact is reproducible from (env, seed, method)."""

from __future__ import annotations

import hashlib

import jax


def derive_key(*parts: object) -> jax.Array:
    """A PRNG key that is a pure function of ``parts`` (e.g. ``derive_key("Ant", 3, "pnc", "build")``).

    The parts are joined with ``"/"`` and hashed with SHA-256; the first 4 bytes seed the key, so the
    key does not depend on Python's hash randomisation or on the order in which jobs run.
    """
    text = "/".join(str(p) for p in parts).encode()
    seed = int.from_bytes(hashlib.sha256(text).digest()[:4], "little")
    return jax.random.key(seed)
