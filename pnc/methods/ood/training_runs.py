"""The CIFAR study's training runs: the base run every method reads, and the kinds of further run
that methods declare.

A run id is ``base`` (the base run; it also collects the SWAG moments) or the name of a
:class:`RunKind` followed by its setting: ``member2`` (a further Deep Ensemble member, declared by
:mod:`~pnc.methods.ood.deep_ensemble_detector`), ``dropout0.2`` (an MC Dropout run, declared by
:mod:`~pnc.methods.ood.mc_dropout_detector`). A method whose runs differ from the base run in their
recipe declares their kind in ``run_kinds`` and names its runs in ``runs_of``; the workflow trains
every run the configured methods name, each with the recipe its kind sets
(:func:`pnc.methods.ood.recipe_for`), so a new kind of run touches its method's module only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

#: The id of the base run: the network every method reads (it also collects the SWAG moments).
BASE_RUN = "base"


def _no_problem(value: Any) -> str | None:
    return None


@dataclasses.dataclass(frozen=True)
class RunKind:
    """A kind of training run: its ``name`` followed by a setting names each of its runs.

    Attributes:
        name: the prefix of its run ids (letters only; not ``base``), e.g. ``dropout``.
        setting: the setting's type, ``int`` (written as a decimal integer) or ``float`` (written as
            ``format(value, "g")``).
        recipe: the :class:`~pnc.core.classifier.recipe.Recipe` fields a run of this kind sets,
            from its setting (``{}``: the config's recipe as it is).
        check: the problem with a setting (a sentence), or ``None`` for a valid one.

    Raises:
        ValueError: a name that is not letters, or ``base``; a setting type other than int or float.
    """

    name: str
    setting: type
    recipe: Callable[[Any], Mapping[str, Any]]
    check: Callable[[Any], str | None] = _no_problem

    def __post_init__(self) -> None:
        if not self.name.isalpha() or self.name == BASE_RUN:
            raise ValueError(f"a run kind's name is letters other than {BASE_RUN!r}: {self.name!r}")
        if self.setting not in (int, float):
            raise ValueError(f"run kind {self.name!r}: setting must be int or float")

    def run_id(self, value: Any) -> str:
        """The id of the run of setting ``value``, e.g. ``dropout0.2``.

        Raises:
            ValueError: ``value`` is not a valid setting (:attr:`check`).
        """
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"a {self.name} run's setting must be a number, got {value!r}")
        value = self.setting(value)
        problem = self.check(value)
        if problem:
            raise ValueError(f"a {self.name} run: {problem}")
        return f"{self.name}{format(value, 'd' if self.setting is int else 'g')}"

    def read(self, run_id: str) -> Any | None:
        """The setting of the run ``run_id`` names, or ``None`` when it is not a valid id of this
        kind in the form :meth:`run_id` writes."""
        if not run_id.startswith(self.name):
            return None
        try:
            value = self.setting(run_id[len(self.name) :])
            return value if self.run_id(value) == run_id else None
        except ValueError:
            return None


def parse_run(run_id: str, kinds: Mapping[str, RunKind]) -> tuple[RunKind | None, Any]:
    """``(kind, setting)`` of the run ``run_id`` names among ``kinds`` (name -> kind; the
    registry's: :func:`pnc.methods.ood.run_kinds`); ``(None, None)`` for the base run.

    Raises:
        ValueError: ``run_id`` names no run of any kind, or not in the form its kind writes.
    """
    if run_id == BASE_RUN:
        return None, None
    for kind in kinds.values():
        value = kind.read(run_id) if isinstance(run_id, str) else None
        if value is not None:
            return kind, value
    forms = ", ".join([BASE_RUN, *(f"{name}<{k.setting.__name__}>" for name, k in kinds.items())])
    raise ValueError(f"unknown run id {run_id!r} ({forms})")
