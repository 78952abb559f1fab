"""A method's entry in a study config, read the same way by both studies: its fixed settings and
its grid, and the grid's points.

.. code-block:: yaml

    methods:
      pnc:
        fixed: {n_members: 50, rank: 20}              # every configuration's
        grid: {sigma: [8, 16, 32], ridge: [0.0001, 0.01]}   # the cross product, in key order

:func:`split_entry` checks an entry and gives its parts, :func:`grid_points` the grid's points in
order (the last key varies fastest) and :func:`point_id` a point's readable id (``sigma=8,
ridge=0.01``). The MuJoCo study makes one configuration of each point
(:func:`pnc.studies.mujoco.grid.expand`), the CIFAR study one sweep of the whole grid
(:mod:`pnc.studies.cifar.sweep`). Each study writes a method's configurations, typed and keyed by
id, to one kind of table (:func:`write_config_table`, :func:`read_config_table`): ``{config id:
{"config": {field: value}, ...}}`` in the grid's order, each record's ``config`` the whole
configuration.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pnc.methods.configs import format_value
from pnc.runtime.io import write_text_if_changed

__all__ = [
    "ENTRY_KEYS",
    "grid_points",
    "point_id",
    "read_config_table",
    "split_entry",
    "write_config_table",
]

#: The keys every method entry may have.
ENTRY_KEYS: tuple[str, ...] = ("fixed", "grid")


def split_entry(
    where: str, entry: Mapping[str, Any] | None, options: Sequence[str] = ()
) -> tuple[dict[str, Any], dict[str, list], dict[str, Any]]:
    """``(fixed, grid, options)`` of a method entry ``{"fixed": {...}, "grid": {key: [values]},
    option: value, ...}``, each part optional.

    Args:
        where: the entry's place in the config, for messages (``methods.pnc``).
        options: the keys the study allows beside ``fixed`` and ``grid`` (the MuJoCo study's
            ``base_steps``, ``calibration_pool``).

    Raises:
        ValueError: an unknown key (named, with the valid ones), ``fixed`` or ``grid`` not a
            mapping, a grid value that is not a non-empty list, a key both fixed and swept.
    """
    entry = dict(entry or {})
    valid = (*ENTRY_KEYS, *options)
    unknown = [k for k in entry if k not in valid]
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {sorted(map(str, unknown))}; valid: {', '.join(valid)}"
        )
    parts = {}
    for key in ENTRY_KEYS:
        part = entry.get(key) or {}
        if not isinstance(part, Mapping):
            raise ValueError(f"{where}.{key} must be a mapping, got {part!r}")
        parts[key] = dict(part)
    fixed, grid = parts["fixed"], parts["grid"]
    for key, values in grid.items():
        if not isinstance(values, list | tuple) or len(values) == 0:
            raise ValueError(f"{where}.grid.{key} must be a non-empty list")
    both = sorted(set(fixed) & set(grid))
    if both:
        raise ValueError(f"{where}: {both} both fixed and swept")
    return fixed, grid, {k: entry[k] for k in options if k in entry}


def grid_points(grid: Mapping[str, Sequence], order: Sequence[str] | None = None) -> list[dict]:
    """The points of ``grid``: one value per key, the cross product with the keys in ``order``
    (default: the grid's own) and the last key varying fastest; one empty point for no keys."""
    keys = list(grid if order is None else order)
    return [
        dict(zip(keys, values, strict=True))
        for values in itertools.product(*(grid[k] for k in keys))
    ]


def point_id(point: Mapping[str, Any]) -> str:
    """A point's readable id: ``key=value`` in the point's order, joined by commas (floats
    written losslessly without a trailing ``.0``, sequences joined by ``+``); ``default`` for the
    empty point."""
    items = [
        f"{k}={format_value(tuple(v) if isinstance(v, list) else v)}" for k, v in point.items()
    ]
    return ",".join(items) or "default"


def write_config_table(path: str | Path, records: Mapping[str, Mapping[str, Any]]) -> bool:
    """Write a method's configuration table ``{config id: {"config": {...}, ...}}`` (JSON, the
    records' order kept) to ``path`` unless it already holds exactly that text, so that its
    modification time changes only when a configuration does. Returns whether it wrote."""
    return write_text_if_changed(path, json.dumps(records, indent=1) + "\n")


def read_config_table(path: str | Path) -> dict[str, dict[str, Any]]:
    """A table written by :func:`write_config_table`: ``{config id: record}`` in its order."""
    with open(path) as fh:
        return json.load(fh)
