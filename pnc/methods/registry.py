"""One registry class for both method families, and the one error an unknown method id raises.

The regression family (:mod:`pnc.methods.regression`) and the OOD family (:mod:`pnc.methods.ood`)
each hold one :class:`Registry` of their methods (instances of the family's base class), in the
order the tables list them. Code outside the package (a test, a notebook) adds a method with
:meth:`Registry.register`; a method of the package adds one line to its family's registry.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownMethodError(KeyError, ValueError):
    """An unknown method id (a ``KeyError`` and a ``ValueError``); the message lists the
    registered ids of the family asked."""

    def __str__(self) -> str:
        return str(self.args[0])


class Registry(Generic[T]):
    """The methods of one family by id, in registration order.

    Args:
        family: the family's name in messages (``"regression"``, ``"OOD"``).
        base: the family's base class; :meth:`register` refuses other objects.
        methods: the methods registered from the start.
    """

    def __init__(self, family: str, base: type[T], methods: Iterable[T] = ()) -> None:
        self.family = family
        self.base = base
        self._methods: dict[str, T] = {}
        for method in methods:
            self.register(method)

    def get(self, method_id: str) -> T:
        """The method registered under ``method_id``.

        Raises:
            UnknownMethodError: (a ``KeyError`` and ``ValueError``) listing :meth:`ids`.
        """
        try:
            return self._methods[method_id]
        except (KeyError, TypeError):
            raise UnknownMethodError(
                f"unknown {self.family} method {method_id!r}; registered ids: "
                + ", ".join(self._methods)
            ) from None

    def register(self, method: T) -> T:
        """Add ``method`` under its id, after the registered ones. Returns ``method``.

        Raises:
            TypeError: ``method`` is not an instance of the family's base class.
            ValueError: its id is already registered.
        """
        if not isinstance(method, self.base):
            raise TypeError(
                f"{method!r} is not a method of the {self.family} family ({self.base.__module__}."
                f"{self.base.__qualname__})"
            )
        if method.id in self._methods:
            raise ValueError(f"{self.family} method {method.id!r} is already registered")
        self._methods[method.id] = method
        return method

    def unregister(self, method_id: str) -> None:
        """Remove the method ``method_id`` (unknown ids raise :class:`UnknownMethodError`)."""
        self.get(method_id)
        del self._methods[method_id]

    def registered(self) -> tuple[T, ...]:
        """Every registered method, in registration order."""
        return tuple(self._methods.values())

    def ids(self) -> tuple[str, ...]:
        """The registered ids, in registration order."""
        return tuple(self._methods)

    def module_getattr(self, module: str):
        """A ``__getattr__`` for the family's module: its ``METHOD_IDS`` are :meth:`ids` when
        read, so a method registered later is among them."""

        def __getattr__(name: str):
            if name == "METHOD_IDS":
                return self.ids()
            raise AttributeError(f"module {module!r} has no attribute {name!r}")

        return __getattr__

    def __contains__(self, method_id: object) -> bool:
        return method_id in self._methods

    def __repr__(self) -> str:
        return f"<{self.family} methods: {', '.join(self._methods)}>"
