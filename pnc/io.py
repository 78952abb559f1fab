"""Pickle-free persistence: pytrees as flax msgpack, metadata as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np


def save_pytree(path: str | Path, tree: Any) -> None:
    """Write a pytree of arrays (nested dicts/lists of arrays and scalars) as flax msgpack."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tree = jax.tree.map(np.asarray, tree)
    path.write_bytes(flax.serialization.msgpack_serialize(tree))


def load_pytree(path: str | Path, *, as_jax: bool = True) -> Any:
    """Read a pytree written by :func:`save_pytree` (leaves as ``jax.Array`` unless ``as_jax=False``)."""
    tree = flax.serialization.msgpack_restore(Path(path).read_bytes())
    return jax.tree.map(jnp.asarray, tree) if as_jax else tree


def write_json(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as indented, key-sorted JSON (parents created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text())


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, (np.ndarray, jax.Array)):
        return np.asarray(o).tolist()
    if isinstance(o, tuple):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
