"""Perturb-and-Correct behind the method interface: ``pnc`` and its ablation ``pnc_nocorr``.

Both use the shared ``base`` run and the standardised *training inputs* as the calibration set
``D_cal`` (paper, Section 3), and both take :class:`pnc.core.perturb_correct.PnCConfig` as their config.
``pnc`` sweeps ``sigma x bootstrap_frac x ridge`` (Appendix C: {8, 16, 32} x {0.05, 0.1, 0.2, 0.3}
x {1e-4, 1e-2}, ``K = 20``, ``M = 50``) and pins ``correct=True``. ``pnc_nocorr`` applies the same
random low-rank perturbations without the least-squares correction and sweeps ``sigma`` only: it
pins ``correct=False`` and ``bootstrap_frac=None`` and accepts ``n_members``, ``rank``, ``sigma``,
``layers`` and ``perturbation_norm`` (the correction's fields stay at their defaults, unused without
correction); in the study it shares P&C's keys (``key_id``), so both apply identical perturbations.
Members are built by :func:`pnc.core.perturb_correct.build_members` and evaluated by
:func:`pnc.core.perturb_correct.predict_members`, so ``S = M``.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import jax

from pnc.core.mlp import Params
from pnc.core.perturb_correct import (
    PnCConfig,
    build_members,
    build_members_ridge_path,
    predict_members,
)
from pnc.core.predictive import Predictive
from pnc.core.training import TrainedModel
from pnc.methods.labels import SHARED_LABELS
from pnc.methods.regression.base_run import OnBaseRun
from pnc.methods.regression.contract import MethodBase
from pnc.methods.regression.runs import TrainingRun
from pnc.methods.regression.sampling import check_inputs

Array = jax.Array


@functools.partial(
    jax.tree_util.register_dataclass, data_fields=("members", "model"), meta_fields=()
)
@dataclasses.dataclass(frozen=True)
class PnCPosterior:
    """The P&C ensemble (a pytree of its arrays).

    Attributes:
        members: parameter pytree of the ``M`` members, a leading ``[M]`` axis on every leaf.
        model: the base model (architecture and standardisers).
    """

    members: Params
    model: TrainedModel


class PerturbAndCorrect(OnBaseRun, MethodBase):
    """P&C (Section 3) on the shared base run."""

    id: ClassVar[str] = "pnc"
    label: ClassVar[str] = SHARED_LABELS["pnc"]
    short_label: ClassVar[str] = label
    table_order: ClassVar[int] = 60
    style: ClassVar[Mapping[str, object]] = {
        "color": "#D55E00",
        "marker": "o",
        "linestyle": "-",
        "hatch": "",
    }
    hparam_abbreviations: ClassVar[Mapping[str, str]] = {
        "n_members": "n",
        "ridge": "lreg",
        "bootstrap_frac": "bf",
        "sigma": "ps",
        "rank": "K",
    }
    hparam_legend: ClassVar[Mapping[str, str]] = {
        "lreg": "P&C ridge (Tikhonov) regulariser",
        "bf": "P&C per-member bootstrap fraction",
        "ps": "P&C perturbation size",
    }
    config_cls: ClassVar[type] = PnCConfig
    training_fields: ClassVar[tuple[str, ...]] = ()
    posthoc_fields: ClassVar[tuple[str, ...]] = (
        "n_members",
        "rank",
        "sigma",
        "bootstrap_frac",
        "ridge",
        "layers",
        "perturbation_norm",
        "ridge_center",
        "min_subset",
        "calibration_size",
        "subset_per_layer",
    )
    id_fields: ClassVar[tuple[str, ...]] = ("sigma", "bootstrap_frac", "ridge")
    fixed: ClassVar[Mapping[str, Any]] = types.MappingProxyType({"correct": True})
    entry_options: ClassVar[tuple[str, ...]] = ("base_steps", "calibration_pool")

    def study_problems(self, config: PnCConfig, study) -> tuple[list[str], list[str]]:
        """``layers`` against ``model.hidden``; ``rank`` against the kernel ``d_in x d_out`` of
        every perturbed layer (layer 0's ``d_in`` is each environment's observation + action,
        layer ``l``'s is ``model.hidden[l-1]``); ``calibration_size`` against the rows of its
        calibration pool (the train rows, or the whole ID pool for ``calibration_pool: id_pool``,
        which the study check passes in ``max_train_rows``)."""
        hidden = list(study.hidden)
        try:
            layers = config.perturbed_layers(len(hidden))
        except ValueError as err:
            return [f"methods.{self.id}.layers: {err} (model.hidden = {hidden})"], []
        errors = []
        for layer in layers:
            for env in study.envs:
                if layer == 0:
                    obs, act = study.input_dims[env]
                    d_in, source = obs + act, f"{env}: obs {obs} + action {act}"
                else:
                    d_in, source = hidden[layer - 1], f"model.hidden[{layer - 1}]"
                d_out = hidden[layer]
                if config.rank > d_in * d_out:
                    errors.append(
                        f"methods.{self.id}.rank = {config.rank} is larger than the kernel of "
                        f"perturbed hidden layer {layer}: d_in {d_in} ({source}) x d_out {d_out} "
                        f"(model.hidden[{layer}] = {d_out}) = {d_in * d_out}"
                    )
        size = config.calibration_size
        if size is not None and size > study.max_train_rows:
            errors.append(
                f"methods.{self.id}.calibration_size = {size} is larger than the "
                f"{study.max_train_rows} rows its calibration set is drawn from "
                f"({study.pool_text})"
            )
        return errors, []

    def build(self, run: TrainingRun, config: PnCConfig, x, y, *, key) -> PnCPosterior:
        """Build the members with standardised training inputs ``x [N, in]`` as ``D_cal``."""
        self._check_config(config)
        x = check_inputs(x, run.model.in_dim)
        members = build_members(run.model.params, run.model.config, x, config, key=key)
        return PnCPosterior(members, run.model)

    def build_groups(self, configs: Sequence[PnCConfig]) -> list[list[int]]:
        """Configurations that differ only in ``ridge`` form one group (first appearance order)."""
        groups: dict[PnCConfig, list[int]] = {}
        for i, config in enumerate(configs):
            self._check_config(config)
            groups.setdefault(dataclasses.replace(config, ridge=0.0), []).append(i)
        return list(groups.values())

    def build_many(
        self, run: TrainingRun, configs: Sequence[PnCConfig], x, y, *, key
    ) -> list[PnCPosterior]:
        """Each group of :meth:`build_groups` is built in one
        :func:`pnc.core.perturb_correct.build_members_ridge_path` call, which shares the perturbations,
        subsets, activations and the first corrected layer's Gram across the ridge values; the
        members equal separate :meth:`build` calls up to float32 rounding."""
        out: list[PnCPosterior | None] = [None] * len(configs)
        x = check_inputs(x, run.model.in_dim)
        for group in self.build_groups(configs):
            if len(group) == 1:
                out[group[0]] = self.build(run, configs[group[0]], x, y, key=key)
                continue
            ridges = [configs[i].ridge for i in group]
            path = build_members_ridge_path(
                run.model.params, run.model.config, x, configs[group[0]], ridges, key=key
            )
            for j, i in enumerate(group):
                out[i] = PnCPosterior(jax.tree.map(lambda a, j=j: a[j], path), run.model)
        return out

    def parameter_samples(self, posterior: PnCPosterior, key: Array) -> tuple[Any, Any]:
        """The members (``[M]``-leading) and the trained network; ``key`` is unused."""
        return posterior.members, posterior.model.params

    def predict(self, posterior: PnCPosterior, x: Array, *, key: Array) -> Predictive:
        """One Gaussian per member, ``[M, N, D]`` (deterministic; ``key`` is unused)."""
        x = check_inputs(x, posterior.model.in_dim)
        return predict_members(posterior.members, x, posterior.model.config)


class PerturbNoCorrection(PerturbAndCorrect):
    """The "P&C without correction" ablation."""

    id: ClassVar[str] = "pnc_nocorr"
    label: ClassVar[str] = "P&C w/o Corr"
    short_label: ClassVar[str] = "P&C w/o Corr"
    ranked: ClassVar[bool] = False
    table_order: ClassVar[int] = 70
    style: ClassVar[Mapping[str, object]] = {
        "color": "#6E6E6E",
        "marker": "X",
        "linestyle": (0, (1, 1)),
        "hatch": "oo",
    }
    posthoc_fields: ClassVar[tuple[str, ...]] = (
        "n_members",
        "rank",
        "sigma",
        "layers",
        "perturbation_norm",
    )
    id_fields: ClassVar[tuple[str, ...]] = ("sigma",)
    fixed: ClassVar[Mapping[str, Any]] = types.MappingProxyType(
        {"correct": False, "bootstrap_frac": None}
    )
    shares_keys_with: ClassVar[str | None] = "pnc"
    entry_options: ClassVar[tuple[str, ...]] = ("base_steps",)  # no correction, no D_cal
