"""A trained classifier's files: a finished training run of the CIFAR study (its ids and recipes:
:mod:`pnc.methods.ood.training_runs`) is a :class:`TrainedNetwork`, stored as ``run.msgpack`` (its variables and SWAG moments, flax
msgpack) and ``run.json`` (its record), which holds the SHA-256 of ``run.msgpack``
(``msgpack_sha256``): :meth:`TrainedNetwork.load` refuses a ``run.msgpack`` that does not match it,
naming the file and the command that rebuilds the run. A run written before the hash was recorded
is read unchecked.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pnc.core.classifier.recipe import SWAG_MOMENTS
from pnc.runtime.io import (
    RUN_SHA256_KEY,
    ArtifactError,
    load_checked_run,
    rebuild_hint,
    save_checked_run,
)

log = logging.getLogger(__name__)


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
            directory, {"variables": self.variables, SWAG_MOMENTS: self.swag}, dict(self.meta)
        )

    @classmethod
    def load(cls, path: str | Path) -> TrainedNetwork:
        """Read the run in directory ``path`` (or of its ``run.msgpack``).

        Raises:
            FileNotFoundError: ``run.json`` or ``run.msgpack`` is missing (named).
            pnc.runtime.io.ArtifactError: a file is truncated or corrupt, or ``run.msgpack`` does not
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
        return cls(tree["variables"], tree.get(SWAG_MOMENTS) or {}, info)

    @property
    def checked(self) -> bool:
        """Whether its ``run.json`` records the SHA-256 it was checked against (older runs: not)."""
        return RUN_SHA256_KEY in self.meta
