"""The one strict conversion of a config value (YAML, a config section, a test) to the type its
dataclass field declares, for the configs of both method families.

``int`` takes an integer (``numpy`` integers too), never ``True``/``False``; ``float`` takes a
number, never a bool (and the text YAML 1.1 leaves ``1e-4`` as), finite; ``bool`` only a bool;
``str`` only a string; ``X | None`` takes ``None`` or an ``X``; ``tuple[X, ...]`` a list or tuple
of ``X``. Every refusal is a ``ValueError`` naming the key, the value and the expected type.
"""

from __future__ import annotations

import math
import types
import typing
from typing import Any

import numpy as np


def coerce(name: str, value: Any, annotation: Any) -> Any:
    """``value`` converted to the field type ``annotation``.

    Args:
        name: the key, as the message names it (``"rank"``, ``"methods.swag.rank"``).
        value: the value given.
        annotation: the field's type: ``int``, ``float``, ``bool``, ``str``, a union with
            ``None``, or ``tuple[X, ...]`` of one of them.

    Raises:
        ValueError: the value is not of the type (the message names ``name``, the value and the
            type).
        TypeError: ``annotation`` is none of the above.
    """
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
                return coerce(name, value, arg)
            except ValueError as err:
                errors.append(str(err))
        raise ValueError("; ".join(errors))
    if annotation is bool:
        if isinstance(value, bool | np.bool_):
            return bool(value)
        raise ValueError(f"{name} must be true or false (bool), got {value!r}")
    if annotation is int:
        if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
            raise ValueError(f"{name} must be an integer (int), got {value!r}")
        return int(value)
    if annotation is float:
        if isinstance(value, bool | np.bool_):
            raise ValueError(f"{name} must be a number (float), got {value!r}")
        try:
            out = float(value)  # YAML 1.1 reads "1e-4" as a string
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number (float), got {value!r}") from None
        if not math.isfinite(out):
            raise ValueError(f"{name} must be finite (float), got {value!r}")
        return out
    if annotation is str:
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a string (str), got {value!r}")
        return value
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ValueError(f"{name} must be a list, got {value!r}")
        return tuple(coerce(name, v, args[0]) for v in value)
    raise TypeError(f"unsupported field type {annotation!r} for {name}")
