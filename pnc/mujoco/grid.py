"""Hyperparameter grids of the study: YAML grid -> method configurations and their training runs.

A method's entry in the workflow config (``methods:`` in ``config.yaml``) is

.. code-block:: yaml

    pnc:
      fixed: {n_members: 50, rank: 20}          # applied to every configuration
      grid: {sigma: [8, 16, 32], ridge: [0.0001, 0.01]}   # cross product, in key order

Each grid point becomes one configuration of the method (``method.make_config(fixed | point)``),
named by ``method.config_id(config)``. Configurations whose differing hyperparameters are post-hoc
share one training run (``method.training_spec(config).run_id``): all P&C, SWAG, Laplace and Subspace
configurations use the ``base`` run of an (env, seed); each MC-Dropout rate has its own run
(paper, Appendix C).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from typing import Any

from pnc.methods.runs import TrainingSpec


@dataclasses.dataclass(frozen=True)
class GridPoint:
    """One configuration of one method.

    Attributes:
        method: method id.
        config_id: the method's readable id of ``config``.
        config: the method's config dataclass instance.
        spec: the training run the configuration needs.
    """

    method: str
    config_id: str
    config: Any
    spec: TrainingSpec

    @property
    def run_id(self) -> str:
        return self.spec.run_id


def _get_method(method_id: str) -> Any:
    from pnc import methods  # deferred: importing the registry pulls every method in

    return methods.get(method_id)


def expand(method_id: str, entry: Mapping[str, Any] | None) -> list[GridPoint]:
    """All configurations of one method's grid entry, in grid order (last key varies fastest).

    Args:
        method_id: a registered method id (``pnc.methods.METHOD_IDS``).
        entry: ``{"fixed": {...}, "grid": {key: [values, ...]}}``; both parts optional.

    Returns:
        One :class:`GridPoint` per grid point (a single one when the grid is empty).

    Raises:
        ValueError: on an unknown entry key, an empty value list, a key both fixed and swept, an
            unknown hyperparameter (named, with the valid ones) or duplicate configurations.
    """
    entry = dict(entry or {})
    unknown = sorted(set(entry) - {"fixed", "grid"})
    if unknown:
        raise ValueError(f"methods.{method_id}: unknown key(s) {unknown}; valid: fixed, grid")
    fixed = dict(entry.get("fixed") or {})
    grid = dict(entry.get("grid") or {})
    for key, values in grid.items():
        if not isinstance(values, list | tuple) or len(values) == 0:
            raise ValueError(f"methods.{method_id}.grid.{key} must be a non-empty list")
    both = sorted(set(fixed) & set(grid))
    if both:
        raise ValueError(f"methods.{method_id}: {both} both fixed and swept")
    method = _get_method(method_id)
    points = []
    for values in itertools.product(*grid.values()):
        overrides = {**fixed, **dict(zip(grid, values, strict=True))}
        try:
            config = method.make_config(overrides)
        except (TypeError, ValueError) as err:
            raise ValueError(f"methods.{method_id}: {err}") from err
        points.append(
            GridPoint(method_id, method.config_id(config), config, method.training_spec(config))
        )
    ids = [p.config_id for p in points]
    if len(set(ids)) != len(ids):
        raise ValueError(f"methods.{method_id}: duplicate configurations {ids}")
    return points


def expand_all(methods_entry: Mapping[str, Any]) -> dict[str, list[GridPoint]]:
    """:func:`expand` for every method of the workflow config's ``methods`` mapping."""
    return {m: expand(m, e) for m, e in methods_entry.items()}


def points_for_run(method_id: str, entry: Mapping[str, Any] | None, run_id: str) -> list[GridPoint]:
    """The configurations of ``method_id`` that use training run ``run_id``.

    Raises:
        ValueError: if none does (the message lists the runs the grid needs).
    """
    points = expand(method_id, entry)
    chosen = [p for p in points if p.run_id == run_id]
    if not chosen:
        runs = sorted({p.run_id for p in points})
        raise ValueError(f"no {method_id} configuration uses run {run_id!r}; its runs: {runs}")
    return chosen


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
