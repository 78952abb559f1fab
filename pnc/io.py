"""Pickle-free persistence: pytrees as flax msgpack, metadata as JSON, tables as CSV; atomic writes."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np

if TYPE_CHECKING:
    import pandas as pd


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


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_csv(frame: pd.DataFrame, path: str | Path) -> None:
    """Write ``frame`` as CSV atomically (no index; floats written losslessly)."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, float_format="%.10g")
