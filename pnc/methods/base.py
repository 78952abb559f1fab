"""The contract every method of both studies shares (as scikit-learn's ``BaseEstimator`` under
its classifier and regressor mixins): :class:`BaseMethod`.

A method is a class with one instance in its family's registry (:class:`pnc.methods.registry.
Registry`). Every method declares

- ``id``: its id in configs, on the command line and in the result files;
- ``label``: its name in tables and figure legends (a method both studies run takes it from
  :data:`pnc.methods.labels.SHARED_LABELS`, so it has one name in every table);
- ``config_cls``: the frozen dataclass of its configuration, every field with a default.

and inherits the strict making and naming of a configuration: :meth:`BaseMethod.make_config`
(the defaults, the pinned ``fixed`` values, then the overrides converted by
:func:`pnc.methods.coerce.coerce`; an unknown key is refused with the valid keys listed) and
:meth:`BaseMethod.config_id`. The two families add what their study needs:

- :class:`pnc.methods.regression.contract.MethodBase` (the MuJoCo study): train a run, build a
  posterior, draw Gaussian predictive samples;
- :class:`pnc.methods.ood.posthoc.PosthocMethod` (the CIFAR study): build the configurations of
  a grid on trained networks, select one on validation, score every evaluation set.

:func:`pnc.methods.checks.check_method` holds a method of either family to its contract.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from typing import Any, ClassVar

from pnc.methods.configs import config_id, field_names, make_config


class BaseMethod:
    """What every method of both studies declares and inherits.

    Attributes:
        family: the family's name in messages (set by the family's base class).
        id: the method id.
        label: its display name.
        config_cls: frozen dataclass of its configuration (every field has a default).
        id_fields: the fields always shown in :meth:`config_id` (the swept ones).
        fixed: values pinned for fields of ``config_cls`` the method does not accept.

    A class with an ``id`` is a method: its declarations are checked when it is defined (a shared
    base of several methods declares none and is not checked).
    """

    family: ClassVar[str] = "method"
    id: ClassVar[str]
    label: ClassVar[str]
    config_cls: ClassVar[type]
    id_fields: ClassVar[tuple[str, ...]] = ()
    fixed: ClassVar[Mapping[str, Any]] = types.MappingProxyType({})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not hasattr(cls, "id"):
            return
        problems = [
            f"no {name} declared" for name in ("label", "config_cls") if not hasattr(cls, name)
        ]
        if not isinstance(cls.id, str) or not cls.id.isidentifier():
            problems.append(f"id {cls.id!r} is not a name")
        if not problems:
            if not isinstance(cls.label, str) or not cls.label:
                problems.append(f"label {cls.label!r} is not a name")
            if not (isinstance(cls.config_cls, type) and dataclasses.is_dataclass(cls.config_cls)):
                problems.append(f"config_cls {cls.config_cls!r} is not a dataclass")
            else:
                problems += cls._declaration_problems()
        if problems:
            raise TypeError(f"{cls.family} method {cls.__name__}: " + "; ".join(problems))

    @classmethod
    def _declaration_problems(cls) -> list[str]:
        """The family's own checks of a method's declarations, one line per problem."""
        return []

    @property
    def config_keys(self) -> tuple[str, ...]:
        """The fields a configuration may set (default: every field of ``config_cls``)."""
        return field_names(self.config_cls)

    @property
    def config_where(self) -> str | None:
        """How messages about a configuration name it (``None``: by its class)."""
        return None

    def make_config(self, overrides: Mapping[str, Any] | None = None) -> Any:
        """Its configuration: the defaults, :attr:`fixed`, then ``overrides`` converted to the
        fields' types (:func:`pnc.methods.configs.make_config`).

        Raises:
            ValueError: an unknown key (the message lists :attr:`config_keys`) or a value that is
                not of its field's type (the message names the key, the value and the type).
        """
        return make_config(
            self.config_cls,
            overrides,
            keys=self.config_keys,
            fixed=self.fixed,
            where=self.config_where,
        )

    def config_id(self, config: Any) -> str:
        """Readable id of ``config`` over :attr:`config_keys` (:func:`pnc.methods.configs.
        config_id`): ``id_fields`` always, then every other key not at its default."""
        self._check_config(config)
        return config_id(config, self.id_fields, self.config_keys)

    def _check_config(self, config: Any) -> None:
        """Refuse a ``config`` that is not of :attr:`config_cls` or changes a pinned field."""
        if not isinstance(config, self.config_cls):
            raise TypeError(
                f"{self.id} expects a {self.config_cls.__name__}, got {type(config).__name__}"
            )
        accepted = set(self.config_keys)
        for field in dataclasses.fields(config):
            if field.name in accepted:
                continue
            pinned = self.fixed.get(field.name, field.default)
            if pinned is dataclasses.MISSING:  # a field made by a factory is not pinned
                continue
            value = getattr(config, field.name)
            if value != pinned:
                raise ValueError(f"{self.id} fixes {field.name}={pinned!r}, got {value!r}")

    def __repr__(self) -> str:
        return f"<{self.family} method {self.id}>"
