"""The selected P&C configuration's members of one (env, seed), built once after selection and
stored for the mechanism stage.

:func:`write_pnc_members` builds them with the key the evaluation used (``derive_key(env, seed,
"pnc", "build")``) on the calibration pool the evaluation used (the train split, or the whole ID
pool for ``calibration_pool: id_pool``, :mod:`pnc.studies.mujoco.grid`) and stores them as full
parameter pytrees (``members.msgpack``, flax msgpack, a leading ``[M]`` axis) with a JSON record of
the configuration, the key's names, the calibration rows, the SHA-256 of the base run they were
built from and of the members file, and the size per member. :func:`load_pnc_members` reads them
back, verifying both hashes.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pnc.core.keys import derive_key
from pnc.core.mlp import Params
from pnc.core.perturb_correct import (
    PnCConfig,
    calibration_indices,
)
from pnc.methods.regression.runs import TrainingRun
from pnc.runtime.io import (
    ArtifactError,
    file_sha256,
    load_pytree,
    read_json,
    rebuild_hint,
    save_pytree,
    write_json,
)
from pnc.studies.mujoco import grid
from pnc.studies.mujoco.stages import calibration_pool_rows, load_split_arrays

_LOG = logging.getLogger("pnc.workflow")


def selected_point(
    selection: Mapping[str, Any], env: str, method_id: str, table: Mapping[str, Any]
) -> grid.GridPoint:
    """The grid point of ``method_id`` selected for ``env`` (``selection.json``'s record), read
    from the method's grid table by id (:func:`pnc.methods.entry.read_config_table`).

    Raises:
        ValueError: the record lacks ``env``/``method_id``, or its configuration is not in the grid.
    """
    try:
        config_id = selection[env][method_id]["config"]
    except (KeyError, TypeError):
        raise ValueError(f"the selection record has no {env}/{method_id} entry") from None
    if config_id not in table:
        raise ValueError(
            f"{env}/{method_id}: selected configuration {config_id!r} is not in the config's grid "
            f"({sorted(table)}); rerun the selection"
        )
    return grid.point_of(method_id, config_id, table[config_id])


def standardised_pool(
    run: TrainingRun, splits_dir: str | Path, pool: str = "train"
) -> tuple[jax.Array, jax.Array]:
    """The calibration pool (:func:`pnc.studies.mujoco.stages.calibration_pool_rows`), standardised."""
    splits, _ = load_split_arrays(splits_dir, ["train"] + (["val"] if pool == "id_pool" else []))
    x, y = calibration_pool_rows(splits, pool)
    return (
        run.model.x_norm.transform(jnp.asarray(x, jnp.float32)),
        run.model.y_norm.transform(jnp.asarray(y, jnp.float32)),
    )


def write_pnc_members(
    *,
    env: str,
    seed: int,
    run_dir: str | Path,
    splits_dir: str | Path,
    selection: Mapping[str, Any],
    table: Mapping[str, Any],
    out_dir: str | Path,
) -> dict:
    """Build the selected P&C configuration's members of (env, seed) and store them in ``out_dir``.

    Writes ``members.msgpack`` (the member parameter pytree, leading ``[M]`` axis) and
    ``members.json`` (written last: it marks a complete pair) with ``env, seed, method, config_id,
    config, key, calibration_rows (indices into the calibration pool), calibration_pool
    (``train`` or ``id_pool``), n_calibration_pool, base_run_sha256, members_sha256, n_members,
    bytes, bytes_per_member, build_s``.

    Returns:
        The JSON record.
    """
    from pnc.methods import regression as registry

    method = registry.get("pnc")
    point = selected_point(selection, env, "pnc", table)
    run = TrainingRun.load(run_dir)
    if run.spec != point.spec:
        raise ValueError(f"{run_dir} holds run {run.spec.run_id!r}, expected {point.run_id!r}")
    x_cal, y_cal = standardised_pool(run, splits_dir, point.calibration_pool)
    key = derive_key(env, seed, method.key_id, "build")
    start = time.perf_counter()
    posterior = method.build(run, point.config, x_cal, y_cal, key=key)
    jax.block_until_ready(posterior.members)
    build_s = time.perf_counter() - start
    rows = calibration_indices(key, x_cal.shape[0], point.config)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = dataclasses.asdict(point.config)
    record = {
        "env": env,
        "seed": int(seed),
        "method": "pnc",
        "config_id": point.config_id,
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in config.items()},
        "key": [env, int(seed), method.key_id, "build"],
        "calibration_rows": None if rows is None else np.asarray(rows).tolist(),
        "calibration_pool": point.calibration_pool,
        "n_calibration_pool": int(x_cal.shape[0]),
        "base_run_sha256": file_sha256(Path(run_dir) / "run.msgpack"),
        "n_members": int(point.config.n_members),
        "build_s": build_s,
    }
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".tmp-") as tmp:
        save_pytree(Path(tmp) / "members.msgpack", posterior.members)
        size = (Path(tmp) / "members.msgpack").stat().st_size
        record.update(
            members_sha256=file_sha256(Path(tmp) / "members.msgpack"),
            bytes=size,
            bytes_per_member=size / point.config.n_members,
        )
        write_json(Path(tmp) / "members.json", record)
        for name in ("members.msgpack", "members.json"):  # the JSON last: it marks a complete pair
            os.replace(Path(tmp) / name, out_dir / name)
    return record


def load_pnc_members(
    members_dir: str | Path, run_dir: str | Path
) -> tuple[Params, PnCConfig, dict]:
    """Read members written by :func:`write_pnc_members`, checking them against the base run.

    Raises:
        FileNotFoundError: a file is missing (named).
        pnc.runtime.io.ArtifactError: ``members.msgpack`` does not match its recorded SHA-256, the base run
            is not the one the members were built from, or the files do not form a member set
            (named, with the command that rebuilds them).
    """
    members_dir = Path(members_dir)
    info_path, tree_path = members_dir / "members.json", members_dir / "members.msgpack"
    record = read_json(info_path)
    if not tree_path.is_file():
        raise FileNotFoundError(f"{tree_path} not found; {rebuild_hint(info_path)}")
    if file_sha256(tree_path) != record.get("members_sha256"):
        raise ArtifactError(
            f"{tree_path} does not match the SHA-256 recorded in {info_path} (truncated, corrupt "
            f"or replaced); {rebuild_hint(info_path)}"
        )
    run_sha = file_sha256(Path(run_dir) / "run.msgpack")
    if run_sha != record.get("base_run_sha256"):
        raise ArtifactError(
            f"{members_dir} was built from another base run than {run_dir} (SHA-256 differs); "
            f"{rebuild_hint(info_path)}"
        )
    members = load_pytree(tree_path)
    try:
        fields = dict(record["config"])
        if fields.get("layers") is not None:
            fields["layers"] = tuple(fields["layers"])
        config = PnCConfig(**fields)
        n = {int(a.shape[0]) for a in jax.tree.leaves(members)}
        if n != {config.n_members}:
            raise ValueError(f"member axis {sorted(n)} != n_members {config.n_members}")
    except (KeyError, TypeError, ValueError) as err:
        raise ArtifactError(
            f"{members_dir}: members.json and members.msgpack do not form a member set "
            f"({type(err).__name__}: {err}); {rebuild_hint(info_path)}"
        ) from err
    return members, config, record
