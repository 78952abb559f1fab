"""The CIFAR study's sweeps as data: each method's configurations, expanded once by the workflow
(``workflow/rules/cifar/common.smk`` calls :func:`expand_sweep`, nothing else does) and written
keyed by id to ``results/cifar/sweeps/<method>.json``; the post-hoc jobs read that file
(:meth:`Sweep.read`) and a configuration by its id (:meth:`Sweep.at`), never expanding a grid
again and never reading an id's text.

A configuration is one point of the method's ``grid``: one value per grid key, keys and values as
the config gives them (``bootstrap_frac`` stays ``bootstrap_frac`` and ``1`` stays ``1``: the
values name the configuration in the sweep table and derive its PRNG keys). The points are the
product of the grid in the order of the method's grid keys, the last key fastest (LLLA's
precisions as listed; P&C's block, then sigma, then bootstrap_frac), which is the order of the
method's sweep (:func:`pnc.methods.entry.grid_points`, the expansion the MuJoCo study uses too); a
method that selects but has no grid key (the Deep Ensemble) has one configuration, the empty
point; a method that selects nothing has none. An id is the point's readable name
(:func:`pnc.methods.entry.point_id`: ``block=3+0,sigma=25,bootstrap_frac=0.05``, ``default`` for
the empty point): a key into the table, nothing to parse.

The file is the kind of table the MuJoCo study writes (:func:`pnc.methods.entry.write_config_table`):
each record holds its whole configuration, the method's settings with every default filled in
and the point, from which :meth:`Sweep.read` gives the section (:attr:`Sweep.section`) back: the
job's config comes from there, so the DAG and every job read one table.
"""

from __future__ import annotations

import dataclasses
import json
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pnc.methods.entry import grid_points, point_id, read_config_table, write_config_table
from pnc.methods.ood.posthoc import MethodSection

#: Where the workflow writes a method's sweep (relative to the working directory).
SWEEP_PATH = "results/cifar/sweeps/{method}.json"


@dataclasses.dataclass(frozen=True)
class Sweep:
    """A method's configurations, keyed by id.

    Attributes:
        method: the method id.
        section: its config section, every default filled in (typed values; tuples as lists).
        configurations: configuration id -> its point (grid key -> value), in the sweep's order.
    """

    method: str
    section: Mapping[str, Any]
    configurations: Mapping[str, Mapping[str, Any]]

    def __post_init__(self) -> None:
        object.__setattr__(self, "section", types.MappingProxyType(dict(self.section)))
        points = {i: types.MappingProxyType(dict(p)) for i, p in self.configurations.items()}
        object.__setattr__(self, "configurations", types.MappingProxyType(points))

    # ------------------------------------------------------------------------------- reading

    def config(self) -> MethodSection:
        """The method's typed section (:meth:`pnc.methods.ood.posthoc.PosthocMethod.make_config`)."""
        from pnc.methods import ood as registry

        return registry.get(self.method).make_config(self.section)

    @property
    def ids(self) -> tuple[str, ...]:
        """The configuration ids, in the sweep's order."""
        return tuple(self.configurations)

    def at(self, config_id: str) -> MethodSection:
        """The typed section narrowed to configuration ``config_id``: every grid key holds that
        configuration's one value, so the method builds that configuration only.

        Raises:
            ValueError: ``config_id`` is not in the table (the message lists the ids).
        """
        if config_id not in self.configurations:
            raise ValueError(
                f"{self.method}: no configuration {config_id!r}; known: {', '.join(self.ids)}"
            )
        point = self.configurations[config_id]
        return dataclasses.replace(
            self.config(), grid=types.MappingProxyType({k: [v] for k, v in point.items()})
        )

    def id_of(self, name: Mapping[str, Any]) -> str:
        """The id of the configuration a sweep record names (its ``config``: the point's grid
        keys and values, plus any fixed setting the method shows beside them).

        Raises:
            ValueError: no configuration of the table has those values.
        """
        index = {_point_key(p): i for i, p in self.configurations.items()}
        keys = list(next(iter(self.configurations.values()), {}))
        try:
            key = _point_key({k: name[k] for k in keys})
        except (KeyError, TypeError):
            key = None
        if key not in index:
            raise ValueError(
                f"{self.method}: the configuration {json.dumps(name, default=str)} is not in its"
                f" sweep ({len(self.configurations)} configurations)"
            )
        return index[key]

    # ------------------------------------------------------------------------------- the file

    def to_table(self) -> dict[str, dict[str, Any]]:
        """The method's configuration table (:func:`pnc.methods.entry.write_config_table`, the
        kind the MuJoCo study writes): ``{config id: {"config": settings and point}}``, each
        record the whole configuration; a method that selects nothing has one record,
        ``default``, its settings."""
        settings = {k: v for k, v in self.section.items() if k != "grid"}
        points = self.configurations or {"default": {}}
        return {i: {"config": {**settings, **p}} for i, p in points.items()}

    @classmethod
    def from_table(cls, method: str, table: Mapping[str, Mapping[str, Any]]) -> Sweep:
        """The sweep of ``method`` from its :meth:`to_table` (its section and points read back
        from the records: the grid's values in the order they first appear)."""
        from pnc.methods import ood as registry

        spec = registry.get(method)
        keys = spec.config_cls.grid_keys
        first = next(iter(table.values()), {"config": {}})["config"]
        section = {k: v for k, v in first.items() if k not in keys}
        points = {i: {k: r["config"][k] for k in keys} for i, r in table.items()}
        if keys:
            grid: dict[str, list] = {k: [] for k in keys}
            for point in points.values():
                for k, v in point.items():
                    if v not in grid[k]:
                        grid[k].append(v)
            section["grid"] = grid
        return cls(method, section, points if spec.selects else {})

    @classmethod
    def read(cls, path: str | Path) -> Sweep:
        """The sweep the workflow wrote to ``path`` (``<method>.json``)."""
        return cls.from_table(Path(path).stem, read_config_table(path))

    def write(self, path: str | Path) -> bool:
        """Write the table to ``path`` unless it holds it already (an unchanged file keeps its
        modification time, so no job reruns). Returns whether it wrote."""
        return write_config_table(path, self.to_table())


def evaluated_methods(config: Mapping) -> list[str]:
    """The methods a study config runs: ``evaluate`` in its order, or every method configured
    under ``methods`` in the tables' order (the registry's; a merged config's keys come in the
    order of the overlay, which must not reorder the tables), then any other configured id."""
    from pnc.methods.ood import METHOD_IDS

    if config.get("evaluate"):
        return list(config["evaluate"])
    configured = config["methods"]
    return [m for m in METHOD_IDS if m in configured] + [
        m for m in configured if m not in METHOD_IDS
    ]


def _point_key(point: Mapping[str, Any]) -> str:
    return json.dumps(dict(point), sort_keys=True)


def _plain(value: Any) -> Any:
    """A typed setting as JSON holds it (tuples as lists)."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def expand_sweep(method: str, entry: Mapping | None) -> Sweep:
    """Method ``method``'s configurations from its entry in the config (``{"fixed": {...},
    "grid": {...}}``): the one expansion of a CIFAR sweep (see the module docstring for the order
    and the ids).

    Raises:
        ValueError: an unknown method, an invalid entry (:func:`pnc.methods.ood.method_config`),
            an empty grid list, or two points with one id.
    """
    from pnc.methods import ood as registry

    spec = registry.get(method)
    config = registry.method_config(method, entry)
    settings = {
        f.name: _plain(getattr(config, f.name))
        for f in dataclasses.fields(config)
        if f.name != "grid"
    }
    typed = {**settings, **({"grid": _plain(dict(config.grid))} if config.grid_keys else {})}
    if not spec.selects:
        return Sweep(method, typed, {})
    points = grid_points({key: config.values(key) for key in config.grid_keys})
    ids = [point_id(p) for p in points]
    if len(set(ids)) != len(ids):
        raise ValueError(f"methods.{method}: duplicate configurations {ids}")
    return Sweep(method, typed, {i: _plain(p) for i, p in zip(ids, points, strict=True)})
