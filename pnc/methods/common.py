"""Pieces shared by the methods: hyperparameter configs from overrides, readable config ids,
standardisation of a training set, and chunked sampling of predictive samples.

Configs are small frozen dataclasses whose fields all have defaults. A workflow turns a YAML grid
into configs with :func:`make_config` (unknown keys and ill-typed values are rejected with a message
naming the key) and names each one by :func:`config_id`, e.g. ``"sigma=16,bootstrap_frac=0.1,
ridge=0.0001"``: the method's swept fields (``id_fields``) always, followed by every other field that
differs from its default, so two different configurations never share an id and the default one reads
like the paper's tables.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from pnc.methods.base import TrainingSpec
from pnc.predictive import Predictive
from pnc.train import Standardizer

Array = jax.Array


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
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ValueError(f"{name} must be a list, got {value!r}")
        return tuple(_coerce(name, v, args[0]) for v in value)
    raise TypeError(f"unsupported field type {annotation!r} for {name}")


def make_config(config_cls: type, overrides: Mapping[str, Any] | None = None) -> Any:
    """Build a config from its defaults and a mapping of overrides (e.g. one point of a YAML grid).

    Raises:
        ValueError: on an unknown key (the message lists the valid ones) or a value of the wrong
            type or out of range (the message names the key).
    """
    overrides = dict(overrides or {})
    hints = typing.get_type_hints(config_cls)
    names = [f.name for f in dataclasses.fields(config_cls)]
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        raise ValueError(
            f"unknown {config_cls.__name__} key(s) {unknown}; valid keys: {', '.join(names)}"
        )
    kwargs = {k: _coerce(k, v, hints[k]) for k, v in overrides.items()}
    return config_cls(**kwargs)


def _format_value(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    if isinstance(value, tuple):
        return "+".join(_format_value(v) for v in value) if value else "()"
    return str(value)


def config_id(config: Any, id_fields: tuple[str, ...] = ()) -> str:
    """Stable readable id: ``id_fields`` always, then every other field that is not at its default.

    Example: ``config_id(PnCConfig(), ("sigma", "bootstrap_frac", "ridge"))`` is
    ``"sigma=16,bootstrap_frac=0.1,ridge=0.0001"``. Floats are written losslessly (``repr``,
    without a trailing ``.0``), tuples joined by ``+``. A config with no ``id_fields`` and only
    defaults is ``"default"``.
    """
    fields = {f.name: f for f in dataclasses.fields(config)}
    parts = [f"{name}={_format_value(getattr(config, name))}" for name in id_fields]
    for name, field in fields.items():
        if name in id_fields:
            continue
        value = getattr(config, name)
        if field.default is dataclasses.MISSING or value != field.default:
            parts.append(f"{name}={_format_value(value)}")
    return ",".join(parts) or "default"


def check_positive(config: Any, *names: str) -> None:
    for name in names:
        if not getattr(config, name) > 0:
            raise ValueError(f"{name} must be > 0, got {getattr(config, name)!r}")


class MethodBase:
    """Shared behaviour of the registered methods (configs, ids); subclasses set the ClassVars.

    Attributes:
        id_fields: the fields swept in the paper's grid, always shown in :meth:`config_id`.
    """

    id: ClassVar[str]
    config_cls: ClassVar[type]
    training_fields: ClassVar[tuple[str, ...]] = ()
    posthoc_fields: ClassVar[tuple[str, ...]] = ()
    id_fields: ClassVar[tuple[str, ...]] = ()

    def make_config(self, overrides: Mapping[str, Any] | None = None) -> Any:
        """Config from the defaults and ``overrides`` (see :func:`make_config`)."""
        return make_config(self.config_cls, overrides)

    def config_id(self, config: Any) -> str:
        """Readable id of ``config`` (see :func:`config_id`)."""
        self._check_config(config)
        return config_id(config, self.id_fields)

    def _check_config(self, config: Any) -> None:
        if not isinstance(config, self.config_cls):
            raise TypeError(
                f"{self.id} expects a {self.config_cls.__name__}, got {type(config).__name__}"
            )

    def _check_kind(self, spec: TrainingSpec, kind: str) -> None:
        if spec.kind != kind:
            raise ValueError(f"{self.id} trains runs of kind {kind!r}, got {spec.kind!r}")

    def __repr__(self) -> str:
        return f"<method {self.id}>"


# ----------------------------------------------------------------------------- data


def standardise(x: np.ndarray, y: np.ndarray, out_dim: int) -> tuple[Standardizer, Standardizer]:
    """Fit the input/target standardisers on raw training data ``x [N, in]``, ``y [N, D]``."""
    x = np.asarray(x)
    y = np.asarray(y)
    if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must be [N, *] with the same N, got {x.shape} and {y.shape}")
    if y.shape[1] != out_dim:
        raise ValueError(f"model out_dim {out_dim} != target dim {y.shape[1]}")
    return Standardizer.fit(x), Standardizer.fit(y)


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
