"""Training runs: what identifies one (:class:`TrainingSpec`) and what it leaves behind
(:class:`TrainingRun`), with its files.

Every method trains a run of some ``kind``: the shared ``base`` run
(:mod:`pnc.methods.regression.base_run`), which every P&C configuration, SWAG, Laplace and their
post-hoc variants reuse, or a run of its own (``deep_ensemble``, ``mc_dropout``, ``subspace``). A
run is written as ``run.msgpack`` (the parameters, the standardisers and the method's extra arrays;
never pickled) and ``run.json`` (spec, model config, metadata and the SHA-256 of ``run.msgpack``,
checked when the run is read back).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pnc.core.mlp import MLPConfig
from pnc.core.training import TrainedModel, model_from_state, model_state
from pnc.runtime.io import ArtifactError, load_checked_run, rebuild_hint, save_checked_run


@dataclasses.dataclass(frozen=True)
class TrainingSpec:
    """Identifies one training run.

    Attributes:
        kind: ``"base"`` (standard training, also collects SWAG statistics), ``"deep_ensemble"``
            or ``"mc_dropout"``.
        options: sorted ``(name, value)`` pairs that change the training (e.g. the dropout rate,
            the number of ensemble members).
    """

    kind: str
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def run_id(self) -> str:
        """File-system-safe id, e.g. ``base``, ``deep_ensemble-n_members5``, ``mc_dropout-rate0.05``."""
        return "-".join([self.kind] + [f"{k}{v}" for k, v in self.options])

    @property
    def key_id(self) -> str:
        """The name the run's training key derives from: :attr:`run_id`, except that every
        ``base`` run uses ``"base"``: P&C's own base run (a ``steps`` option, e.g.
        ``base-steps2000``) draws the shared base run's initialisation and minibatches and
        differs from it only in its step cap."""
        return "base" if self.kind == "base" else self.run_id


@dataclasses.dataclass(frozen=True)
class TrainingRun:
    """The result of one training run.

    Attributes:
        spec: what was trained.
        model: the trained network (for ``deep_ensemble`` the first member; for ``mc_dropout`` the
            dropout network) with the standardisers every other array here is expressed in.
        extras: additional arrays by name (e.g. SWAG moments, stacked ensemble parameters).
        meta: JSON-serialisable metadata (timings, losses summary, configs).
    """

    spec: TrainingSpec
    model: TrainedModel
    extras: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    meta: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def save(self, directory: str | Path) -> None:
        """Write ``run.msgpack`` (params, standardisers, extras) and ``run.json``; never pickles.

        ``run.json`` records the SHA-256 of ``run.msgpack`` (``msgpack_sha256``), which
        :meth:`load` verifies.
        """
        save_checked_run(
            directory,
            {**model_state(self.model), "extras": dict(self.extras)},
            {
                "spec": {"kind": self.spec.kind, "options": [list(o) for o in self.spec.options]},
                "model_config": self.model.config.to_dict(),
                "meta": dict(self.meta),
            },
        )

    @classmethod
    def load(cls, directory: str | Path) -> TrainingRun:
        """Read a run written by :meth:`save`.

        Raises:
            FileNotFoundError: ``run.json`` or ``run.msgpack`` is missing (named).
            pnc.runtime.io.ArtifactError: a file is truncated or corrupt, or ``run.msgpack`` does not
                match the SHA-256 recorded in ``run.json`` (named, with the command that rebuilds
                the run). Runs saved without a recorded SHA-256 are read unverified.
        """
        directory = Path(directory)
        tree, info = load_checked_run(directory)
        info_path = directory / "run.json"
        try:
            model = model_from_state(MLPConfig.from_dict(info["model_config"]), tree)
            options = tuple(tuple(o) for o in info["spec"]["options"])
            spec = TrainingSpec(info["spec"]["kind"], options)
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise ArtifactError(
                f"{directory}: run.json and run.msgpack do not form a training run "
                f"({type(err).__name__}: {err}); {rebuild_hint(info_path)}"
            ) from err
        return cls(spec, model, tree.get("extras", {}) or {}, info.get("meta", {}))
