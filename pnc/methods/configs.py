"""Method configurations: parsing a YAML grid point into a config, and naming it.

A method's hyperparameters are a frozen dataclass (``config_cls``) whose fields all have defaults.
A method accepts the fields named in its ``config_keys`` (its ``training_fields`` and
``posthoc_fields``, :class:`pnc.methods.regression.contract.MethodBase`); every other field of
``config_cls`` is pinned, to the value in the method's ``fixed`` mapping or else to the field's
default. This lets two methods share one config class: ``pnc`` and ``pnc_nocorr`` both use
:class:`pnc.core.perturb_correct.PnCConfig`, the latter pinning ``correct=False`` and
``bootstrap_frac=None`` and not accepting ``ridge``. A workflow turns a YAML grid into configs with
:func:`make_config` (unknown keys and ill-typed values are rejected with a message naming the key)
and names each one by :func:`config_id`, e.g. ``"sigma=16,bootstrap_frac=0.1,ridge=0.0001"``: the
method's swept fields (``id_fields``) always, followed by every other accepted key that differs
from its default, so two different configurations of one method never share an id and the default
one reads like the paper's tables. :func:`parse_config_id` is its exact inverse (an id back to
the config), :func:`config_id_items` the id's ``name -> value text`` pairs for code that only
shows them. :func:`check_positive`, :func:`check_choice` and :func:`check_max_rows` are the value
checks the methods' configs share.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from pnc.methods.coerce import coerce


def field_names(config_cls: type) -> tuple[str, ...]:
    """The field names of the dataclass ``config_cls``, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(config_cls))


def make_config(
    config_cls: type,
    overrides: Mapping[str, Any] | None = None,
    *,
    keys: tuple[str, ...] | None = None,
    fixed: Mapping[str, Any] | None = None,
    where: str | None = None,
) -> Any:
    """Build a config from its defaults, ``fixed`` values and a mapping of overrides.

    Args:
        config_cls: frozen dataclass whose fields all have defaults.
        overrides: values of accepted keys (e.g. one point of a YAML grid); converted to the
            fields' annotated types (``int``, ``float``, ``bool``, ``tuple[...]``, optionals).
        keys: the fields that may be overridden (default: all fields of ``config_cls``).
        fixed: values passed for fields outside ``keys`` (used as given, not coerced).
        where: the section the overrides come from (``"methods.swag"``): messages name it and
            its keys as ``<where>.<key>``; ``None``: messages name the class and the bare keys.

    Raises:
        ValueError: on a key outside ``keys`` (the message lists the valid ones) or a value of the
            wrong type (:func:`pnc.methods.coerce.coerce`: the message names the key, the value
            and the type).
    """
    overrides = dict(overrides or {})
    keys = field_names(config_cls) if keys is None else tuple(keys)
    unknown = sorted(set(overrides) - set(keys), key=str)
    if unknown and where is None:
        raise ValueError(
            f"unknown {config_cls.__name__} key(s) {unknown}; valid keys: {', '.join(keys)}"
        )
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {', '.join(map(str, unknown))}; valid keys: "
            + (", ".join(keys) or "none")
        )
    hints = typing.get_type_hints(config_cls)
    prefix = "" if where is None else f"{where}."
    kwargs = {k: coerce(prefix + k, v, hints[k]) for k, v in overrides.items()}
    return config_cls(**kwargs, **dict(fixed or {}))


def format_value(value: Any) -> str:
    """A value as a configuration id writes it: floats losslessly without a trailing ``.0``,
    tuples joined by ``+``."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    if isinstance(value, tuple):
        return "+".join(format_value(v) for v in value) if value else "()"
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
    keys = field_names(type(config)) if keys is None else tuple(keys)
    parts = [f"{name}={format_value(getattr(config, name))}" for name in id_fields]
    for field in dataclasses.fields(config):
        if field.name in id_fields or field.name not in keys:
            continue
        value = getattr(config, field.name)
        if field.default is dataclasses.MISSING or value != field.default:
            parts.append(f"{field.name}={format_value(value)}")
    return ",".join(parts) or "default"


def config_id_items(text: str) -> dict[str, str]:
    """The ``name -> value text`` pairs of a :func:`config_id`, in the id's order.

    ``"default"`` (and the empty string) have none. Example: ``config_id_items("sigma=8,ridge=0.01")``
    is ``{"sigma": "8", "ridge": "0.01"}``.

    Raises:
        ValueError: an item has no ``=`` or no name, or a name appears twice.
    """
    if text in ("", "default"):
        return {}
    items: dict[str, str] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"configuration id {text!r}: item {item!r} is not name=value")
        if name in items:
            raise ValueError(f"configuration id {text!r} names {name!r} twice")
        items[name] = value.strip()
    return items


def _literal(text: str, annotation: Any) -> Any:
    """The value ``text`` writes (a bool, an integer, a number, else the text itself; for a
    ``str`` field always the text), before :func:`pnc.methods.coerce.coerce` checks its type."""
    if annotation is str:
        return text
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _parse_value(name: str, text: str, annotation: Any) -> Any:
    """The field value :func:`format_value` wrote as ``text``, for a field of type ``annotation``
    (read by :func:`_literal`, tuples split at ``+``, then checked by the strict
    :func:`pnc.methods.coerce.coerce`)."""
    if text == "None":
        return coerce(name, None, annotation)
    kind = annotation
    if typing.get_origin(kind) in (typing.Union, types.UnionType):  # X | None
        kind = next(a for a in typing.get_args(kind) if a is not type(None))
    if typing.get_origin(kind) is tuple:
        item = typing.get_args(kind)[0]
        value = () if text == "()" else tuple(_literal(v, item) for v in text.split("+"))
    else:
        value = _literal(text, kind)
    return coerce(name, value, annotation)


def parse_config_id(
    text: str,
    config_cls: type,
    *,
    keys: tuple[str, ...] | None = None,
    fixed: Mapping[str, Any] | None = None,
) -> Any:
    """The config whose :func:`config_id` is ``text``: the exact inverse of :func:`config_id`.

    Each value is read back by its field's annotated type (floats as written by ``repr``, tuples
    split at ``+``, ``None``, ``True``/``False``); fields the id leaves out take their defaults
    (or ``fixed``), as in :func:`make_config`, which checks the keys and values.

    Args:
        text: a configuration id, e.g. ``"sigma=16,bootstrap_frac=0.1,ridge=0.0001"``.
        config_cls: the frozen dataclass of the configuration.
        keys: the fields an id may name (default: all fields of ``config_cls``).
        fixed: values of fields outside ``keys``, as for :func:`make_config`.

    Raises:
        ValueError: a malformed id, a name outside ``keys`` or a value its field cannot hold.
    """
    hints = typing.get_type_hints(config_cls)
    items = config_id_items(text)
    unknown = sorted(set(items) - set(hints))
    if unknown:
        valid = field_names(config_cls) if keys is None else keys
        raise ValueError(
            f"unknown {config_cls.__name__} key(s) {unknown}; valid keys: {', '.join(valid)}"
        )
    values = {name: _parse_value(name, value, hints[name]) for name, value in items.items()}
    return make_config(config_cls, values, keys=keys, fixed=fixed)


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
