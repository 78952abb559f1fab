"""The CIFAR study's training runs: their ids, the recipe of each, and the trained network's files.

Run ids (:data:`RUN_ID`): ``base`` (also collects the SWAG moments), ``member<k>`` (a further Deep
Ensemble member; the base run is member 0) and ``dropout<rate>`` (an MC Dropout run). A finished
run is a :class:`TrainedNetwork`, stored as ``run.msgpack`` (its variables and SWAG moments, flax
msgpack) and ``run.json`` (its record), which holds the SHA-256 of ``run.msgpack``
(``msgpack_sha256``): :meth:`TrainedNetwork.load` refuses a ``run.msgpack`` that does not match it,
naming the file and the command that rebuilds the run. A run written before the hash was recorded
is read unchecked.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pnc.cifar.recipe import Recipe
from pnc.io import RUN_SHA256_KEY, ArtifactError, load_checked_run, rebuild_hint, save_checked_run

log = logging.getLogger(__name__)

RUN_ID = re.compile(r"^(base|member[1-9]\d*|dropout(0(\.\d+)?|1))$")
"""The run ids: ``base``, ``member<k>`` (``k >= 1``), ``dropout<rate>``."""


def dropout_run(rate) -> str:
    """The MC Dropout run of ``rate``, e.g. ``dropout0.2``."""
    return f"dropout{float(rate):g}"


def ensemble_runs(n_models: int) -> list[str]:
    """The Deep Ensemble's runs: the base run and ``n_models - 1`` further members."""
    if n_models < 1:
        raise ValueError(f"deep_ensemble.n_models must be >= 1, got {n_models}")
    return ["base"] + [f"member{k}" for k in range(1, n_models)]


def recipe_for(run_id: str, train_section: Mapping, swag_starts: Sequence[int] = ()) -> Recipe:
    """The recipe of run ``run_id``: the config's, plus dropout or the SWAG collection."""
    if not RUN_ID.match(run_id):
        raise ValueError(f"unknown run id {run_id!r} (base, member<k>, dropout<rate>)")
    options = dict(train_section)
    if run_id.startswith("dropout"):
        options["dropout_rate"] = float(run_id[len("dropout") :])
    if run_id == "base":
        options["swag_starts"] = tuple(swag_starts)
    return Recipe(**options)


@dataclasses.dataclass(frozen=True)
class TrainedNetwork:
    """A finished training run.

    Attributes:
        variables: the network's ``{"params", "batch_stats"}``.
        swag: the SWAG moments the base run collected, start epoch (a string) -> ``{"n",
            "mean", "sq_mean", "dev"}`` (empty for the other runs).
        meta: the run's record (``run.json``: seed, run id, recipe, model, history, ...).
    """

    variables: Mapping[str, Any]
    swag: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    meta: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def save(self, directory: str | Path) -> None:
        """Write ``run.msgpack`` (atomically) and ``run.json``: :attr:`meta` with the SHA-256 of
        ``run.msgpack`` (``msgpack_sha256``), which :meth:`load` verifies."""
        save_checked_run(
            directory, {"variables": self.variables, "swag": self.swag}, dict(self.meta)
        )

    @classmethod
    def load(cls, path: str | Path) -> TrainedNetwork:
        """Read the run in directory ``path`` (or of its ``run.msgpack``).

        Raises:
            FileNotFoundError: ``run.json`` or ``run.msgpack`` is missing (named).
            pnc.io.ArtifactError: a file is truncated or corrupt, or ``run.msgpack`` does not
                match the SHA-256 recorded in ``run.json`` (named, with the command that rebuilds
                the run). A run whose ``run.json`` records no SHA-256 is read unchecked.
        """
        path = Path(path)
        directory = path.parent if path.name == "run.msgpack" else path
        tree, info = load_checked_run(directory)
        if not isinstance(tree, dict) or "variables" not in tree:
            raise ArtifactError(
                f"{directory / 'run.msgpack'} holds no trained network (no 'variables'); "
                f"{rebuild_hint(directory / 'run.json')}"
            )
        return cls(tree["variables"], tree.get("swag") or {}, info)

    @property
    def checked(self) -> bool:
        """Whether its ``run.json`` records the SHA-256 it was checked against (older runs: not)."""
        return RUN_SHA256_KEY in self.meta
