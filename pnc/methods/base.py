"""The contract every uncertainty method implements, its configuration rules and shared utilities.

A method is used in three steps, each a pure function of its inputs and an explicit PRNG key:

1. **train** a :class:`TrainingRun` (identified by a :class:`TrainingSpec`). Several method
   configurations share one run whenever the hyperparameters that differ are post-hoc: every P&C
   configuration, the SWAG scales, the Subspace temperatures and the Laplace prior precisions all
   reuse the one ``base`` run (:mod:`pnc.methods.base_run`); Deep Ensembles and each MC-Dropout
   rate have runs of their own.
2. **build** a posterior from the run (post-hoc construction, e.g. P&C members, the KFAC factors).
   Posteriors are pytrees whose leaves are their arrays, so ``jax.block_until_ready(posterior)``
   waits for the construction.
3. **predict** ``S`` Gaussian samples on standardised inputs, as a :class:`pnc.Predictive`.

All arrays handled here are in *standardised* units (inputs and targets standardised with the
training statistics stored in ``run.model``).

**Configurations.** A method's hyperparameters are a frozen dataclass (``config_cls``) whose fields
all have defaults. A method accepts the fields named in its ``config_keys`` (its
``training_fields`` and ``posthoc_fields``); every other field of ``config_cls`` is pinned, to the
value in the method's ``fixed`` mapping or else to the field's default. This lets two methods share
one config class: ``pnc`` and ``pnc_nocorr`` both use :class:`pnc.perturb_correct.PnCConfig`, the
latter pinning ``correct=False`` and ``bootstrap_frac=None`` and not accepting ``ridge``. A
workflow turns a YAML grid into configs with :func:`make_config` (unknown keys and ill-typed values
are rejected with a message naming the key) and names each one by :func:`config_id`, e.g.
``"sigma=16,bootstrap_frac=0.1,ridge=0.0001"``: the method's swept fields (``id_fields``) always,
followed by every other accepted key that differs from its default, so two different
configurations of one method never share an id and the default one reads like the paper's tables.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from pnc.io import (
    ArtifactError,
    file_sha256,
    load_pytree,
    read_json,
    rebuild_hint,
    save_pytree,
    write_json,
)
from pnc.mlp import MLPConfig
from pnc.predictive import Predictive, gaussian_draws
from pnc.train import (
    Standardizer,
    TrainConfig,
    TrainedModel,
    model_from_state,
    model_state,
    standardizers,
)

Array = jax.Array


# ----------------------------------------------------------------------------- training runs


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
        """Write ``run.msgpack`` (params, standardisers, extras) and ``run.json``; never pickles.

        ``run.json`` records the SHA-256 of ``run.msgpack`` (``msgpack_sha256``), which
        :meth:`load` verifies.
        """
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
                "msgpack_sha256": file_sha256(directory / "run.msgpack"),
            },
        )

    @classmethod
    def load(cls, directory: str | Path) -> TrainingRun:
        """Read a run written by :meth:`save`.

        Raises:
            FileNotFoundError: ``run.json`` or ``run.msgpack`` is missing (named).
            pnc.io.ArtifactError: a file is truncated or corrupt, or ``run.msgpack`` does not
                match the SHA-256 recorded in ``run.json`` (named, with the command that rebuilds
                the run). Runs saved without a recorded SHA-256 are read unverified.
        """
        directory = Path(directory)
        info_path, tree_path = directory / "run.json", directory / "run.msgpack"
        info = read_json(info_path)
        if not tree_path.is_file():
            raise FileNotFoundError(f"{tree_path} not found; {rebuild_hint(tree_path)}")
        expected = info.get("msgpack_sha256") if isinstance(info, dict) else None
        if expected is not None and file_sha256(tree_path) != expected:
            raise ArtifactError(
                f"{tree_path} does not match the SHA-256 recorded in {info_path} (truncated, "
                f"corrupt or replaced); {rebuild_hint(info_path)}"
            )
        tree = load_pytree(tree_path)
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


# ----------------------------------------------------------------------------- the contract


class Method(Protocol):
    """What the registry returns for a method id.

    Attributes:
        id: the method id (``pnc``, ``pnc_nocorr``, ``deep_ensemble``, ``mc_dropout``, ``swag``,
            ``laplace``, ``subspace``).
        config_cls: frozen dataclass of the method's hyperparameters (all fields have defaults).
        training_fields: names of ``config_cls`` fields that change the training run.
        posthoc_fields: names of the fields that only change the post-hoc construction/sampling.
        id_fields: the fields swept in the paper's grid, always shown in :meth:`config_id`.
        fixed: values this method pins for fields of ``config_cls`` that it does not accept.
        config_keys: the accepted fields (``training_fields`` and ``posthoc_fields``) in
            ``config_cls`` order; the other fields are pinned (``fixed``, else their default).
        key_id: the name the study derives the method's construction and sampling keys from
            (methods with equal ``key_id`` share keys).
    """

    id: ClassVar[str]
    config_cls: ClassVar[type]
    training_fields: ClassVar[tuple[str, ...]]
    posthoc_fields: ClassVar[tuple[str, ...]]
    id_fields: ClassVar[tuple[str, ...]]
    fixed: ClassVar[Mapping[str, Any]]

    @property
    def config_keys(self) -> tuple[str, ...]: ...

    @property
    def key_id(self) -> str: ...

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
        validation: tuple[Array, Array] | None = None,
    ) -> TrainingRun:
        """Run the training ``spec`` on raw (unstandardised) ``x [N, in]``, ``y [N, D]``;
        ``validation`` is raw ``(x_val, y_val)``, required when ``train_config.patience`` is set
        (early stopping)."""
        ...

    def build(self, run: TrainingRun, config: Any, x: Array, y: Array, *, key: Array) -> Any:
        """Post-hoc construction from standardised training data ``x [N, in]``, ``y [N, D]``.

        P&C uses ``x`` as its calibration set; Laplace and Subspace Inference use both. The result
        is a pytree whose leaves are its arrays (configs and sizes are static metadata).
        """
        ...

    def study_problems(self, config: Any, study: Any) -> tuple[list[str], list[str]]:
        """This configuration checked against the study it runs in, before any job runs.

        Args:
            config: one of the method's configurations.
            study: the study's :class:`pnc.study.config_check.StudyContext` (``hidden``,
                ``envs``, ``input_dims``, ``train``, ``max_train_rows``, ``pool_text``).

        Returns:
            ``(errors, warnings)``, one line each, naming the keys (default: none).
        """
        ...

    def build_groups(self, configs: Sequence[Any]) -> list[list[int]]:
        """Partition of ``range(len(configs))`` into groups that :meth:`build_many` builds together."""
        ...

    def build_many(
        self, run: TrainingRun, configs: Sequence[Any], x: Array, y: Array, *, key: Array
    ) -> list[Any]:
        """``[self.build(run, c, x, y, key=key) for c in configs]``, sharing work where it can."""
        ...

    def predict(self, posterior: Any, x: Array, *, key: Array) -> Predictive:
        """``S`` predictive samples on standardised inputs ``x [N, in]`` (means/vars ``[S, N, D]``)."""
        ...


# ----------------------------------------------------------------------------- configs


def _coerce(name: str, value: Any, annotation: Any) -> Any:
    """Convert ``value`` to the field type ``annotation`` or raise ``ValueError`` naming ``name``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(name, value, arg)
            except ValueError as err:
                errors.append(str(err))
        raise ValueError("; ".join(errors))
    if annotation is bool:
        if isinstance(value, bool | np.bool_):
            return bool(value)
        raise ValueError(f"{name} must be true or false, got {value!r}")
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise ValueError(f"{name} must be an integer, got {value!r}")
        return int(value)
    if annotation is float:
        if isinstance(value, bool):
            raise ValueError(f"{name} must be a number, got {value!r}")
        try:
            out = float(value)  # YAML 1.1 reads "1e-4" as a string
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number, got {value!r}") from None
        if not math.isfinite(out):
            raise ValueError(f"{name} must be finite, got {value!r}")
        return out
    if annotation is str:
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a string, got {value!r}")
        return value
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ValueError(f"{name} must be a list, got {value!r}")
        return tuple(_coerce(name, v, args[0]) for v in value)
    raise TypeError(f"unsupported field type {annotation!r} for {name}")


def _field_names(config_cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(config_cls))


def make_config(
    config_cls: type,
    overrides: Mapping[str, Any] | None = None,
    *,
    keys: tuple[str, ...] | None = None,
    fixed: Mapping[str, Any] | None = None,
) -> Any:
    """Build a config from its defaults, ``fixed`` values and a mapping of overrides.

    Args:
        config_cls: frozen dataclass whose fields all have defaults.
        overrides: values of accepted keys (e.g. one point of a YAML grid); converted to the
            fields' annotated types (``int``, ``float``, ``bool``, ``tuple[...]``, optionals).
        keys: the fields that may be overridden (default: all fields of ``config_cls``).
        fixed: values passed for fields outside ``keys`` (used as given, not coerced).

    Raises:
        ValueError: on a key outside ``keys`` (the message lists the valid ones) or a value of the
            wrong type or out of range (the message names the key).
    """
    overrides = dict(overrides or {})
    keys = _field_names(config_cls) if keys is None else tuple(keys)
    unknown = sorted(set(overrides) - set(keys))
    if unknown:
        raise ValueError(
            f"unknown {config_cls.__name__} key(s) {unknown}; valid keys: {', '.join(keys)}"
        )
    hints = typing.get_type_hints(config_cls)
    kwargs = {k: _coerce(k, v, hints[k]) for k, v in overrides.items()}
    return config_cls(**kwargs, **dict(fixed or {}))


def _format_value(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    if isinstance(value, tuple):
        return "+".join(_format_value(v) for v in value) if value else "()"
    return str(value)


def config_id(
    config: Any, id_fields: tuple[str, ...] = (), keys: tuple[str, ...] | None = None
) -> str:
    """Stable readable id: ``id_fields`` always, then every other key that is not at its default.

    Example: ``config_id(PnCConfig(), ("sigma", "bootstrap_frac", "ridge"))`` is
    ``"sigma=16,bootstrap_frac=0.1,ridge=0.0001"``. Only the fields in ``keys`` (default: all
    fields) are considered, in field order after the ``id_fields``. Floats are written losslessly
    (``repr``, without a trailing ``.0``), tuples joined by ``+``. A config with no ``id_fields``
    and only defaults is ``"default"``.
    """
    keys = _field_names(type(config)) if keys is None else tuple(keys)
    parts = [f"{name}={_format_value(getattr(config, name))}" for name in id_fields]
    for field in dataclasses.fields(config):
        if field.name in id_fields or field.name not in keys:
            continue
        value = getattr(config, field.name)
        if field.default is dataclasses.MISSING or value != field.default:
            parts.append(f"{field.name}={_format_value(value)}")
    return ",".join(parts) or "default"


def check_positive(config: Any, *names: str) -> None:
    """Raise ``ValueError`` naming the first field of ``names`` that is not ``> 0``."""
    for name in names:
        if not getattr(config, name) > 0:
            raise ValueError(f"{name} must be > 0, got {getattr(config, name)!r}")


def check_choice(config: Any, name: str, choices: Sequence[str]) -> None:
    """Raise ``ValueError`` naming the field ``name`` if its value is not one of ``choices``."""
    value = getattr(config, name)
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def check_max_rows(config: Any) -> None:
    """Raise ``ValueError`` unless ``config.max_rows`` is ``None`` (all rows) or ``>= 1``."""
    if config.max_rows is not None and config.max_rows < 1:
        raise ValueError(f"max_rows must be >= 1 or null (all rows), got {config.max_rows!r}")


PREDICTIVE_RULES = ("mixture", "sample")
"""How a method's ``S`` Gaussians become its predictive (the ``predictive`` option).

``mixture``: the ``S`` Gaussians themselves, combined by :func:`pnc.mixture` (Lakshminarayanan et
al.); ``sample``: one draw from each, as point masses (:func:`pnc.predictive.gaussian_draws`), so
the predictive mean and variance are those of the ``S`` draws (the authors' code)."""


def apply_predictive_rule(pred: Predictive, rule: str, key: Array) -> Predictive:
    """``pred`` itself (``mixture``) or one draw per sample from ``key`` (``sample``)."""
    if rule == "mixture":
        return pred
    if rule == "sample":
        return gaussian_draws(pred, key)
    raise ValueError(f"predictive must be one of {', '.join(PREDICTIVE_RULES)}; got {rule!r}")


#: The channels of a method's figure style (:attr:`MethodBase.style`).
STYLE_KEYS = ("color", "marker", "linestyle", "hatch")


class MethodBase:
    """Shared behaviour of the registered methods (configs, ids); subclasses set the ClassVars.

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
        run_kind: the :attr:`TrainingSpec.kind` its :meth:`train` trains (``"base"`` for the
            methods built post hoc on the shared run).
        label: display name (table rows, figure legends).
        short_label: abbreviation (table column headers, figure axis ticks).
        ranked: whether the method takes part in ranks and tests (ablations do not).
        row: position in the tables' row order (ascending; the paper puts P&C last).
        style: figure style: ``color``, ``marker``, ``linestyle`` and ``hatch``.
        hparam_abbreviations: abbreviations of its hyperparameter names in the
            selected-configuration table (paper Table 3).

    The declarations are checked when a subclass is defined: ``training_fields`` and
    ``posthoc_fields`` are disjoint fields of ``config_cls``, ``id_fields`` are among them, and
    ``fixed`` names only fields that are not accepted.
    """

    id: ClassVar[str]
    config_cls: ClassVar[type]
    training_fields: ClassVar[tuple[str, ...]] = ()
    posthoc_fields: ClassVar[tuple[str, ...]] = ()
    id_fields: ClassVar[tuple[str, ...]] = ()
    fixed: ClassVar[Mapping[str, Any]] = types.MappingProxyType({})
    shares_keys_with: ClassVar[str | None] = None
    run_kind: ClassVar[str]
    label: ClassVar[str]
    short_label: ClassVar[str]
    ranked: ClassVar[bool] = True
    row: ClassVar[int]
    style: ClassVar[Mapping[str, object]]
    hparam_abbreviations: ClassVar[Mapping[str, str]] = types.MappingProxyType({})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names = set(_field_names(cls.config_cls))
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
        missing = [
            name
            for name in ("run_kind", "label", "short_label", "row", "style")
            if not hasattr(cls, name)
        ]
        if missing:
            problems.append(f"no {', '.join(missing)} declared")
        elif set(cls.style) != set(STYLE_KEYS):
            problems.append(f"style must set exactly {', '.join(STYLE_KEYS)}")
        if problems:
            raise TypeError(f"method {cls.__name__}: " + "; ".join(problems))

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
        return tuple(name for name in _field_names(self.config_cls) if name in accepted)

    def make_config(self, overrides: Mapping[str, Any] | None = None) -> Any:
        """Config from the defaults, :attr:`fixed` and ``overrides`` (see :func:`make_config`)."""
        return make_config(self.config_cls, overrides, keys=self.config_keys, fixed=self.fixed)

    def config_id(self, config: Any) -> str:
        """Readable id of ``config`` over the accepted keys (see :func:`config_id`)."""
        self._check_config(config)
        return config_id(config, self.id_fields, self.config_keys)

    def _check_config(self, config: Any) -> None:
        if not isinstance(config, self.config_cls):
            raise TypeError(
                f"{self.id} expects a {self.config_cls.__name__}, got {type(config).__name__}"
            )
        accepted = set(self.config_keys)
        for field in dataclasses.fields(config):
            if field.name in accepted:
                continue
            pinned = self.fixed.get(field.name, field.default)
            value = getattr(config, field.name)
            if value != pinned:
                raise ValueError(f"{self.id} fixes {field.name}={pinned!r}, got {value!r}")

    def study_problems(self, config: Any, study: Any) -> tuple[list[str], list[str]]:
        """This configuration checked against the study it runs in, before any job runs.

        Args:
            config: one of the method's configurations.
            study: the study's :class:`pnc.study.config_check.StudyContext` (``hidden``,
                ``envs``, ``input_dims``, ``train``, ``max_train_rows``, ``pool_text``).

        Returns:
            ``(errors, warnings)``, one line each, naming the keys (default: none).
        """
        return [], []

    def build_groups(self, configs: Sequence[Any]) -> list[list[int]]:
        """Groups of configurations built together by :meth:`build_many` (default: one each)."""
        return [[i] for i in range(len(configs))]

    def build_many(
        self, run: TrainingRun, configs: Sequence[Any], x: Array, y: Array, *, key: Array
    ) -> list[Any]:
        """The posteriors of ``configs`` built with one ``key`` (default: one :meth:`build` each)."""
        return [self.build(run, config, x, y, key=key) for config in configs]

    def parameter_samples(self, posterior: Any, key: Array) -> tuple[Any, Any]:
        """The weight samples :meth:`predict` evaluates (same key use), a parameter pytree with a
        leading ``[S]`` axis, and the reference network (used by the mechanism stage). Methods
        whose samples are not weights of the MLP do not override it.

        Raises:
            ValueError: the method has no parameter samples.
        """
        raise ValueError(f"method {self.id!r} has no parameter samples")

    def _check_kind(self, spec: TrainingSpec, kind: str) -> None:
        if spec.kind != kind:
            raise ValueError(f"{self.id} trains runs of kind {kind!r}, got {spec.kind!r}")

    def __repr__(self) -> str:
        return f"<method {self.id}>"


# ----------------------------------------------------------------------------- data


def standardise(
    x: np.ndarray, y: np.ndarray, out_dim: int, train_config: TrainConfig
) -> tuple[Standardizer, Standardizer]:
    """The input/target standardisers of raw training data ``x [N, in]``, ``y [N, D]``
    (identities when ``train_config.standardize`` is false)."""
    x = np.asarray(x)
    y = np.asarray(y)
    if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must be [N, *] with the same N, got {x.shape} and {y.shape}")
    if y.shape[1] != out_dim:
        raise ValueError(f"model out_dim {out_dim} != target dim {y.shape[1]}")
    return standardizers(x, y, train_config)


def check_inputs(x: Array, in_dim: int) -> Array:
    """Standardised inputs as float32 ``[N, in_dim]`` (clear error otherwise)."""
    x = jnp.asarray(x, jnp.float32)
    if x.ndim != 2 or x.shape[1] != in_dim:
        raise ValueError(f"expected standardised inputs of shape [N, {in_dim}], got {x.shape}")
    return x


# ----------------------------------------------------------------------------- sampling


def sample_predictive(
    sample_fn: Callable[[Any], tuple[Array, Array]], xs: Any, chunk_size: int
) -> Predictive:
    """Evaluate ``sample_fn`` on every leading slice of ``xs`` in chunks of ``chunk_size``.

    Inside a chunk the samples are computed with ``vmap``; chunks run one after another
    (``lax.map``), so at most ``chunk_size`` weight samples exist at once.

    Args:
        sample_fn: maps one sample's inputs (a key, a coordinate vector, ...) to
            ``(mean [N, D], var [N, D])``.
        xs: pytree whose leaves have a leading sample axis ``S``.
        chunk_size: samples evaluated together.

    Returns:
        :class:`Predictive` with ``means``/``variances`` of shape ``[S, N, D]``.
    """
    means, variances = jax.lax.map(sample_fn, xs, batch_size=chunk_size)
    return Predictive(means, variances)
