"""The contract every uncertainty method implements: :class:`MethodBase`, the type of every
registered method, with the behaviour they share.

A method is used in three steps, each a pure function of its inputs and an explicit PRNG key:

1. **train** a :class:`~pnc.methods.regression.runs.TrainingRun` (identified by a
   :class:`~pnc.methods.regression.runs.TrainingSpec`, :mod:`pnc.methods.regression.runs`). Several
   method configurations share one run whenever the hyperparameters that differ are post-hoc: every
   P&C configuration, the SWAG scales, the Subspace temperatures and the Laplace prior precisions
   all reuse the one ``base`` run (:mod:`pnc.methods.regression.base_run`); Deep Ensembles and each
   MC-Dropout rate have runs of their own.
2. **build** a posterior from the run (post-hoc construction, e.g. P&C members, the KFAC factors).
   Posteriors are pytrees whose leaves are their arrays, so ``jax.block_until_ready(posterior)``
   waits for the construction.
3. **predict** ``S`` Gaussian samples on standardised inputs, as a :class:`pnc.Predictive`.

All arrays handled here are in *standardised* units (inputs and targets standardised with the
training statistics stored in ``run.model``).

A method's hyperparameters are a frozen dataclass; how a grid point becomes one and how it is named
is :mod:`pnc.methods.configs`. The helpers the methods share around prediction (standardisers,
input checks, chunked sampling, predictive rules) are :mod:`pnc.methods.regression.sampling`.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import jax

from pnc.core.mlp import MLPConfig
from pnc.core.predictive import Predictive
from pnc.core.training import TrainConfig
from pnc.methods.base import BaseMethod
from pnc.methods.configs import field_names, parse_config_id
from pnc.methods.regression.runs import TrainingRun, TrainingSpec

Array = jax.Array


STYLE_KEYS = ("color", "marker", "linestyle", "hatch")

#: Legend text of the abbreviations several methods share (:attr:`MethodBase.hparam_abbreviations`
#: of ``rank`` and ``n_samples``); the selected-configuration table lists them after the methods'
#: own (:attr:`MethodBase.hparam_legend`).
SHARED_HPARAM_LEGEND: Mapping[str, str] = types.MappingProxyType(
    {
        "K": "rank (P&C perturbation rank; SWAG/Subspace deviation columns)",
        "S": "predictive samples",
    }
)


class MethodBase(BaseMethod):
    """The regression family's contract on :class:`pnc.methods.base.BaseMethod` (which gives the
    strict configs and ids); subclasses set the ClassVars.

    Attributes:
        id: the method id.
        config_cls: frozen dataclass of the hyperparameters; several methods may share one.
        training_fields: accepted fields that change the training run.
        posthoc_fields: accepted fields that only change the post-hoc construction/sampling.
        id_fields: the fields swept in the paper's grid, always shown in :meth:`config_id`.
        fixed: pinned values of fields of ``config_cls`` that are not accepted; a field neither
            accepted nor in ``fixed`` is pinned to its default. :meth:`make_config` passes these
            values, and every method call checks that a config carries them.
        shares_keys_with: the id of a method whose construction and sampling keys this one uses
            in the study (:attr:`key_id`); ``None``: its own.
        entry_options: the keys its entry in the study config accepts beside ``fixed`` and
            ``grid`` (:data:`pnc.studies.mujoco.grid.ENTRY_DEFAULTS` gives their meaning and defaults).
        run_kind: the :attr:`TrainingSpec.kind` its :meth:`train` trains (``"base"`` for the
            methods built post hoc on the shared run).
        label: display name (table rows, figure legends).
        short_label: abbreviation (table column headers, figure axis ticks).
        ranked: whether the method takes part in ranks and tests (ablations do not).
        reading_of: the id of the ranked method whose run and members this unranked one reads
            with another predictive (the Deep Ensemble's mixture reading); the report ranks it in
            that method's place in its second reading of Table 1. ``None``: none.
        table_order: position in the tables' row order (ascending; the paper puts P&C last).
        style: figure style: ``color``, ``marker``, ``linestyle`` and ``hatch``.
        hparam_abbreviations: abbreviations of its hyperparameter names in the
            selected-configuration table (paper Table 3).
        hparam_legend: the table caption's text for each abbreviation the method introduces
            (``{"sws": "SWAG scale"}``), in the order the caption lists them; abbreviations
            several methods share take their text from :data:`SHARED_HPARAM_LEGEND`.

    The declarations are checked when a subclass is defined: ``training_fields`` and
    ``posthoc_fields`` are disjoint fields of ``config_cls``, ``id_fields`` are among them, and
    ``fixed`` names only fields that are not accepted; ``hparam_legend`` explains only
    abbreviations the method declares, and none of :data:`SHARED_HPARAM_LEGEND`.
    """

    id: ClassVar[str]
    config_cls: ClassVar[type]
    training_fields: ClassVar[tuple[str, ...]] = ()
    posthoc_fields: ClassVar[tuple[str, ...]] = ()
    id_fields: ClassVar[tuple[str, ...]] = ()
    fixed: ClassVar[Mapping[str, Any]] = types.MappingProxyType({})
    shares_keys_with: ClassVar[str | None] = None
    entry_options: ClassVar[tuple[str, ...]] = ()
    run_kind: ClassVar[str]
    label: ClassVar[str]
    short_label: ClassVar[str]
    ranked: ClassVar[bool] = True
    reading_of: ClassVar[str | None] = None
    table_order: ClassVar[int]
    style: ClassVar[Mapping[str, object]]
    hparam_abbreviations: ClassVar[Mapping[str, str]] = types.MappingProxyType({})
    hparam_legend: ClassVar[Mapping[str, str]] = types.MappingProxyType({})
    #: Whether the study's two-phase evaluation keeps this method's posteriors from the validation
    #: phase (:meth:`posterior_arrays`) for the test phase to restore (:meth:`restore_posterior`)
    #: rather than build them again from the same keys: set where a build costs far more than its
    #: arrays take to store (Subspace's chains). Other methods are built again, bit for bit.
    stores_posteriors: ClassVar[bool] = False
    family: ClassVar[str] = "regression"

    @classmethod
    def _declaration_problems(cls) -> list[str]:
        names = set(field_names(cls.config_cls))
        accepted = set(cls.training_fields) | set(cls.posthoc_fields)
        problems = []
        if set(cls.training_fields) & set(cls.posthoc_fields):
            problems.append("training_fields and posthoc_fields overlap")
        if not accepted <= names:
            problems.append(f"fields {sorted(accepted - names)} are not in {cls.config_cls}")
        if not set(cls.id_fields) <= accepted:
            problems.append(f"id_fields {sorted(set(cls.id_fields) - accepted)} are not accepted")
        if not set(cls.fixed) <= names - accepted:
            problems.append(
                f"fixed {sorted(set(cls.fixed))} must name fields that are not accepted"
            )
        if cls.reading_of is not None and cls.ranked:
            problems.append("a method with reading_of is not ranked (ranked = False)")
        legend = set(cls.hparam_legend)
        if not legend <= set(cls.hparam_abbreviations.values()) or legend & set(
            SHARED_HPARAM_LEGEND
        ):
            problems.append(
                f"hparam_legend {sorted(legend)} must explain its own hparam_abbreviations, "
                f"none of the shared {', '.join(SHARED_HPARAM_LEGEND)}"
            )
        missing = [
            name for name in ("run_kind", "short_label", "table_order", "style") if not hasattr(cls, name)
        ]
        if missing:
            problems.append(f"no {', '.join(missing)} declared")
        elif set(cls.style) != set(STYLE_KEYS):
            problems.append(f"style must set exactly {', '.join(STYLE_KEYS)}")
        return problems

    @property
    def key_id(self) -> str:
        """The name the study derives this method's construction and sampling keys from.

        Methods with the same ``key_id`` get the same keys for an (env, seed): ``pnc_nocorr``
        uses P&C's, so the ablation applies exactly the perturbations of P&C.
        """
        return self.shares_keys_with or self.id

    @property
    def config_keys(self) -> tuple[str, ...]:
        """The accepted fields (``training_fields`` and ``posthoc_fields``) in ``config_cls`` order."""
        accepted = set(self.training_fields) | set(self.posthoc_fields)
        return tuple(name for name in field_names(self.config_cls) if name in accepted)

    def parse_config_id(self, text: str) -> Any:
        """The configuration whose :meth:`config_id` is ``text`` (see :func:`parse_config_id`).

        Raises:
            ValueError: a malformed id, a key the method does not accept or a bad value.
        """
        return parse_config_id(text, self.config_cls, keys=self.config_keys, fixed=self.fixed)

    def study_problems(self, config: Any, study: Any) -> tuple[list[str], list[str]]:
        """This configuration checked against the study it runs in, before any job runs.

        Args:
            config: one of the method's configurations.
            study: the study's :class:`pnc.studies.mujoco.config_check.StudyContext` (``hidden``,
                ``envs``, ``input_dims``, ``train``, ``max_train_rows``, ``pool_text``).

        Returns:
            ``(errors, warnings)``, one line each, naming the keys (default: none).
        """
        return [], []

    def training_spec(self, config: Any) -> TrainingSpec:
        """The training run this configuration needs."""
        raise NotImplementedError(f"{type(self).__name__} defines no training_spec")

    def train(
        self,
        spec: TrainingSpec,
        x: Array,
        y: Array,
        *,
        model_config: MLPConfig,
        train_config: TrainConfig,
        key: Array,
        validation: tuple[Array, Array] | None = None,
    ) -> TrainingRun:
        """Run the training ``spec`` on raw (unstandardised) ``x [N, in]``, ``y [N, D]``;
        ``validation`` is raw ``(x_val, y_val)``, required when ``train_config.patience`` is set
        (early stopping)."""
        raise NotImplementedError(f"{type(self).__name__} defines no train")

    def build(self, run: TrainingRun, config: Any, x: Array, y: Array, *, key: Array) -> Any:
        """Post-hoc construction from standardised training data ``x [N, in]``, ``y [N, D]``.

        P&C uses ``x`` as its calibration set; Laplace and Subspace Inference use both. The result
        is a pytree whose leaves are its arrays (configs and sizes are static metadata).
        """
        raise NotImplementedError(f"{type(self).__name__} defines no build")

    def predict(self, posterior: Any, x: Array, *, key: Array) -> Predictive:
        """``S`` predictive samples on standardised inputs ``x [N, in]`` (means/vars ``[S, N, D]``)."""
        raise NotImplementedError(f"{type(self).__name__} defines no predict")

    def build_groups(self, configs: Sequence[Any]) -> list[list[int]]:
        """Groups of configurations built together by :meth:`build_many` (default: one each)."""
        return [[i] for i in range(len(configs))]

    def build_many(
        self, run: TrainingRun, configs: Sequence[Any], x: Array, y: Array, *, key: Array
    ) -> list[Any]:
        """The posteriors of ``configs`` built with one ``key`` (default: one :meth:`build` each)."""
        return [self.build(run, config, x, y, key=key) for config in configs]

    def posterior_arrays(self, posterior: Any) -> dict[str, Any]:
        """The arrays that, with the run and the training data, give ``posterior`` back
        (:meth:`restore_posterior`), for methods that set :attr:`stores_posteriors`.

        Raises:
            ValueError: the method does not store its posteriors.
        """
        raise ValueError(f"method {self.id!r} does not store its posteriors")

    def restore_posterior(self, run: TrainingRun, config: Any, arrays: Mapping[str, Any]) -> Any:
        """The posterior of ``config`` on ``run`` whose :meth:`posterior_arrays` were ``arrays``:
        bit for bit the one :meth:`build` made, without its costly part.

        Raises:
            ValueError: the method does not store its posteriors, or ``arrays`` do not fit.
        """
        raise ValueError(f"method {self.id!r} does not store its posteriors")

    def parameter_samples(self, posterior: Any, key: Array) -> tuple[Any, Any]:
        """The weight samples :meth:`predict` evaluates (same key use), a parameter pytree with a
        leading ``[S]`` axis, and the reference network (used by the mechanism stage). Methods
        whose samples are not weights of the MLP do not override it.

        Raises:
            ValueError: the method has no parameter samples.
        """
        raise ValueError(f"method {self.id!r} has no parameter samples")

    @property
    def has_parameter_samples(self) -> bool:
        """Whether the method gives weight samples (:meth:`parameter_samples`): the mechanism
        stage compares the methods that do."""
        return type(self).parameter_samples is not MethodBase.parameter_samples

    def _check_kind(self, spec: TrainingSpec, kind: str) -> None:
        if spec.kind != kind:
            raise ValueError(f"{self.id} trains runs of kind {kind!r}, got {spec.kind!r}")

    def __repr__(self) -> str:
        return f"<method {self.id}>"
