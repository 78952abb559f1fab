"""Perturb-and-Correct behind the method interface: ``pnc`` and its ablation ``pnc_nocorr``.

Both use the shared ``base`` run and the standardised *training inputs* as the calibration set
``D_cal`` (paper, Section 3). ``pnc`` sweeps ``sigma x bootstrap_frac x ridge`` (Appendix C: {8, 16,
32} x {0.05, 0.1, 0.2, 0.3} x {1e-4, 1e-2}, ``K = 20``, ``M = 50``); ``pnc_nocorr`` applies the same
random low-rank perturbations without the least-squares correction and sweeps ``sigma`` only.
Members are built by :func:`pnc.perturb_correct.build_members` and evaluated by
:func:`pnc.perturb_correct.predict_members`, so ``S = M``.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax

from pnc.methods.base import TrainingRun, TrainingSpec
from pnc.methods.common import MethodBase, check_inputs
from pnc.methods.swag import base_spec, train_base
from pnc.mlp import Params
from pnc.perturb_correct import PnCConfig, build_members, predict_members
from pnc.predictive import Predictive
from pnc.train import TrainedModel

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class PnCMethodConfig:
    """P&C with correction; fields as in :class:`pnc.perturb_correct.PnCConfig`."""

    n_members: int = 50
    rank: int = 20
    sigma: float = 16.0
    bootstrap_frac: float | None = 0.1
    ridge: float = 1e-4
    layers: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        # validate with PnCConfig and keep its normalised layers (sorted tuple)
        object.__setattr__(self, "layers", self.to_pnc().layers)

    def to_pnc(self) -> PnCConfig:
        return PnCConfig(**dataclasses.asdict(self), correct=True)


@dataclasses.dataclass(frozen=True)
class PnCNoCorrConfig:
    """P&C without correction (the same perturbations, no refit)."""

    n_members: int = 50
    rank: int = 20
    sigma: float = 16.0
    layers: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        # validate with PnCConfig and keep its normalised layers (sorted tuple)
        object.__setattr__(self, "layers", self.to_pnc().layers)

    def to_pnc(self) -> PnCConfig:
        return PnCConfig(**dataclasses.asdict(self), bootstrap_frac=None, correct=False)


@dataclasses.dataclass(frozen=True)
class PnCPosterior:
    """The ``M`` members (params pytree with a leading ``[M]`` axis) and the base model."""

    members: Params
    model: TrainedModel


class PerturbAndCorrect(MethodBase):
    """P&C (Section 3) on the shared base run."""

    id: ClassVar[str] = "pnc"
    config_cls: ClassVar[type] = PnCMethodConfig
    training_fields: ClassVar[tuple[str, ...]] = ()
    posthoc_fields: ClassVar[tuple[str, ...]] = (
        "n_members",
        "rank",
        "sigma",
        "bootstrap_frac",
        "ridge",
        "layers",
    )
    id_fields: ClassVar[tuple[str, ...]] = ("sigma", "bootstrap_frac", "ridge")

    def training_spec(self, config) -> TrainingSpec:
        self._check_config(config)
        return base_spec()

    def train(self, spec, x, y, *, model_config, train_config, key) -> TrainingRun:
        self._check_kind(spec, "base")
        return train_base(spec, x, y, model_config=model_config, train_config=train_config, key=key)

    def build(self, run: TrainingRun, config, x, y, *, key) -> PnCPosterior:
        """Build the members with standardised training inputs ``x [N, in]`` as ``D_cal``."""
        self._check_config(config)
        x = check_inputs(x, run.model.in_dim)
        members = build_members(run.model.params, run.model.config, x, config.to_pnc(), key=key)
        return PnCPosterior(members, run.model)

    def predict(self, posterior: PnCPosterior, x: Array, *, key: Array) -> Predictive:
        """One Gaussian per member, ``[M, N, D]`` (deterministic; ``key`` is unused)."""
        x = check_inputs(x, posterior.model.in_dim)
        return predict_members(posterior.members, x, posterior.model.config)


class PerturbNoCorrection(PerturbAndCorrect):
    """The "P&C without correction" ablation."""

    id: ClassVar[str] = "pnc_nocorr"
    config_cls: ClassVar[type] = PnCNoCorrConfig
    posthoc_fields: ClassVar[tuple[str, ...]] = ("n_members", "rank", "sigma", "layers")
    id_fields: ClassVar[tuple[str, ...]] = ("sigma",)
