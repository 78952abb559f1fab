"""The contract every uncertainty method implements, and the registry that looks methods up by id.

A method is used in three steps, each a pure function of its inputs and an explicit PRNG key:

1. **train** a :class:`TrainingRun` (identified by a :class:`TrainingSpec`). Several method
   configurations share one run whenever the hyperparameters that differ are post-hoc: every P&C
   configuration, the SWAG scales, the Subspace temperatures and the Laplace prior precisions all
   reuse the one ``base`` run; Deep Ensembles and each MC-Dropout rate have runs of their own.
2. **build** a posterior from the run (post-hoc construction, e.g. P&C members, the KFAC factors).
3. **predict** ``S`` Gaussian samples on standardised inputs, as a :class:`pnc.Predictive`.

All arrays handled here are in *standardised* units (inputs and targets standardised with the
training statistics stored in ``run.model``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Protocol

import jax

from pnc.io import load_pytree, read_json, save_pytree, write_json
from pnc.mlp import MLPConfig
from pnc.predictive import Predictive
from pnc.train import TrainConfig, TrainedModel, model_from_state, model_state

Array = jax.Array


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
        """Write ``run.msgpack`` (params, standardisers, extras) and ``run.json``; never pickles."""
        directory = Path(directory)
        save_pytree(
            directory / "run.msgpack", {**model_state(self.model), "extras": dict(self.extras)}
        )
        write_json(
            directory / "run.json",
            {
                "spec": {"kind": self.spec.kind, "options": [list(o) for o in self.spec.options]},
                "model_config": self.model.config.to_dict(),
                "meta": dict(self.meta),
            },
        )

    @classmethod
    def load(cls, directory: str | Path) -> TrainingRun:
        directory = Path(directory)
        info = read_json(directory / "run.json")
        tree = load_pytree(directory / "run.msgpack")
        model = model_from_state(MLPConfig.from_dict(info["model_config"]), tree)
        spec = TrainingSpec(info["spec"]["kind"], tuple(tuple(o) for o in info["spec"]["options"]))
        return cls(spec, model, tree.get("extras", {}) or {}, info.get("meta", {}))


class Method(Protocol):
    """What the registry returns for a method id.

    Attributes:
        id: the method id (``pnc``, ``pnc_nocorr``, ``deep_ensemble``, ``mc_dropout``, ``swag``,
            ``laplace``, ``subspace``).
        config_cls: frozen dataclass of the method's hyperparameters (all fields have defaults).
        training_fields: names of ``config_cls`` fields that change the training run.
        posthoc_fields: names of the fields that only change the post-hoc construction/sampling.
        id_fields: the fields swept in the paper's grid, always shown in :meth:`config_id`.
    """

    id: ClassVar[str]
    config_cls: ClassVar[type]
    training_fields: ClassVar[tuple[str, ...]]
    posthoc_fields: ClassVar[tuple[str, ...]]
    id_fields: ClassVar[tuple[str, ...]]

    def make_config(self, overrides: Mapping[str, Any] | None = None) -> Any:
        """A validated ``config_cls`` from defaults plus ``overrides`` (unknown keys raise)."""
        ...

    def config_id(self, config: Any) -> str:
        """Stable readable id of a configuration, e.g. ``sigma=16,bootstrap_frac=0.1,ridge=0.0001``."""
        ...

    def training_spec(self, config: Any) -> TrainingSpec:
        """The training run this configuration needs."""
        ...

    def train(
        self,
        spec: TrainingSpec,
        x: Array,
        y: Array,
        *,
        model_config: MLPConfig,
        train_config: TrainConfig,
        key: Array,
    ) -> TrainingRun:
        """Run the training ``spec`` on raw (unstandardised) ``x [N, in]``, ``y [N, D]``."""
        ...

    def build(self, run: TrainingRun, config: Any, x: Array, y: Array, *, key: Array) -> Any:
        """Post-hoc construction from standardised training data ``x [N, in]``, ``y [N, D]``.

        P&C uses ``x`` as its calibration set; Laplace and Subspace Inference use both.
        """
        ...

    def predict(self, posterior: Any, x: Array, *, key: Array) -> Predictive:
        """``S`` predictive samples on standardised inputs ``x [N, in]`` (means/vars ``[S, N, D]``)."""
        ...
