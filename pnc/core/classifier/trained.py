"""The CIFAR study's training runs: their ids, the recipe of each, and the trained network's files.

Runs (:class:`RunSpec`, named by its :attr:`~RunSpec.run_id`, read back by :meth:`RunSpec.parse`):
``base`` (also collects the SWAG moments), ``member<k>`` (a further Deep Ensemble member; the base
run is member 0) and ``dropout<rate>`` (an MC Dropout run). A finished
run is a :class:`TrainedNetwork`, stored as ``run.msgpack`` (its variables and SWAG moments, flax
msgpack) and ``run.json`` (its record), which holds the SHA-256 of ``run.msgpack``
(``msgpack_sha256``): :meth:`TrainedNetwork.load` refuses a ``run.msgpack`` that does not match it,
naming the file and the command that rebuilds the run. A run written before the hash was recorded
is read unchecked.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pnc.core.classifier.recipe import Recipe
from pnc.runtime.io import (
    RUN_SHA256_KEY,
    ArtifactError,
    load_checked_run,
    rebuild_hint,
    save_checked_run,
)

log = logging.getLogger(__name__)

#: The kinds of training run: the base run, a further Deep Ensemble member, an MC Dropout run.
RUN_KINDS: tuple[str, ...] = ("base", "member", "dropout")


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """What identifies one of the study's training runs; :attr:`run_id` names it and
    :meth:`parse` reads a name back (its exact inverse).

    Attributes:
        kind: one of :data:`RUN_KINDS`: ``base`` (also collects the SWAG moments), ``member`` (a
            further Deep Ensemble member; the base run is member 0) or ``dropout`` (MC Dropout).
        member: the member's index ``k >= 1`` (``member`` runs only).
        dropout_rate: the dropout rate, in ``(0, 1)`` (``dropout`` runs only).

    Raises:
        ValueError: an unknown kind, or a setting missing, out of range or given to a kind that
            has none.
    """

    kind: str
    member: int | None = None
    dropout_rate: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in RUN_KINDS:
            raise ValueError(f"unknown run kind {self.kind!r}; valid: {', '.join(RUN_KINDS)}")
        if (self.member is not None) != (self.kind == "member"):
            raise ValueError(
                f"a {self.kind} run has {'a' if self.kind == 'member' else 'no'} member index"
            )
        if (self.dropout_rate is not None) != (self.kind == "dropout"):
            raise ValueError(
                f"a {self.kind} run has {'a' if self.kind == 'dropout' else 'no'} dropout rate"
            )
        if self.member is not None and (isinstance(self.member, bool) or self.member < 1):
            raise ValueError(f"a further member's index must be >= 1, got {self.member!r}")
        if self.dropout_rate is not None and not 0.0 < self.dropout_rate < 1.0:
            raise ValueError(f"dropout rate must be in (0, 1), got {self.dropout_rate!r}")

    @property
    def run_id(self) -> str:
        """``base``, ``member<k>`` or ``dropout<rate>`` (the rate as ``:g`` writes it)."""
        if self.kind == "member":
            return f"member{self.member}"
        if self.kind == "dropout":
            return f"dropout{self.dropout_rate:g}"
        return self.kind

    @classmethod
    def parse(cls, run_id: str) -> RunSpec:
        """The run named ``run_id`` (``parse(spec.run_id).run_id == spec.run_id``).

        Raises:
            ValueError: ``run_id`` names no run, or not in the form :attr:`run_id` writes.
        """
        spec = None
        try:
            if run_id == "base":
                spec = cls("base")
            elif run_id.startswith("member") and run_id[len("member") :].isdigit():
                spec = cls("member", member=int(run_id[len("member") :]))
            elif run_id.startswith("dropout"):
                spec = cls("dropout", dropout_rate=float(run_id[len("dropout") :]))
        except (AttributeError, ValueError):
            spec = None
        if spec is None or spec.run_id != run_id:
            raise ValueError(f"unknown run id {run_id!r} (base, member<k>, dropout<rate>)")
        return spec


def dropout_run(rate) -> str:
    """The MC Dropout run of ``rate``, e.g. ``dropout0.2``."""
    return RunSpec("dropout", dropout_rate=float(rate)).run_id


def ensemble_runs(n_models: int) -> list[str]:
    """The Deep Ensemble's runs: the base run and ``n_models - 1`` further members."""
    if n_models < 1:
        raise ValueError(f"deep_ensemble.n_models must be >= 1, got {n_models}")
    members = [RunSpec("member", member=k) for k in range(1, n_models)]
    return [spec.run_id for spec in (RunSpec("base"), *members)]


def recipe_for(run_id: str, train_section: Mapping, swag_starts: Sequence[int] = ()) -> Recipe:
    """The recipe of run ``run_id``: the config's, plus dropout or the SWAG collection.

    Raises:
        ValueError: ``run_id`` names no run (:meth:`RunSpec.parse`).
    """
    spec = RunSpec.parse(run_id)
    options = dict(train_section)
    if spec.kind == "dropout":
        options["dropout_rate"] = spec.dropout_rate
    if spec.kind == "base":
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
        return cls(tree["variables"], tree.get("swag") or {}, info)

    @property
    def checked(self) -> bool:
        """Whether its ``run.json`` records the SHA-256 it was checked against (older runs: not)."""
        return RUN_SHA256_KEY in self.meta
