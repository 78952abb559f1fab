"""Hyperparameter grids of the study: YAML grid -> method configurations and their training runs.

A method's entry in the workflow config (``methods:`` in ``config.yaml``) is

.. code-block:: yaml

    pnc:
      fixed: {n_members: 50, rank: 20}          # applied to every configuration
      grid: {sigma: [8, 16, 32], ridge: [0.0001, 0.01]}   # cross product, in key order

The entry is read and its grid expanded by :mod:`pnc.methods.entry`, as the CIFAR study's are.
Each grid point becomes one configuration of the method (``method.make_config(fixed | point)``),
named by ``method.config_id(config)``. The workflow expands the grids once, while it builds the DAG
(:func:`expand_all`), and writes each method's configurations, typed and keyed by id, to its grid
table (:func:`write_table`); the jobs read them back by id (:func:`points_by_id`,
:func:`points_from_table`, :func:`config_field`), and nothing reads a value out of an id. Configurations whose differing hyperparameters are post-hoc
share one training run (``method.training_spec(config).run_id``): all P&C, SWAG, Laplace and Subspace
configurations use the ``base`` run of an (env, seed); each MC-Dropout rate has its own run
(paper, Appendix C).

Two keys beside ``fixed`` and ``grid`` set the P&C protocol that departs from the shared one
(each method's ``entry_options``): ``base_steps`` (P&C and its ablation) trains P&C's base network for
its own number of steps in a run of its own (run id ``base-steps{N}``, e.g. the authors' 2,000),
so that SWAG and Laplace keep the shared ``base`` run; ``calibration_pool`` (P&C) names the rows
the calibration set ``D_cal`` is drawn from, ``train`` (the train split; the default) or
``id_pool`` (the whole ID pool, train then validation rows, as the authors' code drew it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pnc.methods.entry import grid_points, read_config_table, split_entry, write_config_table
from pnc.methods.regression.runs import TrainingSpec

#: Where P&C's calibration rows come from: the train split, or train + validation rows.
CALIBRATION_POOLS: tuple[str, ...] = ("train", "id_pool")
#: The entry defaults: the shared base run, the train split.
ENTRY_DEFAULTS: dict[str, Any] = {"base_steps": None, "calibration_pool": "train"}


@dataclasses.dataclass(frozen=True)
class GridPoint:
    """One configuration of one method.

    Attributes:
        method: method id.
        config_id: the method's readable id of ``config``.
        config: the method's config dataclass instance.
        spec: the training run the configuration needs.
        calibration_pool: the rows the construction draws its calibration set from,
            ``"train"`` or ``"id_pool"`` (:data:`CALIBRATION_POOLS`; only P&C's entry sets it).
    """

    method: str
    config_id: str
    config: Any
    spec: TrainingSpec
    calibration_pool: str = "train"

    @property
    def run_id(self) -> str:
        return self.spec.run_id


def _get_method(method_id: str) -> Any:
    from pnc.methods import (
        regression as methods,  # deferred: importing the registry pulls every method in
    )

    return methods.get(method_id)


def entry_options(method_id: str, entry: Mapping[str, Any] | None) -> dict[str, Any]:
    """The checked ``entry_options`` keys of one method entry, defaults filled in.

    Raises:
        ValueError: ``base_steps`` is not a positive integer or null, ``calibration_pool`` not
            one of :data:`CALIBRATION_POOLS` (named, with the valid values).
    """
    entry = dict(entry or {})
    options = _get_method(method_id).entry_options
    out = {k: entry.get(k, ENTRY_DEFAULTS[k]) for k in options}
    steps = out.get("base_steps")
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise ValueError(
            f"methods.{method_id}.base_steps = {steps!r}: give a positive number of steps (the "
            "authors': 2000), or null for the shared base run"
        )
    pool = out.get("calibration_pool", "train")
    if pool not in CALIBRATION_POOLS:
        raise ValueError(
            f"methods.{method_id}.calibration_pool = {pool!r}: valid: "
            f"{', '.join(CALIBRATION_POOLS)} (train: the train split; id_pool: train and "
            "validation rows, the authors')"
        )
    return out


def _entry_spec(spec: TrainingSpec, base_steps: int | None) -> TrainingSpec:
    """``spec``, or for ``base_steps`` P&C's own base run: the base kind with a ``steps`` option."""
    if base_steps is None:
        return spec
    if spec.kind != "base":
        raise ValueError(f"base_steps applies to a method on the base run, not a {spec.kind!r} run")
    return TrainingSpec("base", (("steps", int(base_steps)),))


def expand(method_id: str, entry: Mapping[str, Any] | None) -> list[GridPoint]:
    """All configurations of one method's grid entry, in grid order (last key varies fastest).

    Args:
        method_id: a registered method id (``pnc.methods.regression.METHOD_IDS``).
        entry: ``{"fixed": {...}, "grid": {key: [values, ...]}}``; both parts optional, and the
            method's ``entry_options`` beside them.

    Returns:
        One :class:`GridPoint` per grid point (a single one when the grid is empty).

    Raises:
        ValueError: on an unknown entry key, an empty value list, a key both fixed and swept, an
            unknown hyperparameter (named, with the valid ones) or duplicate configurations.
    """
    method = _get_method(method_id)
    fixed, grid, given = split_entry(f"methods.{method_id}", entry, method.entry_options)
    options = entry_options(method_id, given)
    points = []
    for point in grid_points(grid):
        overrides = {**fixed, **point}
        try:
            config = method.make_config(overrides)
        except (TypeError, ValueError) as err:
            raise ValueError(f"methods.{method_id}: {err}") from err
        spec = _entry_spec(method.training_spec(config), options.get("base_steps"))
        pool = options.get("calibration_pool", "train")
        points.append(GridPoint(method_id, method.config_id(config), config, spec, pool))
    ids = [p.config_id for p in points]
    if len(set(ids)) != len(ids):
        raise ValueError(f"methods.{method_id}: duplicate configurations {ids}")
    return points


def expand_all(methods_entry: Mapping[str, Any]) -> dict[str, list[GridPoint]]:
    """:func:`expand` for every method of the workflow config's ``methods`` mapping.

    Raises:
        ValueError: as :func:`expand`, or a method and the one whose keys it shares
            (``shares_keys_with``: P&C's ablation) on different base runs (``base_steps``).
    """
    points = {m: expand(m, e) for m, e in methods_entry.items()}
    for method_id in points:  # a method sharing another's keys perturbs that method's network
        other = _get_method(method_id).shares_keys_with
        if other not in points:
            continue
        steps = {
            m: entry_options(m, methods_entry[m]).get("base_steps") for m in (other, method_id)
        }
        if steps[other] != steps[method_id]:
            raise ValueError(
                f"methods.{other}.base_steps = {steps[other]} but methods.{method_id}.base_steps = "
                f"{steps[method_id]}: {method_id} applies {other}'s perturbations to {other}'s "
                "base network, so both must name the same steps"
            )
    return points


# ----------------------------------------------------------------------------- the grid table
#
# The DAG expands every grid once (:func:`expand_all`) and writes each method's configurations,
# typed and keyed by configuration id, to a table (:func:`table_of`, :func:`write_table`); every job
# reads its configurations from that table by id (:func:`pnc.methods.entry.read_config_table`,
# :func:`points_from_table`, :func:`points_by_id`). Nothing else expands a grid, and nothing reads a
# value out of an id.


def table_of(points: list[GridPoint]) -> dict[str, dict[str, Any]]:
    """One method's grid table: ``{config_id: {"config", "run_id", "spec", "calibration_pool"}}`` in
    grid order; ``config`` holds every field of the configuration, typed (tuples as lists)."""
    return {
        p.config_id: {
            "config": {
                k: list(v) if isinstance(v, tuple) else v
                for k, v in dataclasses.asdict(p.config).items()
            },
            "run_id": p.run_id,
            "spec": {"kind": p.spec.kind, "options": [list(o) for o in p.spec.options]},
            "calibration_pool": p.calibration_pool,
        }
        for p in points
    }


def write_table(path: str | Path, points: list[GridPoint]) -> bool:
    """Write one method's grid table to ``path`` unless it already holds exactly that text, so that
    its modification time changes only when a configuration does.

    Returns:
        Whether the file was written.
    """
    return write_config_table(path, table_of(points))


def read_tables(paths: Iterable[str | Path]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{method id: table}`` of grid tables named ``{method id}.json`` (:func:`write_table`)."""
    return {Path(p).stem: read_config_table(p) for p in paths}


def _typed(value: Any) -> Any:
    return tuple(_typed(v) for v in value) if isinstance(value, list) else value


def point_of(method_id: str, config_id: str, record: Mapping[str, Any]) -> GridPoint:
    """The :class:`GridPoint` of one table record: the configuration rebuilt from its typed fields
    (no id is read), checked to have ``config_id`` as its id.

    Raises:
        ValueError: the record's configuration does not have the id it is stored under (a table
            written by other code than this).
    """
    method = _get_method(method_id)
    config = method.config_cls(**{k: _typed(v) for k, v in record["config"].items()})
    if method.config_id(config) != config_id:
        raise ValueError(
            f"grid table of {method_id}: configuration {config_id!r} holds the fields of "
            f"{method.config_id(config)!r}; rebuild the table (rerun the workflow)"
        )
    spec = TrainingSpec(
        record["spec"]["kind"], tuple((k, _typed(v)) for k, v in record["spec"]["options"])
    )
    return GridPoint(method_id, config_id, config, spec, record["calibration_pool"])


def points_from_table(method_id: str, table: Mapping[str, Mapping[str, Any]]) -> list[GridPoint]:
    """Every configuration of one method's grid table, in grid order."""
    return [point_of(method_id, cid, rec) for cid, rec in table.items()]


def points_by_id(
    method_id: str, table: Mapping[str, Mapping[str, Any]], config_ids: Iterable[str]
) -> list[GridPoint]:
    """The configurations ``config_ids`` of one method's grid table, in the order given.

    Raises:
        ValueError: an id is not in the table (named, with the table's ids).
    """
    config_ids = list(config_ids)
    unknown = [c for c in config_ids if c not in table]
    if unknown:
        raise ValueError(
            f"{method_id}: configuration(s) {unknown} not in the grid table ({list(table)})"
        )
    return [point_of(method_id, c, table[c]) for c in config_ids]


def config_field(
    tables: Mapping[str, Mapping[str, Mapping[str, Any]]], field: str
) -> dict[tuple[str, str], Any]:
    """``{(method id, config id): value}`` of one typed field (e.g. ``sigma``) over every
    configuration of ``tables`` (:func:`read_tables`) that has it."""
    return {
        (method, cid): rec["config"][field]
        for method, table in tables.items()
        for cid, rec in table.items()
        if field in rec["config"]
    }


def evaluation_work(points: Mapping[str, list[GridPoint]]) -> dict[tuple[str, str], int]:
    """A rough size of each evaluation job's work, for scheduling longest jobs first.

    One job evaluates every configuration of a method on one training run. Its work is counted in
    networks run on the evaluated rows: per configuration, its members or posterior samples
    (``n_members`` / ``n_samples``; 1 when it has neither), and for a sampled posterior with a
    chain (``burn_in``) also the chain's states, ``burn_in + n_samples * thin``, each a likelihood
    over the train rows. Measured on a Humanoid seed, this orders the evaluations as their CPU
    time does: Subspace 1,239 s, P&C 1,175 s, SWAG 461 s, Laplace 439 s, then MC Dropout.

    Args:
        points: :func:`expand_all`'s ``{method: [GridPoint]}``.

    Returns:
        ``{(method, run_id): work}`` for every evaluation job the grid needs.
    """
    work: dict[tuple[str, str], int] = {}
    for method, pts in points.items():
        for p in pts:
            cfg = p.config
            n = int(getattr(cfg, "n_members", None) or getattr(cfg, "n_samples", None) or 1)
            if hasattr(cfg, "burn_in"):
                n += int(cfg.burn_in) + n * int(getattr(cfg, "thin", 1))
            work[(method, p.run_id)] = work.get((method, p.run_id), 0) + n
    return work


def training_work(points: Mapping[str, list[GridPoint]]) -> dict[str, int]:
    """``{run_id: work}``: the :func:`evaluation_work` of the evaluations that wait for each
    training run, so that the runs feeding the longest evaluations are trained first."""
    work: dict[str, int] = {}
    for (_, run), w in evaluation_work(points).items():
        work[run] = work.get(run, 0) + w
    return work
