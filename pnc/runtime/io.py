"""Pickle-free persistence: pytrees as flax msgpack, metadata as JSON, tables as CSV; atomic writes."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)


class ArtifactError(ValueError):
    """A stored artifact is unreadable, truncated or corrupt; the message names the file and how
    to rebuild it."""


#: Workflow artifacts, the Snakemake options that name their workflow and the file to pass to
#: ``snakemake --forcerun`` to rebuild them (the CIFAR study's files through ``-s cifar.smk``).
_WORKFLOW_TARGETS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (
        re.compile(r"(results/cifar/runs/seed[^/]+/[^/]+)/run\.(?:json|msgpack)$"),
        "-s cifar.smk ",
        r"\1/run.json",
    ),
    (re.compile(r"((?:results|resources)/cifar/.+)$"), "-s cifar.smk ", r"\1"),
    (
        re.compile(r"(results/runs/[^/]+/seed[^/]+/[^/]+)/run\.(?:json|msgpack)$"),
        "",
        r"\1/run.json",
    ),
    (
        re.compile(r"(resources/splits/[^/]+/seed[^/]+)(?:/splits\.npz|/manifest\.json)?$"),
        "",
        r"\1/manifest.json",
    ),
    (re.compile(r"((?:results|resources)/.+)$"), "", r"\1"),
)


def rebuild_hint(path: str | Path) -> str:
    """How to rebuild ``path``: the ``snakemake --forcerun`` command for a workflow artifact.

    A training run (``results/runs/ENV/seedS/RUN/run.{json,msgpack}``) is rebuilt through its
    ``run.json``, the splits (``resources/splits/ENV/seedS/...``) through their ``manifest.json``,
    any other file under ``results/`` or ``resources/`` directly; a file of the CIFAR study
    (``results/cifar/...``, ``resources/cifar/...``; a training run through its ``run.json``)
    with ``snakemake -s cifar.smk``.
    """
    text = Path(path).as_posix().rstrip("/")
    for pattern, options, target in _WORKFLOW_TARGETS:
        match = pattern.search(text)
        if match:
            return f"rebuild it: snakemake {options}--forcerun {match.expand(target)}"
    return "rebuild it with the stage that wrote it (in the workflow: snakemake --forcerun FILE)"


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def save_pytree(path: str | Path, tree: Any) -> None:
    """Write a pytree of arrays (nested dicts/lists of arrays and scalars) as flax msgpack."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    import flax.serialization
    import jax

    tree = jax.tree.map(np.asarray, tree)
    path.write_bytes(flax.serialization.msgpack_serialize(tree))


def load_pytree(path: str | Path, *, as_jax: bool = True) -> Any:
    """Read a pytree written by :func:`save_pytree` (leaves as ``jax.Array`` unless ``as_jax=False``).

    Raises:
        FileNotFoundError: ``path`` does not exist (named, with :func:`rebuild_hint`).
        ArtifactError: the file is not a complete msgpack pytree (truncated or corrupt).
    """
    import flax.serialization
    import jax
    import jax.numpy as jnp

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found; {rebuild_hint(path)}")
    try:
        tree = flax.serialization.msgpack_restore(path.read_bytes())
    except Exception as err:  # msgpack raises several unrelated types on bad input
        raise ArtifactError(
            f"{path} is truncated or corrupt ({type(err).__name__}: {err}); {rebuild_hint(path)}"
        ) from err
    return jax.tree.map(jnp.asarray, tree) if as_jax else tree


#: The key of a run record (``run.json``) that holds the SHA-256 of its ``run.msgpack``.
RUN_SHA256_KEY = "msgpack_sha256"


def save_checked_run(directory: str | Path, tree: Any, record: dict[str, Any]) -> None:
    """Write a hash-checked run: ``directory/run.msgpack`` (``tree``, atomically) and
    ``directory/run.json`` (``record`` plus the SHA-256 of ``run.msgpack`` under
    :data:`RUN_SHA256_KEY`), which :func:`load_checked_run` verifies. A hash already in
    ``record`` (a run read back and saved again) is replaced by the hash of the bytes written.
    """
    directory = Path(directory)
    with atomic_path(directory / "run.msgpack") as tmp:
        save_pytree(tmp, tree)
    sha256 = file_sha256(directory / "run.msgpack")
    write_json(directory / "run.json", {**record, RUN_SHA256_KEY: sha256})


def load_checked_run(directory: str | Path) -> tuple[Any, dict[str, Any]]:
    """Read a run written by :func:`save_checked_run`: ``(tree, record)``.

    ``record`` is ``run.json`` as written (with its :data:`RUN_SHA256_KEY`); a record that is not
    a JSON object comes back as ``{}``. A record without a SHA-256 (a run written before runs were
    hash-checked) is read unchecked, and logged.

    Raises:
        FileNotFoundError: ``run.json`` or ``run.msgpack`` is missing (named, with the command
            that rebuilds the run).
        ArtifactError: a file is truncated or corrupt, or ``run.msgpack`` does not match the
            SHA-256 recorded in ``run.json`` (named, with the command that rebuilds the run).
    """
    directory = Path(directory)
    info_path, tree_path = directory / "run.json", directory / "run.msgpack"
    info = read_json(info_path)
    if not tree_path.is_file():
        raise FileNotFoundError(f"{tree_path} not found; {rebuild_hint(tree_path)}")
    record = info if isinstance(info, dict) else {}
    expected = record.get(RUN_SHA256_KEY)
    if expected is None:
        log.info("%s: no SHA-256 recorded in %s; read unchecked", tree_path, info_path)
    elif file_sha256(tree_path) != expected:
        raise ArtifactError(
            f"{tree_path} does not match the SHA-256 recorded in {info_path} (truncated, "
            f"corrupt or replaced); {rebuild_hint(info_path)}"
        )
    return load_pytree(tree_path), record


def write_json(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as indented, key-sorted, strict JSON (parents created).

    Raises:
        ValueError: ``obj`` holds a non-finite number (``NaN``/``inf`` are not JSON); the message
            names the file and where the number is (write ``None`` where a value is undefined).
    """
    path = Path(path)
    where = _non_finite(obj)
    if where is not None:
        raise ValueError(f"{path}: non-finite number at {where or '(top level)'} is not valid JSON")
    text = json.dumps(obj, indent=2, sort_keys=True, default=_json_default, allow_nan=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def read_json(path: str | Path) -> Any:
    """Read a JSON file.

    Raises:
        FileNotFoundError: ``path`` does not exist (named, with :func:`rebuild_hint`).
        ArtifactError: the file is not valid (strict) JSON, e.g. truncated.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found; {rebuild_hint(path)}")
    try:
        return json.loads(path.read_text(), parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError) as err:
        raise ArtifactError(
            f"{path} is not valid JSON, truncated or corrupt ({err}); {rebuild_hint(path)}"
        ) from err


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard constant {name}")


def _non_finite(obj: Any, where: str = "") -> str | None:
    """The key path of the first non-finite float in ``obj``, or ``None``."""
    if isinstance(obj, float | np.floating):
        return where if not math.isfinite(float(obj)) else None
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, list | tuple):
        items = enumerate(obj)
    elif _is_array(obj):
        arr = np.asarray(obj)
        if arr.dtype.kind in "fc" and not np.isfinite(arr).all():
            return where
        return None
    else:
        return None
    for key, value in items:
        found = _non_finite(value, f"{where}.{key}" if where else str(key))
        if found is not None:
            return found
    return None


def _is_array(obj: Any) -> bool:
    """Whether ``obj`` is a NumPy or JAX array (no JAX array exists unless JAX was imported)."""
    jax = sys.modules.get("jax")
    return isinstance(obj, np.ndarray) or (jax is not None and isinstance(obj, jax.Array))


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if _is_array(o):
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


def write_text_if_changed(path: str | Path, text: str) -> bool:
    """Write ``text`` to ``path`` atomically unless the file already holds exactly it, so that its
    modification time (which Snakemake reruns jobs by) changes only when its content does.

    Returns:
        Whether the file was written.
    """
    path = Path(path)
    if path.is_file() and path.read_text() == text:
        return False
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return True


def write_csv(frame: pd.DataFrame, path: str | Path) -> None:
    """Write ``frame`` as CSV atomically (no index; floats written losslessly)."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, float_format="%.10g")


#: Prefix of the line a workflow job writes to its log (stderr) as it ends, followed by the JSON of
#: its exact resource use (``cpu_s``, ``user_s``, ``system_s``, ``max_rss_mb``, ``stage``,
#: ``status``): written by :func:`pnc.runtime.stage.process_line`, read by :func:`read_process_record`.
PROCESS_RECORD = "pnc.workflow process "


def read_process_record(log: str | Path) -> dict[str, Any] | None:
    """The last :data:`PROCESS_RECORD` line of a job's log as a dict; ``None`` when the log does
    not exist or holds no such line (a job of older code, or one killed before it ended)."""
    try:
        text = Path(log).read_text(errors="replace")
    except FileNotFoundError:
        return None
    for line in reversed(text.splitlines()):
        if line.startswith(PROCESS_RECORD):
            try:
                record = json.loads(line[len(PROCESS_RECORD) :])
            except json.JSONDecodeError:
                return None
            return record if isinstance(record, dict) and "cpu_s" in record else None
    return None
